/**
 * The host's handle on one Raft node. Everything is synchronous and pure: the host calls
 * `tick()` on its timer, `step()` with messages from peers, proposes, and then drives the loop:
 *
 *     if (node.hasReady()) {
 *       const rd = node.ready();
 *       send rd.messages[0, rd.messagesBeforePersist);
 *       persist rd.hardState, rd.entries, rd.snapshot (fsync when rd.mustSync);
 *       send the rest of rd.messages; apply rd.snapshot and rd.committedEntries; serve rd.readStates;
 *       node.advance(rd);
 *     }
 *
 * Only the first `messagesBeforePersist` messages may leave before the Ready is durable (a
 * leader's appends, thesis §10.2.1); the leader counts its own log towards a commit only from
 * `advance()` on, so no commit index ever rests on a write that is not durable.
 */
import { encodeConfChange } from "./codec.js";
import { RaftError, RaftErrorCode, assert } from "./errors.js";
import { Raft } from "./raft.js";
import {
  type ConfChange,
  type ConfState,
  type Entry,
  EntryType,
  type HardState,
  type Message,
  MessageType,
  type NodeId,
  type ProgressStatus,
  type RaftConfig,
  type Ready,
  type SoftState,
  StateRole,
  type Status,
} from "./types.js";
import { hardStateEqual, isLocalMessage, isResponseMessage, makeMessage } from "./util.js";

/**
 * A Raft node driven by its host (see the module comment for the loop). Proposal failures throw
 * a {@link RaftError}: `NOT_LEADER` when no leader is known, `PROPOSAL_DROPPED` (with a reason)
 * when the leader refuses. A follower forwards proposals and reads to its leader, which gives no
 * answer of its own: the host learns the outcome by seeing the entry applied (or a read state).
 */
export class RawNode {
  private readonly raft: Raft;
  private prevSoftState: SoftState;
  private prevHardState: HardState;
  private readyOutstanding = false;

  constructor(config: RaftConfig) {
    this.raft = new Raft(config);
    this.prevSoftState = this.raft.softState();
    // After a bootstrap, start from what storage holds, so the first Ready hands the bootstrap's
    // hard state to the host.
    this.prevHardState = this.raft.bootstrapped ? config.storage.initialState().hardState : this.raft.hardState();
  }

  /** Advances logical time by one tick (election and heartbeat timeouts count ticks). */
  tick(): void {
    this.raft.tick();
  }

  /** Starts an election now (with pre-vote when enabled). */
  campaign(): void {
    this.raft.step(makeMessage({ type: MessageType.Hup, from: this.raft.id }));
  }

  /** Feeds a message from a peer. Local-only types are refused; stale responses are ignored. */
  step(message: Message): void {
    if (isLocalMessage(message.type)) throw new RaftError(RaftErrorCode.StepLocalMessage, `cannot step local message ${message.type}`);
    if (isResponseMessage(message.type) && !this.raft.tracker.progress.has(message.from) && this.raft.role === StateRole.Leader) return;
    try {
      this.raft.step(message);
    } catch (error) {
      // A peer's forwarded proposal or read that cannot be served is dropped, as the network could.
      if (error instanceof RaftError && (error.code === RaftErrorCode.ProposalDropped || error.code === RaftErrorCode.NotLeader)) return;
      throw error;
    }
  }

  /** Proposes `data` for the log. */
  propose(data: Uint8Array): void {
    this.proposeEntry({ term: 0, index: 0, type: EntryType.Normal, data });
  }

  /** Proposes a membership change; apply it with {@link applyConfChange} once committed. */
  proposeConfChange(cc: ConfChange): void {
    this.proposeEntry({ term: 0, index: 0, type: EntryType.ConfChange, data: encodeConfChange(cc) });
  }

  private proposeEntry(entry: Entry): void {
    this.raft.step(makeMessage({ type: MessageType.Prop, from: this.raft.id, entries: [entry] }));
  }

  /** Applies a committed conf change (decoded from its entry) and returns the new configuration. */
  applyConfChange(cc: ConfChange): ConfState {
    return this.raft.applyConfChange(cc);
  }

  /** Asks the leader to hand leadership to `to` (§3.10 of the Raft thesis). */
  transferLeadership(to: NodeId): void {
    this.raft.step(makeMessage({ type: MessageType.TransferLeader, from: to, to: this.raft.id }));
  }

  /**
   * Requests a linearizable read. `ctx` must be unique per request; a {@link ReadState} with the
   * same ctx appears in a later Ready once leadership is confirmed. Pending reads are dropped on
   * a leader change; the host times them out and retries.
   */
  readIndex(ctx: Uint8Array): void {
    this.raft.step(makeMessage({ type: MessageType.ReadIndex, from: this.raft.id, context: ctx }));
  }

  /**
   * Reports that the last message to `id` could not be delivered. A leader falls back to probing
   * `id`; a follower that cannot reach its leader stops honouring the leader's lease and campaigns
   * after the randomized part of its election timeout (see `Raft.leaderUnreachable`).
   */
  reportUnreachable(id: NodeId): void {
    this.stepLocal(makeMessage({ type: MessageType.Unreachable, from: id }));
  }

  /** Reports whether the snapshot sent to `id` was installed. */
  reportSnapshot(id: NodeId, ok: boolean): void {
    this.stepLocal(makeMessage({ type: MessageType.SnapStatus, from: id, reject: !ok }));
  }

  private stepLocal(message: Message): void {
    this.raft.step(message);
  }

  /** Whether {@link ready} has anything for the host. */
  hasReady(): boolean {
    const r = this.raft;
    // Appends owed to followers are made now; ready() hands them over.
    if (r.hasAppendsOwed()) r.flushAppends();
    const soft = r.softState();
    if (soft.leader !== this.prevSoftState.leader || soft.role !== this.prevSoftState.role) return true;
    if (!hardStateEqual(r.hardState(), this.prevHardState)) return true;
    if (r.log.hasPendingSnapshot()) return true;
    if (r.msgs.length > 0 || r.log.unstable.entries.length > 0 || r.log.hasNextEntries()) return true;
    return r.readStates.length > 0;
  }

  /**
   * What the host must do now. Must be followed by {@link advance} with the same Ready before
   * the next call.
   */
  ready(): Ready {
    assert(!this.readyOutstanding, "ready() called again before advance()");
    const r = this.raft;
    r.flushAppends();
    const soft = r.softState();
    const hard = r.hardState();
    const softChanged = soft.leader !== this.prevSoftState.leader || soft.role !== this.prevSoftState.role;
    const hardChanged = !hardStateEqual(hard, this.prevHardState);
    const entries = r.log.unstableEntries();
    const snapshot = r.log.unstable.snapshot;
    const termOrVoteChanged = hard.term !== this.prevHardState.term || hard.vote !== this.prevHardState.vote;
    // In a term (and vote) already durable, what a leader sends depends on nothing this Ready
    // persists; anything else waits for the write.
    const { messages, beforePersist } = termOrVoteChanged || snapshot !== null ? { messages: r.msgs, beforePersist: 0 } : partitionMessages(r.msgs);
    const rd: Ready = {
      softState: softChanged ? soft : null,
      hardState: hardChanged ? hard : null,
      entries,
      snapshot,
      committedEntries: r.log.nextEntries(),
      messages,
      messagesBeforePersist: beforePersist,
      readStates: r.readStates,
      mustSync: entries.length > 0 || snapshot !== null || termOrVoteChanged,
    };
    r.msgs = [];
    r.readStates = [];
    if (softChanged) this.prevSoftState = soft;
    this.readyOutstanding = true;
    return rd;
  }

  /**
   * Tells the node the host persisted, sent and applied everything in `rd`. A leader counts the
   * entries `rd` carried towards commitment from here on (its own acknowledgement of a durable
   * write), which may commit them and queue appends carrying the new commit index.
   */
  advance(rd: Ready): void {
    assert(this.readyOutstanding, "advance() without ready()");
    this.readyOutstanding = false;
    const r = this.raft;
    if (rd.hardState !== null) this.prevHardState = rd.hardState;
    if (rd.entries.length > 0) {
      const last = rd.entries[rd.entries.length - 1];
      r.log.stableTo(last.index, last.term);
      r.appendPersisted(last.index, last.term);
    }
    if (rd.snapshot !== null) r.log.stableSnapTo(rd.snapshot.metadata.index);
    if (rd.committedEntries.length > 0) {
      r.reduceUncommittedSize(rd.committedEntries);
      r.appliedTo(rd.committedEntries[rd.committedEntries.length - 1].index);
    } else if (rd.snapshot !== null && rd.snapshot.metadata.index > r.log.applied) {
      r.appliedTo(rd.snapshot.metadata.index);
    }
  }

  /** A snapshot of the node's state, with per-follower progress on the leader. */
  status(): Status {
    const r = this.raft;
    let progress: Record<NodeId, ProgressStatus> | null = null;
    if (r.role === StateRole.Leader) {
      progress = {};
      for (const id of r.tracker.ids()) {
        const pr = r.tracker.progress.get(id)!;
        progress[id] = { match: pr.match, next: pr.next, state: pr.state, isLearner: pr.isLearner, recentActive: pr.recentActive, inflight: pr.inflights.size };
      }
    }
    return {
      id: r.id,
      hardState: r.hardState(),
      softState: r.softState(),
      applied: r.log.applied,
      leadTransferee: r.leadTransferee,
      config: r.tracker.confState(),
      progress,
    };
  }
}

/**
 * Messages sent by a leader in its (durable) term that carry nothing the receiver must not see
 * before this node's write is durable: appends (whose commit index rests only on durable
 * acknowledgements), heartbeats, snapshots (read from storage), TimeoutNow and read answers.
 */
const sendableBeforePersist: ReadonlySet<MessageType> = new Set([
  MessageType.App,
  MessageType.Heartbeat,
  MessageType.Snap,
  MessageType.TimeoutNow,
  MessageType.ReadIndexResp,
]);

/** Orders `msgs` so the ones that may leave before the Ready is persisted come first (each group keeps its order). */
function partitionMessages(msgs: Message[]): { messages: Message[]; beforePersist: number } {
  const early: Message[] = [];
  const late: Message[] = [];
  for (const m of msgs) (sendableBeforePersist.has(m.type) ? early : late).push(m);
  if (late.length === 0) return { messages: msgs, beforePersist: msgs.length };
  return { messages: early.concat(late), beforePersist: early.length };
}
