/**
 * The Raft node host: drives one pure Raft node with time, disk and network. One loop, never
 * re-entered: take a Ready → send what may leave before the write (a leader's appends) → persist
 * hard state, entries and snapshot in one fsynced batch, applying meanwhile the committed entries
 * that were already durable → restore a received snapshot → send the other messages → apply the
 * other committed entries → `advance()`. Nothing leaves the node before the state it depends on is
 * durable; a leader's own entries count towards a commit only from `advance()` on. Proposals and
 * inbound messages that arrive while a batch is being persisted are folded into the next Ready, so
 * one fsync covers many proposals under load.
 *
 * Clients get promises: {@link RaftNodeHost.propose} resolves with the state machine's result once
 * the entry is applied here; {@link RaftNodeHost.linearizableRead} resolves once this node's
 * applied index has reached a read index confirmed by a quorum. Failures are {@link RaftHostError}s
 * whose code says whether the outcome is known.
 */
import type { ConfChange, ConfState, Entry, Message, NodeId, RaftConfig, Ready, SoftState, Status } from "../../../raft/types.js";
import { committedEntriesDurable } from "../../../raft/util.js";
import { assert } from "../../shared/errors.js";
import { HostErrorCode, notLeader, RaftHostError } from "./host-errors.js";
import type { TransportHandler } from "./grpc-transport.js";
import { PendingProposals, PendingReads } from "./pending-requests.js";
import type { ConfChangeCodec, HostStorage, MessageSender, RawNodeLike, StateMachine } from "./raft-host-ports.js";
import { nextTurn as queueTurn, systemClock, type Clock, type Timer } from "../../shared/clock.js";
import { RequestFraming, stripRequestHeader } from "./request-framing.js";

export interface RaftNodeHostOptions {
  readonly id: NodeId;
  readonly storage: HostStorage;
  readonly stateMachine: StateMachine;
  readonly transport: MessageSender & { setHandler(handler: TransportHandler): void };
  readonly createRawNode: (config: RaftConfig) => RawNodeLike;
  readonly confChangeCodec: ConfChangeCodec;
  /** The host's only source of "now" and of timers. */
  readonly clock?: Clock;
  readonly tickIntervalMs: number;
  readonly electionTicks: number;
  readonly heartbeatTicks: number;
  /** Randomness for election timeouts; defaults to Math.random. */
  readonly random?: (n: number) => number;
  readonly proposalTimeoutMs?: number;
  readonly readTimeoutMs?: number;
  /** Outstanding proposals and reads; beyond this new ones are refused. */
  readonly pendingRequestsMax?: number;
  /** Take a snapshot after this many applied entries, then compact the log. */
  readonly snapshotIntervalEntries?: number;
  /** Entries kept behind a snapshot so slightly lagging followers catch up without one. */
  readonly compactionMarginEntries?: number;
  /** Extra raft configuration (limits, pre-vote, check-quorum). */
  readonly raftConfig?: Partial<Omit<RaftConfig, "id" | "storage" | "random" | "applied" | "electionTick" | "heartbeatTick">>;
  /** Called after a conf change entry was applied, with the new configuration. */
  readonly onConfChange?: (change: ConfChange, confState: ConfState) => void;
  /** Called when the loop hits an error it cannot recover from (a failed fsync). Defaults to crashing. */
  readonly onFatal?: (error: unknown) => void;
}

const proposalTimeoutMsDefault = 5_000;
const readTimeoutMsDefault = 5_000;
const pendingRequestsDefault = 10_000;
const snapshotIntervalEntriesDefault = 10_000;
const compactionMarginEntriesDefault = 1_000;
const transferTimeoutTicksFactor = 2;

/** One Raft member's loop: ticking, persisting, sending, applying. */
export class RaftNodeHost {
  private readonly rawNode: RawNodeLike;
  private readonly clock: Clock;
  private readonly framing = new RequestFraming();
  private readonly proposals = new PendingProposals();
  private readonly reads: PendingReads;
  private softState: SoftState = { leader: null, role: "follower" };
  private confState: ConfState;
  private appliedIndex: number;
  private snapshotIndex: number;
  private tickTimer: Timer | null = null;
  /** When the next tick is due: ticks keep a fixed rate from the start, however late one ran. */
  private nextTickAtMs: number | null = null;
  private loopRunning = false;
  private loopAgain = false;
  private stopped = false;
  private readonly options: Required<
    Pick<RaftNodeHostOptions, "proposalTimeoutMs" | "readTimeoutMs" | "pendingRequestsMax" | "snapshotIntervalEntries" | "compactionMarginEntries">
  >;

  constructor(private readonly config: RaftNodeHostOptions) {
    this.clock = config.clock ?? systemClock;
    this.options = {
      proposalTimeoutMs: config.proposalTimeoutMs ?? proposalTimeoutMsDefault,
      readTimeoutMs: config.readTimeoutMs ?? readTimeoutMsDefault,
      pendingRequestsMax: config.pendingRequestsMax ?? pendingRequestsDefault,
      snapshotIntervalEntries: config.snapshotIntervalEntries ?? snapshotIntervalEntriesDefault,
      compactionMarginEntries: config.compactionMarginEntries ?? compactionMarginEntriesDefault,
    };
    this.reads = new PendingReads({
      framing: this.framing,
      readTimeoutMs: this.options.readTimeoutMs,
      nowMs: () => this.clock.nowMs(),
      appliedIndex: () => this.appliedIndex,
      requestReadIndex: (context) => this.rawNode.readIndex(context),
      toHostError: (error) => this.proposalError(error),
      kick: () => this.kick(),
    });
    const snapshot = config.storage.snapshot();
    this.snapshotIndex = snapshot.metadata.index;
    this.appliedIndex = snapshot.metadata.index;
    this.confState = snapshot.metadata.confState;
    if (snapshot.metadata.index > 0) config.stateMachine.restore(snapshot.data);
    const random = config.random ?? ((n: number) => Math.floor(Math.random() * n));
    this.rawNode = config.createRawNode({
      preVote: true,
      checkQuorum: true,
      ...config.raftConfig,
      id: config.id,
      electionTick: config.electionTicks,
      heartbeatTick: config.heartbeatTicks,
      storage: config.storage,
      random,
      applied: this.appliedIndex,
    });
    config.transport.setHandler({
      receive: (message) => this.receive(message),
      reportUnreachable: (peer) => {
        if (this.stopped) return;
        this.rawNode.reportUnreachable(peer);
        this.kick();
      },
      reportSnapshot: (peer, ok) => {
        if (this.stopped) return;
        this.rawNode.reportSnapshot(peer, ok);
        this.kick();
      },
    });
  }

  /** Starts ticking. */
  start(): void {
    assert(!this.stopped, "start after stop");
    this.scheduleTick();
    this.kick();
  }

  /** Stops ticking and fails every outstanding request with STOPPED; waits for the loop to settle. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.tickTimer?.cancel();
    this.failAll(HostErrorCode.Stopped, "the node host stopped");
    while (this.loopRunning) await nextTurn();
  }

  get id(): NodeId {
    return this.config.id;
  }

  /** The leader this node knows of, or null. */
  leaderId(): NodeId | null {
    return this.softState.leader;
  }

  isLeader(): boolean {
    return this.softState.role === "leader";
  }

  applied(): number {
    return this.appliedIndex;
  }

  status(): Status {
    return this.rawNode.status();
  }

  /** Starts an election now (tests and operators; normally elections start on timeout). */
  campaign(): void {
    this.rawNode.campaign();
    this.kick();
  }

  /**
   * Proposes `payload` and resolves with what the state machine's `apply` returned for it. Only
   * the leader accepts proposals; others reject with NOT_LEADER naming the leader.
   */
  propose(payload: Uint8Array): Promise<unknown> {
    if (this.stopped) return Promise.reject(new RaftHostError(HostErrorCode.Stopped, "the node host stopped"));
    if (!this.isLeader()) return Promise.reject(notLeader(this.softState.leader));
    if (this.pendingRequests() >= this.options.pendingRequestsMax) {
      return Promise.reject(new RaftHostError(HostErrorCode.ProposalDropped, `more than ${this.options.pendingRequestsMax} requests outstanding`));
    }
    const { counter, data } = this.framing.frame(payload);
    return new Promise((resolve, reject) => {
      try {
        this.rawNode.propose(data);
      } catch (error) {
        reject(this.proposalError(error));
        return;
      }
      this.proposals.add(counter, resolve, reject, this.clock.nowMs() + this.options.proposalTimeoutMs);
      this.kick();
    });
  }

  /** Proposes a membership change; resolves with the new configuration once it is applied here. */
  proposeConfChange(change: ConfChange): Promise<ConfState> {
    if (this.stopped) return Promise.reject(new RaftHostError(HostErrorCode.Stopped, "the node host stopped"));
    if (!this.isLeader()) return Promise.reject(notLeader(this.softState.leader));
    const { counter, data: context } = this.framing.frame(change.context ?? new Uint8Array(0));
    return new Promise<ConfState>((resolve, reject) => {
      try {
        this.rawNode.proposeConfChange({ ...change, context });
      } catch (error) {
        reject(this.proposalError(error));
        return;
      }
      this.proposals.add(counter, (value) => resolve(value as ConfState), reject, this.clock.nowMs() + this.options.proposalTimeoutMs);
      this.kick();
    });
  }

  /**
   * Resolves once this node may serve a linearizable read: a quorum confirmed this node is still
   * leader after the call, and everything committed before the call has been applied here.
   * Concurrent reads share one ReadIndex round.
   */
  linearizableRead(): Promise<void> {
    if (this.stopped) return Promise.reject(new RaftHostError(HostErrorCode.Stopped, "the node host stopped"));
    if (!this.isLeader()) return Promise.reject(notLeader(this.softState.leader));
    if (this.pendingRequests() >= this.options.pendingRequestsMax) {
      return Promise.reject(new RaftHostError(HostErrorCode.ProposalDropped, `more than ${this.options.pendingRequestsMax} requests outstanding`));
    }
    return new Promise<void>((resolve, reject) => this.reads.add(resolve, reject));
  }

  /**
   * Hands leadership to `to`; resolves true once `to` is known as leader, false if that did not
   * happen within two election timeouts.
   */
  async transferLeadership(to: NodeId): Promise<boolean> {
    if (!this.isLeader()) throw notLeader(this.softState.leader);
    this.rawNode.transferLeadership(to);
    this.kick();
    const deadlineMs = this.clock.nowMs() + transferTimeoutTicksFactor * this.config.electionTicks * this.config.tickIntervalMs;
    while (!this.stopped && this.softState.leader !== to && this.clock.nowMs() < deadlineMs) {
      await new Promise<void>((resolve) => this.clock.setTimeout(resolve, this.config.tickIntervalMs));
    }
    return this.softState.leader === to;
  }

  /** Feeds one inbound message to the node. */
  receive(message: Message): void {
    if (this.stopped) return;
    try {
      this.rawNode.step(message);
    } catch (error) {
      if (isRaftError(error)) return; // e.g. a message from a removed member: dropped like a lost one
      throw error;
    }
    this.kick();
  }

  private pendingRequests(): number {
    return this.proposals.size + this.reads.size;
  }

  private proposalError(error: unknown): RaftHostError {
    if (isRaftError(error)) {
      if (error.code === "NOT_LEADER") return notLeader(this.softState.leader);
      return new RaftHostError(HostErrorCode.ProposalDropped, error.message);
    }
    throw error;
  }

  /**
   * Ticks at a fixed rate, as etcd's ticker does: a tick that runs late (a busy event loop) does not
   * push the later ones back, so the election timeout is counted in time, not in time plus every
   * tick's lateness (on a loaded machine 10-30 ms a tick, a third more for a 1 s timeout). A tick
   * more than an interval late drops the ones it missed rather than running them in a burst.
   */
  private scheduleTick(): void {
    const intervalMs = this.config.tickIntervalMs;
    const nowMs = this.clock.nowMs();
    this.nextTickAtMs ??= nowMs + intervalMs;
    this.tickTimer = this.clock.setTimeout(
      () => {
        if (this.stopped) return;
        this.rawNode.tick();
        this.expireRequests();
        const firedMs = this.clock.nowMs();
        this.nextTickAtMs! += intervalMs;
        if (this.nextTickAtMs! <= firedMs) this.nextTickAtMs! += Math.floor((firedMs - this.nextTickAtMs!) / intervalMs + 1) * intervalMs;
        this.scheduleTick();
        this.kick();
      },
      Math.max(0, this.nextTickAtMs - nowMs),
    );
  }

  /** Runs the loop unless it is running; if it is, makes it look again before it rests. */
  private kick(): void {
    if (this.loopRunning) {
      this.loopAgain = true;
      return;
    }
    this.loopRunning = true;
    // Deferred to a microtask: the messages of one envelope and the requests of one client read
    // (which are handled synchronously) share a Ready, and proposals and messages arriving while a
    // Ready is being persisted are folded into the next one. Not to an immediate: the loop would
    // then run in the check phase, and what it writes (appends, answers) would reach the sockets
    // only on the next event-loop turn, after that turn's I/O callbacks.
    queueMicrotask(() => {
      this.runLoop().catch((error: unknown) => this.fatal(error));
    });
  }

  private async runLoop(): Promise<void> {
    try {
      do {
        this.loopAgain = false;
        while (!this.stopped && this.rawNode.hasReady()) await this.handleReady(this.rawNode.ready());
      } while (this.loopAgain && !this.stopped);
    } finally {
      this.loopRunning = false;
    }
  }

  private async handleReady(ready: Ready): Promise<void> {
    if (ready.softState) this.onSoftState(ready.softState);
    for (const readState of ready.readStates) this.reads.onReadState(readState.requestCtx, readState.index);
    for (const entry of ready.entries) this.noteProposalIndex(entry);

    // A leader's appends leave now and its own write runs meanwhile (thesis §10.2.1); the library
    // counts the leader's entries towards a commit only after advance() below.
    const sendBeforePersist = ready.messagesBeforePersist ?? 0;
    if (sendBeforePersist > 0)
      this.config.transport.send(sendBeforePersist === ready.messages.length ? ready.messages : ready.messages.slice(0, sendBeforePersist));
    if (ready.hardState || ready.entries.length > 0 || ready.snapshot) {
      // After appends were handed to the transport, the write is issued from an immediate: HTTP/2
      // passes frames to the socket from a native immediate, which runs first. Handing the batch to
      // LevelDB's thread before that wakes the thread (on a busy machine, onto the loop's core) and
      // delays the appends to the followers, whose fsyncs are the critical path, by 50-150 µs.
      const persisting =
        sendBeforePersist > 0 && ready.mustSync ? nextTurn().then(() => this.config.storage.persist(ready)) : this.config.storage.persist(ready);
      if (committedEntriesDurable(ready)) {
        // Awaited below; an early failure must not count as an unhandled rejection meanwhile.
        persisting.catch(() => undefined);
        await this.applyCommitted(ready);
      }
      await persisting;
    }
    if (ready.snapshot && ready.snapshot.metadata.index > this.appliedIndex) {
      this.config.stateMachine.restore(ready.snapshot.data);
      this.appliedIndex = ready.snapshot.metadata.index;
      this.snapshotIndex = ready.snapshot.metadata.index;
      this.confState = ready.snapshot.metadata.confState;
      this.proposals.failOverwritten(this.appliedIndex);
    }
    if (ready.messages.length > sendBeforePersist)
      this.config.transport.send(sendBeforePersist === 0 ? ready.messages : ready.messages.slice(sendBeforePersist));
    await this.applyCommitted(ready);
    this.rawNode.advance(ready);
    this.proposals.failOverwritten(this.appliedIndex);
    this.reads.serve();
    await this.maybeSnapshot();
  }

  /** Applies the Ready's committed entries that are not applied yet, then serves the reads they allow. */
  private async applyCommitted(ready: Ready): Promise<void> {
    for (const entry of ready.committedEntries) {
      if (entry.index <= this.appliedIndex) continue;
      const applying = this.applyEntry(entry);
      if (applying !== undefined) await applying;
    }
    this.reads.serve();
  }

  /** Applies one committed entry; returns a promise only when the state machine's `apply` did. */
  private applyEntry(entry: Entry): Promise<void> | undefined {
    assert(entry.index === this.appliedIndex + 1, `applying ${entry.index} after ${this.appliedIndex}`);
    if (entry.type === "conf-change") {
      const change = this.config.confChangeCodec.decode(entry.data);
      const counter = change.context ? this.framing.ownCounter(change.context) : null;
      const userChange: ConfChange = change.context ? { ...change, context: stripRequestHeader(change.context) } : change;
      this.confState = this.rawNode.applyConfChange(change);
      this.appliedIndex = entry.index;
      this.config.onConfChange?.(userChange, this.confState);
      this.proposals.settle(counter, this.confState);
      return undefined;
    }
    if (entry.data.byteLength === 0) {
      this.appliedIndex = entry.index;
      return undefined;
    }
    const counter = this.framing.ownCounter(entry.data);
    const payload = stripRequestHeader(entry.data);
    const result = this.config.stateMachine.apply({ ...entry, data: payload });
    const settle = (value: unknown) => {
      this.appliedIndex = entry.index;
      this.proposals.settle(counter, value);
    };
    if (result instanceof Promise) return result.then(settle);
    // A synchronous apply settles at once: the proposals of one Ready resolve in one run, without
    // a turn of the microtask queue between entries.
    settle(result);
    return undefined;
  }

  private noteProposalIndex(entry: Entry): void {
    const bytes = entry.type === "conf-change" ? this.config.confChangeCodec.decode(entry.data).context : entry.data;
    if (!bytes) return;
    const counter = this.framing.ownCounter(bytes);
    if (counter !== null) this.proposals.noteIndex(counter, entry.index);
  }

  private onSoftState(softState: SoftState): void {
    const wasLeader = this.softState.role === "leader";
    this.softState = softState;
    if (wasLeader && softState.role !== "leader") {
      // Entries already in the log may still commit under the next leader: outcome unknown.
      this.proposals.rejectAll(new RaftHostError(HostErrorCode.LeadershipLost, "leadership lost before the entry was applied", softState.leader));
      this.reads.failUnconfirmed(new RaftHostError(HostErrorCode.LeadershipLost, "leadership lost before the read was confirmed", softState.leader));
    }
  }

  private expireRequests(): void {
    const nowMs = this.clock.nowMs();
    this.proposals.expire(nowMs, this.softState.leader);
    this.reads.expire(nowMs, this.softState.leader);
  }

  private async maybeSnapshot(): Promise<void> {
    if (this.appliedIndex - this.snapshotIndex < this.options.snapshotIntervalEntries) return;
    const storage = this.config.storage;
    if (this.appliedIndex > storage.lastIndex()) return;
    const data = this.config.stateMachine.snapshot();
    await storage.createSnapshot(this.appliedIndex, this.confState, data);
    this.snapshotIndex = this.appliedIndex;
    const compactIndex = this.appliedIndex - this.options.compactionMarginEntries;
    if (compactIndex >= storage.firstIndex()) await storage.compact(compactIndex);
  }

  private failAll(code: HostErrorCode, message: string): void {
    const error = new RaftHostError(code, message, this.softState.leader);
    this.proposals.rejectAll(error);
    this.reads.failAll(error);
  }

  private fatal(error: unknown): void {
    this.stopped = true;
    this.tickTimer?.cancel();
    this.failAll(HostErrorCode.Stopped, "the node host failed");
    if (this.config.onFatal) this.config.onFatal(error);
    else
      queueTurn(() => {
        throw error;
      });
  }
}

/** Resolves after the immediates (native ones, such as HTTP/2's socket writes, first) already queued. */
function nextTurn(): Promise<void> {
  return new Promise((resolve) => queueTurn(() => resolve()));
}

function isRaftError(error: unknown): error is Error & { code: string } {
  return error instanceof Error && error.name !== "RaftAssertionError" && typeof (error as { code?: unknown }).code === "string";
}
