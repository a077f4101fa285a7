/**
 * The requests a Raft node host has promised an answer to: proposals waiting for their entry to be
 * applied, and linearizable reads waiting for a ReadIndex round and then for the applied index to
 * reach it. Each request has a deadline; the host expires them on its ticks.
 */
import { HostErrorCode, RaftHostError } from "./host-errors.js";
import type { RequestFraming } from "./request-framing.js";

interface PendingProposal {
  readonly resolve: (value: unknown) => void;
  readonly reject: (error: RaftHostError) => void;
  readonly deadlineMs: number;
  /** Known once the entry was appended to the local log. */
  index: number | null;
}

/** Proposals by request counter, settled when their entry is applied here. */
export class PendingProposals {
  private readonly byCounter = new Map<number, PendingProposal>();

  get size(): number {
    return this.byCounter.size;
  }

  add(counter: number, resolve: (value: unknown) => void, reject: (error: RaftHostError) => void, deadlineMs: number): void {
    this.byCounter.set(counter, { resolve, reject, deadlineMs, index: null });
  }

  /** Records the log index the proposal's entry was appended at. */
  noteIndex(counter: number, index: number): void {
    const pending = this.byCounter.get(counter);
    if (pending) pending.index = index;
  }

  settle(counter: number | null, result: unknown): void {
    if (counter === null) return;
    const pending = this.byCounter.get(counter);
    if (!pending) return;
    this.byCounter.delete(counter);
    pending.resolve(result);
  }

  /** A proposal whose log slot was applied with another entry was overwritten by a new leader. */
  failOverwritten(appliedIndex: number): void {
    for (const [counter, pending] of this.byCounter) {
      if (pending.index !== null && pending.index <= appliedIndex) {
        this.byCounter.delete(counter);
        pending.reject(new RaftHostError(HostErrorCode.ProposalDropped, `log index ${pending.index} was taken by another leader's entry`));
      }
    }
  }

  rejectAll(error: RaftHostError): void {
    for (const pending of this.byCounter.values()) pending.reject(error);
    this.byCounter.clear();
  }

  expire(nowMs: number, leader: string | null): void {
    for (const [counter, pending] of this.byCounter) {
      if (pending.deadlineMs <= nowMs) {
        this.byCounter.delete(counter);
        pending.reject(new RaftHostError(HostErrorCode.Timeout, "no outcome before the proposal deadline", leader));
      }
    }
  }
}

interface ReadWaiter {
  readonly resolve: () => void;
  readonly reject: (error: RaftHostError) => void;
  readonly deadlineMs: number;
}

interface ReadRound {
  readonly counter: number;
  readonly waiters: ReadWaiter[];
  readonly deadlineMs: number;
}

/** What {@link PendingReads} needs of its host. */
export interface ReadRoundHost {
  readonly framing: RequestFraming;
  readonly readTimeoutMs: number;
  nowMs(): number;
  appliedIndex(): number;
  /** Asks the Raft node for a read index with this context; throws what the node throws. */
  requestReadIndex(context: Uint8Array): void;
  /** The host error for what `requestReadIndex` threw (rethrows what is not a Raft error). */
  toHostError(error: unknown): RaftHostError;
  /** Makes the host's loop run. */
  kick(): void;
}

/**
 * Linearizable reads. Reads arriving while a ReadIndex round is in flight share the next round, so
 * at most one round is outstanding; a confirmed round's reads wait until the applied index reaches
 * the read index.
 */
export class PendingReads {
  private next: ReadWaiter[] = [];
  private inFlight: ReadRound | null = null;
  private awaitingApply: { index: number; waiter: ReadWaiter }[] = [];

  constructor(private readonly host: ReadRoundHost) {}

  get size(): number {
    return this.next.length + (this.inFlight?.waiters.length ?? 0) + this.awaitingApply.length;
  }

  add(resolve: () => void, reject: (error: RaftHostError) => void): void {
    this.next.push({ resolve, reject, deadlineMs: this.host.nowMs() + this.host.readTimeoutMs });
    if (!this.inFlight) this.issueRound();
  }

  /** A ReadIndex answer: the round it belongs to now waits for `index` to be applied. */
  onReadState(context: Uint8Array, index: number): void {
    const counter = this.host.framing.ownCounter(context);
    const round = this.inFlight;
    if (counter === null || !round || round.counter !== counter) return;
    this.inFlight = null;
    for (const waiter of round.waiters) this.awaitingApply.push({ index, waiter });
    this.serve();
    this.issueRound();
  }

  /** Resolves the reads whose read index has been applied. */
  serve(): void {
    if (this.awaitingApply.length === 0) return;
    const appliedIndex = this.host.appliedIndex();
    const still: { index: number; waiter: ReadWaiter }[] = [];
    for (const read of this.awaitingApply) {
      if (read.index <= appliedIndex) read.waiter.resolve();
      else still.push(read);
    }
    this.awaitingApply = still;
  }

  /** Fails the reads not yet confirmed (those waiting for the apply stay: their index is confirmed). */
  failUnconfirmed(error: RaftHostError): void {
    for (const waiter of this.next) waiter.reject(error);
    for (const waiter of this.inFlight?.waiters ?? []) waiter.reject(error);
    this.next = [];
    this.inFlight = null;
  }

  failAll(error: RaftHostError): void {
    this.failUnconfirmed(error);
    for (const read of this.awaitingApply) read.waiter.reject(error);
    this.awaitingApply = [];
  }

  expire(nowMs: number, leader: string | null): void {
    if (this.inFlight && this.inFlight.deadlineMs <= nowMs) {
      const error = new RaftHostError(HostErrorCode.Timeout, "read index not confirmed before the deadline", leader);
      for (const waiter of this.inFlight.waiters) waiter.reject(error);
      this.inFlight = null;
      this.issueRound();
    }
    const late = this.awaitingApply.filter((read) => read.waiter.deadlineMs <= nowMs);
    if (late.length > 0) {
      const error = new RaftHostError(HostErrorCode.Timeout, "not applied up to the read index before the deadline", leader);
      for (const read of late) read.waiter.reject(error);
      this.awaitingApply = this.awaitingApply.filter((read) => read.waiter.deadlineMs > nowMs);
    }
  }

  private issueRound(): void {
    if (this.next.length === 0) return;
    const { counter, data } = this.host.framing.frame(new Uint8Array(0));
    const round: ReadRound = { counter, waiters: this.next, deadlineMs: this.host.nowMs() + this.host.readTimeoutMs };
    this.next = [];
    this.inFlight = round;
    try {
      this.host.requestReadIndex(data);
    } catch (error) {
      this.inFlight = null;
      const hostError = this.host.toHostError(error);
      for (const waiter of round.waiters) waiter.reject(hostError);
      return;
    }
    this.host.kick();
  }
}
