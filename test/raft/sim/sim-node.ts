/**
 * One simulated controller: a Raft RawNode, its MemoryStorage, a disk with an fsync delay, and the
 * key-value state machine, driven by a host loop faithful to the real one:
 *
 *   take Ready → send the messages that may leave before the write (a leader's appends) → write
 *   hard state / entries / snapshot → apply committed entries that were durable before this Ready
 *   → fsync (takes virtual time; a crash meanwhile loses what was not synced) → append to
 *   MemoryStorage → send the other messages → apply the other committed entries and serve reads
 *   whose read index is applied → advance → maybe snapshot and compact.
 *
 * A crash drops everything in memory; a restart rebuilds the node from what the disk made durable.
 */
import type { ConfChange, ConfState, Entry, HardState, Message, NodeId, RaftConfig, Ready, Snapshot, SoftState, Status } from "../../../raft/types.js";
import { EntryType, StateRole } from "../../../raft/types.js";
import { committedEntriesDurable } from "../../../raft/util.js";
import { KvStateMachine, decodeCommand, encodeCommand, type KvCommand, type KvResult } from "./kv-state-machine.js";
import type { Prng } from "./prng.js";
import { SafetyViolation, type SafetyMonitor } from "./safety-monitor.js";
import { SimDisk } from "./sim-disk.js";

/** The slice of the library's RawNode the host uses. */
export interface RawNodeLike {
  tick(): void;
  step(message: Message): void;
  propose(data: Uint8Array): void;
  proposeConfChange(change: ConfChange): void;
  applyConfChange(change: ConfChange): ConfState;
  readIndex(ctx: Uint8Array): void;
  hasReady(): boolean;
  ready(): Ready;
  advance(ready: Ready): void;
  status(): Status;
  transferLeadership(to: NodeId): void;
  reportSnapshot(to: NodeId, ok: boolean): void;
  reportUnreachable(to: NodeId): void;
}

/** The slice of the library's MemoryStorage the host uses. */
export interface MemoryStorageLike {
  append(entries: readonly Entry[]): void;
  setHardState(hardState: HardState): void;
  applySnapshot(snapshot: Snapshot): void;
  createSnapshot(index: number, confState: ConfState, data: Uint8Array): unknown;
  compact(compactIndex: number): void;
  firstIndex(): number;
  lastIndex(): number;
  term(index: number): number;
  snapshot(): Snapshot;
}

export interface RaftLibrary {
  createStorage(initialConfState: ConfState): MemoryStorageLike & RaftConfig["storage"];
  createRawNode(config: RaftConfig): RawNodeLike;
  decodeConfChange(data: Uint8Array): ConfChange;
  /** True when a thrown proposal error means the entry certainly was not appended. */
  isProposalRefusal(error: unknown): boolean;
}

export interface NodeTuning {
  electionTick: number;
  heartbeatTick: number;
  maxInflightMsgs: number;
  maxSizePerMsgBytes: number;
  /** Undefined leaves the library's default. */
  maxUncommittedEntriesSizeBytes: number | undefined;
  maxCommittedSizePerReadyBytes: number | undefined;
  fsyncMinMs: number;
  fsyncMaxMs: number;
  /** Take a snapshot once this many entries were applied since the last one. */
  snapshotIntervalEntries: number;
  /** Entries kept in the log behind a snapshot (so some followers catch up without it). */
  compactionLagEntries: number;
  /** A follower that knows a leader hands client writes and reads to the library to forward. */
  forwardToLeader: boolean;
}

/**
 * Deliberate host bugs, used only to show that the simulation catches them:
 * - `local-reads`: any node answers a get from its own state at once, without ReadIndex;
 * - `send-before-fsync`: messages leave before the Ready is durable (nothing is ever fsynced
 *   except by snapshots), so a crash can forget a vote or an acknowledged entry.
 */
export type HostSabotage = "local-reads" | "send-before-fsync";

export interface NodeEnvironment {
  readonly library: RaftLibrary;
  readonly monitor: SafetyMonitor;
  readonly prng: Prng;
  readonly initialConfState: ConfState;
  readonly tuning: NodeTuning;
  readonly sabotage: HostSabotage | null;
  nowMs(): number;
  schedule(delayMs: number, run: () => void): void;
  send(message: Message): void;
  trace(line: string): void;
}

export type SubmitOutcome = "accepted" | "not-leader" | "refused";

export type ReadReply = (value: string | null) => void;
export type WriteReply = (result: KvResult) => void;

/** A Ready taken from the node and not yet finished (its fsync may be pending). */
interface ReadyInFlight {
  readonly raw: RawNodeLike;
  readonly ready: Ready;
  readonly incarnation: number;
  readonly becameLeaderOfTerm: number | null;
}

interface WaitingRead {
  readonly index: number;
  readonly key: string;
  readonly reply: ReadReply;
}

/** Work arriving while a node is paused waits, like bytes in a socket buffer; past this it is lost. */
const pausedBacklogMax = 10_000;

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const EMPTY_HARD_STATE: HardState = { term: 0, vote: null, commit: 0 };

export class SimNode {
  readonly disk = new SimDisk();
  alive = false;
  incarnation = 0;
  soft: SoftState = { leader: null, role: StateRole.Follower };
  crashes = 0;
  lostWrites = 0;
  snapshotsTaken = 0;
  snapshotsInstalled = 0;
  pauses = 0;

  private raw: RawNodeLike | null = null;
  private storage: (MemoryStorageLike & RaftConfig["storage"]) | null = null;
  private kv = new KvStateMachine();
  private applied = 0;
  /** The configuration as of the applied index (what a snapshot taken now must carry). */
  private confState: ConfState;
  private hardState: HardState = EMPTY_HARD_STATE;
  private inFlight: ReadyInFlight | null = null;
  private pendingWrites = new Map<number, WriteReply>();
  private pendingReads = new Map<string, { key: string; reply: ReadReply }>();
  private waitingReads: WaitingRead[] = [];
  private pausedNow = false;
  private pausedBacklog: (() => void)[] = [];

  constructor(
    readonly id: NodeId,
    private readonly env: NodeEnvironment,
  ) {
    this.confState = env.initialConfState;
  }

  /** The configuration this node has applied. */
  get appliedConfState(): ConfState {
    return this.confState;
  }

  get appliedIndex(): number {
    return this.applied;
  }

  get fingerprint(): string {
    return this.kv.fingerprint();
  }

  /** Boots (or reboots) from what the disk holds durably. */
  start(): void {
    if (this.alive) throw new Error(`${this.id} is already running`);
    const durable = this.disk.read();
    const storage = this.env.library.createStorage(this.env.initialConfState);
    this.kv = new KvStateMachine();
    this.applied = 0;
    this.confState = this.env.initialConfState;
    if (durable.snapshot !== null) {
      storage.applySnapshot(durable.snapshot);
      this.kv = KvStateMachine.restore(durable.snapshot.data);
      this.applied = durable.snapshot.metadata.index;
      this.confState = durable.snapshot.metadata.confState;
    }
    if (durable.hardState !== null) storage.setHardState(durable.hardState);
    storage.append(durable.entries);
    this.storage = storage;
    this.hardState = durable.hardState ?? EMPTY_HARD_STATE;
    const t = this.env.tuning;
    this.raw = this.env.library.createRawNode({
      id: this.id,
      electionTick: t.electionTick,
      heartbeatTick: t.heartbeatTick,
      storage,
      random: (n) => this.env.prng.int(n),
      applied: this.applied,
      preVote: true,
      checkQuorum: true,
      maxInflightMsgs: t.maxInflightMsgs,
      maxSizePerMsgBytes: t.maxSizePerMsgBytes,
      ...(t.maxUncommittedEntriesSizeBytes === undefined ? {} : { maxUncommittedEntriesSizeBytes: t.maxUncommittedEntriesSizeBytes }),
      ...(t.maxCommittedSizePerReadyBytes === undefined ? {} : { maxCommittedSizePerReadyBytes: t.maxCommittedSizePerReadyBytes }),
    });
    this.soft = { leader: null, role: StateRole.Follower };
    this.inFlight = null;
    this.alive = true;
    this.env.trace(
      `${this.id} start #${this.incarnation}: snapshot ${this.applied}, hard state ${JSON.stringify(this.hardState)},` + ` ${durable.entries.length} entries`,
    );
    this.pump();
  }

  get paused(): boolean {
    return this.pausedNow;
  }

  /**
   * Freezes the process (a long GC or VM pause): it misses its ticks, and whatever arrives meanwhile
   * (messages, fsync completions, client requests) is handled in order when it wakes up.
   */
  pause(durationMs: number): void {
    if (!this.alive || this.paused) return;
    this.pauses++;
    this.pausedNow = true;
    const incarnation = this.incarnation;
    this.env.trace(`${this.id} paused for ${durationMs} ms`);
    this.env.schedule(durationMs, () => {
      if (incarnation !== this.incarnation) return;
      this.env.trace(`${this.id} resumes with ${this.pausedBacklog.length} queued events`);
      this.pausedNow = false;
      const backlog = this.pausedBacklog;
      this.pausedBacklog = [];
      for (const run of backlog) if (incarnation === this.incarnation) run();
    });
  }

  /** Runs `run` now, or when the node wakes up if it is paused. */
  whenAwake(run: () => void): void {
    if (!this.paused) {
      run();
      return;
    }
    if (this.pausedBacklog.length < pausedBacklogMax) this.pausedBacklog.push(run);
  }

  /** Power loss: memory is gone and the disk keeps a random prefix of its unsynced writes. */
  crash(): void {
    if (!this.alive) return;
    const lost = this.disk.crash(this.env.prng);
    this.lostWrites += lost;
    this.crashes++;
    this.alive = false;
    this.incarnation++;
    this.raw = null;
    this.storage = null;
    this.inFlight = null;
    this.pausedNow = false;
    this.pausedBacklog = [];
    this.pendingWrites = new Map();
    this.pendingReads = new Map();
    this.waitingReads = [];
    this.soft = { leader: null, role: StateRole.Follower };
    this.env.trace(`${this.id} crash: ${lost} unsynced writes lost`);
  }

  tick(): void {
    if (this.raw === null || this.paused) return;
    this.raw.tick();
    this.pump();
  }

  receive(message: Message): boolean {
    if (this.raw === null) return false;
    this.whenAwake(() => {
      if (this.raw === null) return;
      this.raw.step(message);
      this.pump();
    });
    return true;
  }

  reportSnapshot(to: NodeId, delivered: boolean): void {
    this.whenAwake(() => {
      if (this.raw === null) return;
      this.raw.reportSnapshot(to, delivered);
      this.pump();
    });
  }

  reportUnreachable(to: NodeId): void {
    this.whenAwake(() => {
      if (this.raw === null) return;
      this.raw.reportUnreachable(to);
      this.pump();
    });
  }

  /** Proposes a membership change on the leader; false when it is not the leader or refuses. */
  proposeConfChange(change: ConfChange): boolean {
    if (this.raw === null || this.paused || this.soft.role !== StateRole.Leader) return false;
    try {
      this.raw.proposeConfChange(change);
    } catch (error) {
      if (this.env.library.isProposalRefusal(error)) return false;
      throw error;
    }
    this.pump();
    return true;
  }

  transferLeadership(to: NodeId): void {
    if (this.raw === null || this.paused) return;
    this.env.trace(`${this.id} asked to transfer leadership to ${to}`);
    try {
      this.raw.transferLeadership(to);
    } catch (error) {
      // Leadership moved since the last Ready and no leader is known: the request is refused.
      if (this.env.library.isProposalRefusal(error)) return;
      throw error;
    }
    this.pump();
  }

  /** Whether this node takes a client request now (as leader, or to forward it to the leader). */
  private takesRequests(): boolean {
    if (this.raw === null) return false;
    if (this.soft.role === StateRole.Leader) return true;
    return this.env.tuning.forwardToLeader && this.soft.role === StateRole.Follower && this.soft.leader !== null;
  }

  submitWrite(command: KvCommand, reply: WriteReply): SubmitOutcome {
    if (this.raw === null || !this.takesRequests()) return "not-leader";
    try {
      this.raw.propose(encodeCommand(command));
    } catch (error) {
      if (this.env.library.isProposalRefusal(error)) return "refused";
      throw error;
    }
    this.pendingWrites.set(command.opId, reply);
    this.pump();
    return "accepted";
  }

  submitRead(opId: number, key: string, reply: ReadReply): SubmitOutcome {
    if (this.raw !== null && this.env.sabotage === "local-reads") {
      reply(this.kv.get(key));
      return "accepted";
    }
    if (this.raw === null || !this.takesRequests()) return "not-leader";
    const ctx = String(opId);
    try {
      this.raw.readIndex(encoder.encode(ctx));
    } catch (error) {
      if (this.env.library.isProposalRefusal(error)) return "refused";
      throw error;
    }
    this.pendingReads.set(ctx, { key, reply });
    this.pump();
    return "accepted";
  }

  /** Processes Readys until none is left or one waits for its fsync. */
  private pump(): void {
    while (this.raw !== null && this.inFlight === null && this.raw.hasReady()) {
      const raw = this.raw;
      const ready = raw.ready();
      this.env.monitor.onReady(this.id, ready, this.hardState);
      const wasLeaderOfTerm = this.soft.role === StateRole.Leader ? this.hardState.term : null;
      if (ready.hardState !== null) this.hardState = ready.hardState;
      if (ready.softState !== null) this.soft = ready.softState;
      // The hard state of a Ready is the node's state when the Ready was made, so its term is the
      // term of a leadership the Ready reports (even one that replaced an earlier leadership of ours).
      let becameLeaderOfTerm: number | null = null;
      if (this.soft.role === StateRole.Leader && wasLeaderOfTerm !== this.hardState.term) {
        becameLeaderOfTerm = this.hardState.term;
        this.env.monitor.onLeader(this.id, becameLeaderOfTerm);
        this.env.trace(`${this.id} leader of term ${becameLeaderOfTerm}`);
      }
      for (const message of ready.messages.slice(0, ready.messagesBeforePersist)) this.env.send(message);
      if (ready.hardState !== null || ready.entries.length > 0 || ready.snapshot !== null) {
        this.disk.write({ hardState: ready.hardState, entries: ready.entries, snapshot: ready.snapshot });
      }
      if (committedEntriesDurable(ready)) this.applyCommitted(raw, ready);
      const inFlight: ReadyInFlight = {
        raw,
        ready,
        incarnation: this.incarnation,
        becameLeaderOfTerm,
      };
      if (!ready.mustSync || this.env.sabotage === "send-before-fsync") {
        this.finishReady(inFlight);
        continue;
      }
      this.inFlight = inFlight;
      const t = this.env.tuning;
      this.env.schedule(this.env.prng.between(t.fsyncMinMs, t.fsyncMaxMs), this.onFsynced);
      return;
    }
  }

  private readonly onFsynced = (): void => {
    const inFlight = this.inFlight;
    if (inFlight === null || inFlight.incarnation !== this.incarnation) return;
    if (this.paused) {
      this.whenAwake(this.onFsynced);
      return;
    }
    this.disk.fsync();
    this.inFlight = null;
    this.finishReady(inFlight);
    this.pump();
  };

  private finishReady({ raw, ready, becameLeaderOfTerm }: ReadyInFlight): void {
    const storage = this.storage;
    if (storage === null) throw new Error("finishing a Ready on a stopped node");
    if (ready.snapshot !== null) storage.applySnapshot(ready.snapshot);
    if (ready.hardState !== null) storage.setHardState(ready.hardState);
    storage.append(ready.entries);
    for (const message of ready.messages.slice(ready.messagesBeforePersist)) this.env.send(message);
    if (ready.snapshot !== null) this.installSnapshot(ready.snapshot.metadata.index, ready.snapshot.data);
    if (ready.snapshot !== null) this.confState = ready.snapshot.metadata.confState;
    this.applyCommitted(raw, ready);
    for (const readState of ready.readStates) {
      const ctx = decoder.decode(readState.requestCtx);
      const pending = this.pendingReads.get(ctx);
      if (pending === undefined) continue;
      this.pendingReads.delete(ctx);
      this.waitingReads.push({ index: readState.index, key: pending.key, reply: pending.reply });
    }
    this.serveReads();
    raw.advance(ready);
    if (becameLeaderOfTerm !== null) {
      this.env.monitor.checkLeaderLog(this.id, becameLeaderOfTerm, storage);
    }
    this.maybeSnapshot(storage);
  }

  /** Applies the Ready's committed entries not applied yet (some may have been before its fsync). */
  private applyCommitted(raw: RawNodeLike, ready: Ready): void {
    for (const entry of ready.committedEntries) if (entry.index > this.applied) this.applyEntry(raw, entry);
    this.serveReads();
  }

  private installSnapshot(index: number, data: Uint8Array): void {
    if (index <= this.applied) {
      throw new SafetyViolation(`${this.id}: told to install a snapshot at ${index} with ${this.applied} already applied`);
    }
    this.kv = KvStateMachine.restore(data);
    this.applied = index;
    this.snapshotsInstalled++;
    this.env.monitor.onSnapshotRestored(this.id, index, this.kv.fingerprint());
    this.env.trace(`${this.id} installed snapshot at ${index}`);
  }

  private applyEntry(raw: RawNodeLike, entry: Entry): void {
    if (entry.index !== this.applied + 1) {
      throw new SafetyViolation(`${this.id}: committed entry ${entry.index} handed over with ${this.applied} applied`);
    }
    if (entry.index > this.hardState.commit) {
      throw new SafetyViolation(`${this.id}: entry ${entry.index} handed over as committed beyond commit ${this.hardState.commit}`);
    }
    if (entry.type === EntryType.ConfChange) {
      const change = this.env.library.decodeConfChange(entry.data);
      this.confState = raw.applyConfChange(change);
      this.env.trace(`${this.id} applied conf change at ${entry.index}: ${JSON.stringify(this.confState)}`);
    } else if (entry.data.byteLength > 0) {
      const command = decodeCommand(entry.data);
      const result = this.kv.apply(command);
      const reply = this.pendingWrites.get(command.opId);
      if (reply !== undefined) {
        this.pendingWrites.delete(command.opId);
        reply(result);
      }
    }
    this.applied = entry.index;
    this.env.monitor.onApplied(this.id, this.hardState.term, entry, this.kv.fingerprint());
  }

  private serveReads(): void {
    if (this.waitingReads.length === 0) return;
    const still: WaitingRead[] = [];
    for (const read of this.waitingReads) {
      if (read.index <= this.applied) read.reply(this.kv.get(read.key));
      else still.push(read);
    }
    this.waitingReads = still;
  }

  private maybeSnapshot(storage: MemoryStorageLike): void {
    const t = this.env.tuning;
    const snapshotIndex = storage.snapshot().metadata.index;
    if (this.applied - snapshotIndex < t.snapshotIntervalEntries) return;
    storage.createSnapshot(this.applied, this.confState, this.kv.snapshot());
    this.disk.saveSnapshot(storage.snapshot());
    this.snapshotsTaken++;
    const compactIndex = this.applied - t.compactionLagEntries;
    if (compactIndex > storage.firstIndex() - 1 && compactIndex >= 1) storage.compact(compactIndex);
    this.env.trace(`${this.id} snapshot at ${this.applied}, compacted to ${storage.firstIndex() - 1}`);
  }
}
