/**
 * The Raft state machine of one node. It only changes memory and appends to its outbox
 * (`msgs`); the {@link RawNode} hands both to the host. Behaviour per role lives in
 * step-leader.ts, step-candidate.ts and step-follower.ts: becoming a role swaps `stepRole`.
 */
import { restoreConfig } from "./confchange/restore.js";
import { encodeConfChange } from "./codec.js";
import {
  DEFAULT_MAX_INFLIGHT_MSGS,
  DEFAULT_MAX_PENDING_READ_REQUESTS,
  DEFAULT_MAX_SIZE_PER_MSG_BYTES,
  DEFAULT_MAX_UNCOMMITTED_ENTRIES_SIZE_BYTES,
  bootstrapEntries,
  isBrandNew,
  validateConfig,
} from "./config.js";
import { applyConfChangeToTracker } from "./confchange/apply.js";
import { RaftError, RaftErrorCode, assert, hasErrorCode } from "./errors.js";
import { RaftLog } from "./log.js";
import { VoteResult } from "./quorum/vote-result.js";
import { releasePendingReads } from "./read-index.js";
import { ReadOnly } from "./read-only.js";
import { stepCandidate } from "./step-candidate.js";
import { stepFollower } from "./step-follower.js";
import { stepLeader } from "./step-leader.js";
import { Progress } from "./tracker/progress.js";
import { ProgressTracker, isJoint } from "./tracker/tracker.js";
import {
  type ConfChange,
  type ConfState,
  type Entry,
  EntryType,
  type HardState,
  type Message,
  MessageType,
  type NodeId,
  type RaftConfig,
  type ReadState,
  type Snapshot,
  type SoftState,
  StateRole,
} from "./types.js";
import { EMPTY_BYTES, bytesEqual, makeMessage, payloadSizeBytes, voteResponseType } from "./util.js";

/** Election timeouts a leader waits for news of a sent snapshot before probing the follower again. */
const SNAPSHOT_WAIT_ELECTIONS_MAX = 3;

/** Context of the vote requests of an election forced by a leader transfer (ignores leases). */
export const TRANSFER_CAMPAIGN_CONTEXT: Uint8Array = new Uint8Array([0x74, 0x72, 0x61, 0x6e, 0x73, 0x66, 0x65, 0x72]);

/** Pre-vote first, a real election, or an election forced by a leader transfer. */
export type CampaignKind = "pre-election" | "election" | "transfer";

/** The role-specific half of `step`, swapped on every role change. */
export type StepRole = (r: Raft, m: Message) => void;

function dropped(reason: ConstructorParameters<typeof RaftError>[2], message: string): RaftError {
  return new RaftError(RaftErrorCode.ProposalDropped, message, reason);
}

/**
 * One node's Raft state: term, vote, log, configuration and progress, role and timers. Owned by
 * {@link RawNode}; the role files call its methods.
 */
export class Raft {
  readonly id: NodeId;
  term = 0;
  vote: NodeId | null = null;
  readonly log: RaftLog;
  readonly tracker: ProgressTracker;
  role: StateRole = StateRole.Follower;
  isLearner = false;
  lead: NodeId | null = null;
  /** Target of a leader transfer in progress; proposals are dropped meanwhile. */
  leadTransferee: NodeId | null = null;
  /** Last index that may hold an unapplied conf change; only one may be pending at a time. */
  pendingConfIndex = 0;
  uncommittedSizeBytes = 0;
  /** Whether this node wrote its initial configuration into the log when it started. */
  bootstrapped = false;
  readOnly: ReadOnly;
  /** Reads that arrived before this leader committed an entry of its term (§6.4). */
  pendingReadIndexMessages: Message[] = [];
  readStates: ReadState[] = [];
  msgs: Message[] = [];
  electionElapsed = 0;
  heartbeatElapsed = 0;
  randomizedElectionTimeout = 0;
  readonly electionTimeout: number;
  readonly heartbeatTimeout: number;
  readonly checkQuorum: boolean;
  readonly preVote: boolean;
  readonly maxSizePerMsgBytes: number;
  readonly maxUncommittedEntriesSizeBytes: number;
  readonly maxPendingReadRequests: number;
  private readonly random: (n: number) => number;
  private stepRole: StepRole = stepFollower;
  private appendsOwed = false;
  private readonly emptyAppendOwedTo = new Set<NodeId>();
  private tickRole: () => void = () => this.tickElection();

  constructor(config: RaftConfig) {
    validateConfig(config);
    this.id = config.id;
    this.electionTimeout = config.electionTick;
    this.heartbeatTimeout = config.heartbeatTick;
    this.random = config.random;
    this.checkQuorum = config.checkQuorum ?? true;
    this.preVote = config.preVote ?? true;
    this.maxSizePerMsgBytes = config.maxSizePerMsgBytes ?? DEFAULT_MAX_SIZE_PER_MSG_BYTES;
    this.maxUncommittedEntriesSizeBytes = config.maxUncommittedEntriesSizeBytes ?? DEFAULT_MAX_UNCOMMITTED_ENTRIES_SIZE_BYTES;
    this.maxPendingReadRequests = config.maxPendingReadRequests ?? DEFAULT_MAX_PENDING_READ_REQUESTS;
    this.readOnly = new ReadOnly(this.maxPendingReadRequests);
    this.log = new RaftLog(config.storage, config.maxCommittedSizePerReadyBytes ?? this.maxSizePerMsgBytes);
    this.tracker = new ProgressTracker(config.maxInflightMsgs ?? DEFAULT_MAX_INFLIGHT_MSGS);
    const { hardState, confState } = config.storage.initialState();
    const restored = restoreConfig(confState, this.log.lastIndex(), this.tracker.inflightMsgsMax);
    this.switchToConfig(restored.config, restored.progress);
    if (hardState.term !== 0 || hardState.vote !== null || hardState.commit !== 0) this.loadState(hardState);
    if (config.applied !== undefined && config.applied > 0) this.log.appliedTo(config.applied);
    if (isBrandNew(config.storage, hardState) && (confState.voters.length > 0 || confState.learners.length > 0)) {
      this.bootstrap(confState);
      return;
    }
    this.becomeFollower(this.term, null);
  }

  /**
   * A brand-new member writes its initial configuration into the log (see
   * {@link bootstrapEntries}), committed, in term 1.
   */
  private bootstrap(confState: ConfState): void {
    const entries = bootstrapEntries(confState);
    this.log.append(entries);
    this.log.commitTo(entries.length);
    this.becomeFollower(1, null);
    this.bootstrapped = true;
  }

  private loadState(hs: HardState): void {
    assert(
      hs.commit >= this.log.committed && hs.commit <= this.log.lastIndex(),
      () => `hard state commit ${hs.commit} is out of range [${this.log.committed}, ${this.log.lastIndex()}]`,
    );
    this.log.committed = hs.commit;
    this.term = hs.term;
    this.vote = hs.vote;
  }

  hardState(): HardState {
    return { term: this.term, vote: this.vote, commit: this.log.committed };
  }

  softState(): SoftState {
    return { leader: this.lead, role: this.role };
  }

  // ---- sending -------------------------------------------------------------------------------

  send(fields: Partial<Message> & Pick<Message, "type" | "to">): void {
    const t = fields.type;
    let term = fields.term ?? 0;
    if (t === MessageType.Vote || t === MessageType.VoteResp || t === MessageType.PreVote || t === MessageType.PreVoteResp) {
      assert(term !== 0, () => `term should be set when sending ${t}`);
    } else {
      assert(term === 0, () => `term should not be set when sending ${t} (was ${term})`);
      // Proposals and reads are forwarded to the leader as if local: they carry no term.
      if (t !== MessageType.Prop && t !== MessageType.ReadIndex) term = this.term;
    }
    // A forwarded message keeps its origin (e.g. the transferee of a leader transfer).
    this.msgs.push({
      type: t,
      from: fields.from || this.id,
      to: fields.to,
      term,
      logTerm: fields.logTerm ?? 0,
      index: fields.index ?? 0,
      entries: fields.entries ?? [],
      commit: fields.commit ?? 0,
      snapshot: fields.snapshot ?? null,
      reject: fields.reject ?? false,
      rejectHint: fields.rejectHint ?? 0,
      context: fields.context ?? EMPTY_BYTES,
    });
  }

  /** Sends an append (or a snapshot) to `to` when its progress allows. Returns whether it sent. */
  maybeSendAppend(to: NodeId, sendIfEmpty: boolean): boolean {
    const pr = this.tracker.progress.get(to);
    if (pr === undefined || pr.isPaused()) return false;
    let prevTerm: number;
    let entries: Entry[];
    try {
      prevTerm = this.log.term(pr.next - 1);
      entries = this.log.entries(pr.next, this.maxSizePerMsgBytes);
    } catch (error) {
      if (hasErrorCode(error, RaftErrorCode.Compacted) || hasErrorCode(error, RaftErrorCode.Unavailable)) return this.sendSnapshot(to, pr);
      throw error;
    }
    if (entries.length === 0 && !sendIfEmpty) return false;
    this.send({ type: MessageType.App, to, index: pr.next - 1, logTerm: prevTerm, entries, commit: this.log.committed });
    if (entries.length > 0) {
      const last = entries[entries.length - 1].index;
      if (pr.state === "replicate") {
        pr.optimisticUpdate(last);
        pr.inflights.add(last);
      } else if (pr.state === "probe") {
        pr.probeSent = true;
      }
    }
    return true;
  }

  private sendSnapshot(to: NodeId, pr: Progress): boolean {
    // A follower not heard from recently may be down: do not spend a snapshot on it.
    if (!pr.recentActive) return false;
    const snapshot = this.log.snapshot();
    assert(snapshot.metadata.index !== 0, "need a non-empty snapshot to send");
    pr.becomeSnapshot(snapshot.metadata.index);
    this.send({ type: MessageType.Snap, to, snapshot });
    return true;
  }

  sendAppend(to: NodeId): void {
    this.maybeSendAppend(to, true);
  }

  bcastAppend(): void {
    for (const id of this.tracker.ids()) if (id !== this.id) this.sendAppend(id);
  }

  /**
   * Owes every follower an append (even an empty one when `commitMoved`), sent when the
   * host takes the next Ready ({@link flushAppends}): the proposals and acknowledgements stepped
   * until then share one append per follower instead of one each.
   */
  bcastAppendLater(commitMoved: boolean): void {
    this.appendsOwed = true;
    if (commitMoved) for (const id of this.tracker.progress.keys()) if (id !== this.id) this.emptyAppendOwedTo.add(id);
  }

  /** Owes `to` an append even without new entries (e.g. to carry the commit index), sent with the next Ready. */
  sendAppendLater(to: NodeId): void {
    this.appendsOwed = true;
    this.emptyAppendOwedTo.add(to);
  }

  /** Whether {@link flushAppends} has anything to do. */
  hasAppendsOwed(): boolean {
    return this.appendsOwed && this.role === StateRole.Leader;
  }

  /**
   * Sends the appends owed since the last Ready: to each follower what its flow control allows,
   * and an empty append carrying a commit index it has not been sent.
   */
  flushAppends(): void {
    if (!this.appendsOwed) return;
    this.appendsOwed = false;
    if (this.role !== StateRole.Leader) return;
    for (const id of this.tracker.ids()) {
      if (id === this.id) continue;
      const sendIfEmpty = this.emptyAppendOwedTo.has(id);
      for (let sent = 0; sent < this.tracker.inflightMsgsMax && this.maybeSendAppend(id, sendIfEmpty && sent === 0); sent++);
    }
    this.emptyAppendOwedTo.clear();
  }

  bcastHeartbeat(context: Uint8Array | null = this.readOnly.lastPendingContext()): void {
    // Appends owed so far leave ahead of the heartbeat, as they would have without the deferral.
    this.flushAppends();
    for (const id of this.tracker.ids()) {
      if (id === this.id) continue;
      const pr = this.tracker.progress.get(id)!;
      // Never tell a follower to commit beyond what it is known to hold.
      const commit = Math.min(pr.match, this.log.committed);
      this.send({ type: MessageType.Heartbeat, to: id, commit, context: context ?? EMPTY_BYTES });
    }
  }

  sendTimeoutNow(to: NodeId): void {
    // The transferee gets the appends owed so far (the latest commit index) before it campaigns.
    this.flushAppends();
    this.send({ type: MessageType.TimeoutNow, to });
  }

  // ---- role transitions ----------------------------------------------------------------------

  private reset(term: number): void {
    if (this.term !== term) {
      this.term = term;
      this.vote = null;
    }
    this.lead = null;
    this.electionElapsed = 0;
    this.heartbeatElapsed = 0;
    this.randomizedElectionTimeout = this.electionTimeout + this.random(this.electionTimeout);
    assert(
      this.randomizedElectionTimeout >= this.electionTimeout && this.randomizedElectionTimeout < 2 * this.electionTimeout,
      "random() returned a value outside [0, n)",
    );
    this.leadTransferee = null;
    this.tracker.resetVotes();
    const last = this.log.lastIndex();
    for (const [id, pr] of this.tracker.progress) {
      pr.becomeProbe();
      pr.match = id === this.id ? last : 0;
      pr.next = last + 1;
      pr.inflights.reset();
    }
    this.pendingConfIndex = 0;
    this.uncommittedSizeBytes = 0;
    this.appendsOwed = false;
    this.emptyAppendOwedTo.clear();
    this.readOnly = new ReadOnly(this.maxPendingReadRequests);
    this.pendingReadIndexMessages = [];
  }

  becomeFollower(term: number, lead: NodeId | null): void {
    this.stepRole = stepFollower;
    this.reset(term);
    this.tickRole = () => this.tickElection();
    this.lead = lead;
    this.role = StateRole.Follower;
  }

  becomePreCandidate(): void {
    assert(this.role !== StateRole.Leader, "invalid transition [leader -> pre-candidate]");
    // Pre-vote does not change term or vote: a partitioned node cannot disturb the cluster (§9.6).
    this.stepRole = stepCandidate;
    this.tracker.resetVotes();
    this.tickRole = () => this.tickElection();
    this.lead = null;
    this.role = StateRole.PreCandidate;
  }

  becomeCandidate(): void {
    assert(this.role !== StateRole.Leader, "invalid transition [leader -> candidate]");
    this.stepRole = stepCandidate;
    this.reset(this.term + 1);
    this.tickRole = () => this.tickElection();
    this.vote = this.id;
    this.role = StateRole.Candidate;
  }

  becomeLeader(): void {
    assert(this.role !== StateRole.Follower, "invalid transition [follower -> leader]");
    this.stepRole = stepLeader;
    this.reset(this.term);
    this.tickRole = () => this.tickHeartbeat();
    this.lead = this.id;
    this.role = StateRole.Leader;
    this.tracker.progress.get(this.id)?.becomeReplicate();
    // Any conf change in the uncommitted tail may still be pending: be conservative.
    this.pendingConfIndex = this.log.lastIndex();
    // An empty entry of the new term: committing it commits everything before it (§5.4.2).
    const ok = this.appendEntry([{ term: 0, index: 0, type: EntryType.Normal, data: EMPTY_BYTES }]);
    assert(ok, "empty entry was dropped");
  }

  // ---- ticks ---------------------------------------------------------------------------------

  tick(): void {
    this.tickRole();
  }

  promotable(): boolean {
    const pr = this.tracker.progress.get(this.id);
    return pr !== undefined && !pr.isLearner && !this.log.hasPendingSnapshot();
  }

  pastElectionTimeout(): boolean {
    return this.electionElapsed >= this.randomizedElectionTimeout;
  }

  /**
   * The host lost its connection to our leader (say, the leader's process died): we stop honouring
   * its lease, so a pre-vote from another member is granted at once, and our own election timer
   * runs only the randomized part of the timeout from here. A message from the leader restarts
   * both. A leader that is in fact alive keeps its followers: pre-vote asks the others first.
   */
  leaderUnreachable(): void {
    if (this.electionElapsed < this.electionTimeout) this.electionElapsed = this.electionTimeout;
  }

  private tickElection(): void {
    this.electionElapsed++;
    if (this.promotable() && this.pastElectionTimeout()) {
      this.electionElapsed = 0;
      this.step(makeMessage({ type: MessageType.Hup, from: this.id }));
    }
  }

  private tickHeartbeat(): void {
    this.heartbeatElapsed++;
    this.electionElapsed++;
    if (this.electionElapsed >= this.electionTimeout) {
      this.electionElapsed = 0;
      if (this.checkQuorum) this.step(makeMessage({ type: MessageType.CheckQuorum, from: this.id }));
      // A transfer that did not complete within an election timeout is abandoned (§3.10).
      if (this.role === StateRole.Leader && this.leadTransferee !== null) this.leadTransferee = null;
      if (this.role === StateRole.Leader) this.expireSnapshotWaits();
    }
    if (this.role !== StateRole.Leader) return;
    if (this.heartbeatElapsed >= this.heartbeatTimeout) {
      this.heartbeatElapsed = 0;
      this.step(makeMessage({ type: MessageType.Beat, from: this.id }));
    }
  }

  /**
   * A snapshot whose fate the host never reported (a lost message, a forgotten
   * `reportSnapshot`) must not stall its follower forever: after a bounded wait, probe again.
   */
  private expireSnapshotWaits(): void {
    for (const [id, pr] of this.tracker.progress) {
      if (id === this.id || pr.state !== "snapshot") continue;
      pr.snapshotWaitElections++;
      if (pr.snapshotWaitElections >= SNAPSHOT_WAIT_ELECTIONS_MAX) pr.becomeProbe();
    }
  }

  // ---- elections -----------------------------------------------------------------------------

  hup(kind: CampaignKind): void {
    if (this.role === StateRole.Leader) return;
    if (!this.promotable()) return;
    // A committed but unapplied conf change may remove us or change the quorum: wait for it.
    if (this.hasUnappliedConfChanges()) return;
    this.campaign(kind);
  }

  private hasUnappliedConfChanges(): boolean {
    if (this.log.applied >= this.log.committed) return false;
    const entries = this.log.slice(Math.max(this.log.applied + 1, this.log.firstIndex()), this.log.committed + 1, Number.MAX_SAFE_INTEGER);
    return entries.some((e) => e.type === EntryType.ConfChange);
  }

  campaign(kind: CampaignKind): void {
    let voteType: MessageType;
    let term: number;
    if (kind === "pre-election") {
      this.becomePreCandidate();
      voteType = MessageType.PreVote;
      term = this.term + 1;
    } else {
      this.becomeCandidate();
      voteType = MessageType.Vote;
      term = this.term;
    }
    if (this.poll(this.id, true) === VoteResult.Won) {
      // A single voter wins at once.
      if (kind === "pre-election") this.campaign("election");
      else this.becomeLeader();
      return;
    }
    const context = kind === "transfer" ? TRANSFER_CAMPAIGN_CONTEXT : EMPTY_BYTES;
    for (const id of this.tracker.voterIds()) {
      if (id === this.id) continue;
      this.send({ type: voteType, to: id, term, index: this.log.lastIndex(), logTerm: this.log.lastTerm(), context });
    }
  }

  /** Records a vote (or pre-vote) answer and returns the election's outcome so far. */
  poll(id: NodeId, granted: boolean): VoteResult {
    this.tracker.recordVote(id, granted);
    return this.tracker.tallyVotes().result;
  }

  // ---- the common step -----------------------------------------------------------------------

  step(m: Message): void {
    if (m.term === 0) {
      // local message (or a forwarded proposal / read)
    } else if (m.term > this.term) {
      if (m.type === MessageType.Vote || m.type === MessageType.PreVote) {
        const force = bytesEqual(m.context, TRANSFER_CAMPAIGN_CONTEXT);
        const inLease = this.checkQuorum && this.lead !== null && this.electionElapsed < this.electionTimeout;
        // We heard from a leader within the election timeout: ignore the disruptive candidate (§4.2.3).
        if (!force && inLease) return;
      }
      if (m.type === MessageType.PreVote) {
        // A pre-vote never changes our term.
      } else if (m.type === MessageType.PreVoteResp && !m.reject) {
        // The future term of a granted pre-vote is ours only once we win the real election.
      } else if (m.type === MessageType.App || m.type === MessageType.Heartbeat || m.type === MessageType.Snap) {
        this.becomeFollower(m.term, m.from);
      } else {
        this.becomeFollower(m.term, null);
      }
    } else if (m.term < this.term) {
      if ((this.checkQuorum || this.preVote) && (m.type === MessageType.Heartbeat || m.type === MessageType.App)) {
        // A stale leader cut off by check-quorum or pre-vote would never learn the new term:
        // answer so it steps down (§5.1).
        this.send({ type: MessageType.AppResp, to: m.from });
      } else if (m.type === MessageType.PreVote) {
        this.send({ type: MessageType.PreVoteResp, to: m.from, term: this.term, reject: true });
      }
      return;
    }

    switch (m.type) {
      case MessageType.Hup:
        this.hup(this.preVote ? "pre-election" : "election");
        return;
      case MessageType.Vote:
      case MessageType.PreVote: {
        const canVote = this.vote === m.from || (this.vote === null && this.lead === null) || (m.type === MessageType.PreVote && m.term > this.term);
        if (canVote && this.log.isUpToDate(m.index, m.logTerm)) {
          // The response carries the request's term; the vote lands in the hard state of the same
          // Ready, which the host persists before sending (§5.2).
          this.send({ type: voteResponseType(m.type), to: m.from, term: m.term });
          if (m.type === MessageType.Vote) {
            this.electionElapsed = 0;
            this.vote = m.from;
          }
        } else {
          this.send({ type: voteResponseType(m.type), to: m.from, term: this.term, reject: true });
        }
        return;
      }
      default:
        this.stepRole(this, m);
    }
  }

  // ---- log handling --------------------------------------------------------------------------

  /**
   * Appends proposed entries at the leader; false when the uncommitted log is full. The leader's
   * own match does not move here: the entries count towards a commit once the host reports them
   * durable ({@link appendPersisted}).
   */
  appendEntry(entries: Entry[]): boolean {
    const last = this.log.lastIndex();
    const stamped = entries.map((e, i) => ({ ...e, term: this.term, index: last + 1 + i }));
    const size = payloadSizeBytes(stamped);
    if (this.uncommittedSizeBytes > 0 && size > 0 && this.uncommittedSizeBytes + size > this.maxUncommittedEntriesSizeBytes) return false;
    this.uncommittedSizeBytes += size;
    this.log.append(stamped);
    return true;
  }

  /**
   * The host made our log durable up to `index` (an entry of `term`). A leader may write its log
   * in parallel with replicating it, provided it counts itself only for what is durable (thesis
   * §10.2.1): this is that acknowledgement, which may commit and spread the new commit index.
   */
  appendPersisted(index: number, term: number): void {
    if (this.role !== StateRole.Leader || !this.log.matchTerm(index, term)) return;
    const pr = this.tracker.progress.get(this.id);
    if (pr === undefined || !pr.maybeUpdate(index)) return;
    if (this.maybeCommit()) this.bcastAppendLater(true);
  }

  /** Proposals must fit one message; bigger ones could never be sent. */
  checkProposalSize(entries: readonly Entry[]): void {
    for (const e of entries) {
      if (e.data.byteLength > this.maxSizePerMsgBytes)
        throw dropped("too-large", `proposal of ${e.data.byteLength} bytes exceeds maxSizePerMsgBytes ${this.maxSizePerMsgBytes}`);
    }
  }

  reduceUncommittedSize(entries: readonly Entry[]): void {
    this.uncommittedSizeBytes = Math.max(0, this.uncommittedSizeBytes - payloadSizeBytes(entries));
  }

  /** Commits what a quorum holds, if it is an entry of the current term. */
  maybeCommit(): boolean {
    const committed = this.log.maybeCommit(this.tracker.committed(), this.term);
    if (committed) releasePendingReads(this);
    return committed;
  }

  handleAppendEntries(m: Message): void {
    if (m.index < this.log.committed) {
      this.send({ type: MessageType.AppResp, to: m.from, index: this.log.committed });
      return;
    }
    const lastNew = this.log.maybeAppend(m.index, m.logTerm, m.commit, m.entries);
    if (lastNew !== null) {
      this.send({ type: MessageType.AppResp, to: m.from, index: lastNew });
      return;
    }
    // Reject with a hint: the last index at or before m.index whose term is at most m.logTerm,
    // so the leader skips a whole conflicting term per round trip (§5.3).
    const hint = this.log.findConflictByTerm(Math.min(m.index, this.log.lastIndex()), m.logTerm);
    this.send({ type: MessageType.AppResp, to: m.from, index: m.index, reject: true, rejectHint: hint.index, logTerm: hint.term });
  }

  handleHeartbeat(m: Message): void {
    this.log.commitTo(m.commit);
    this.send({ type: MessageType.HeartbeatResp, to: m.from, context: m.context });
  }

  handleSnapshot(m: Message): void {
    const snapshot = m.snapshot;
    assert(snapshot !== null, "snapshot message without a snapshot");
    if (this.restore(snapshot)) {
      this.send({ type: MessageType.AppResp, to: m.from, index: this.log.lastIndex() });
    } else {
      this.send({ type: MessageType.AppResp, to: m.from, index: this.log.committed });
    }
  }

  /** Installs a snapshot from the leader; false when it is stale or already covered by our log. */
  private restore(snapshot: Snapshot): boolean {
    const { index, term } = snapshot.metadata;
    if (index <= this.log.committed) return false;
    assert(this.role === StateRole.Follower, () => `snapshot restored while ${this.role}`);
    // A node added after the snapshot was taken is not in its configuration yet: it installs the
    // snapshot anyway and becomes a member when it applies the conf change that follows it.
    if (this.log.matchTerm(index, term)) {
      // Our log already holds the snapshot's last entry: just fast-forward the commit.
      this.log.commitTo(index);
      return false;
    }
    this.log.restore(snapshot);
    const restored = restoreConfig(snapshot.metadata.confState, this.log.lastIndex(), this.tracker.inflightMsgsMax);
    this.switchToConfig(restored.config, restored.progress);
    return true;
  }

  // ---- membership ----------------------------------------------------------------------------

  applyConfChange(cc: ConfChange): ConfState {
    const result = applyConfChangeToTracker(
      { config: this.tracker.config, progress: this.tracker.progress, lastIndex: this.log.lastIndex(), inflightMsgsMax: this.tracker.inflightMsgsMax },
      cc,
    );
    return this.switchToConfig(result.config, result.progress);
  }

  private switchToConfig(config: ProgressTracker["config"], progress: ProgressTracker["progress"]): ConfState {
    this.tracker.config = config;
    this.tracker.progress = progress;
    const cs = this.tracker.confState();
    const self = progress.get(this.id);
    this.isLearner = self !== undefined && self.isLearner;
    if (this.role !== StateRole.Leader) return cs;
    if (self === undefined || self.isLearner) {
      // This leader was removed (§4.2.2): tell the others the commit index, then step down so that
      // the remaining voters elect a leader among themselves.
      this.bcastAppend();
      this.becomeFollower(this.term, null);
      return cs;
    }
    this.bcastAppendLater(this.maybeCommit());
    if (this.leadTransferee !== null && !this.tracker.isVoter(this.leadTransferee)) this.leadTransferee = null;
    return cs;
  }

  /** Called as the host reports entries applied; a leader in an auto-leave joint config leaves it. */
  appliedTo(index: number): void {
    const before = this.log.applied;
    this.log.appliedTo(index);
    if (
      this.role === StateRole.Leader &&
      isJoint(this.tracker.config) &&
      this.tracker.config.autoLeave &&
      before <= this.pendingConfIndex &&
      index >= this.pendingConfIndex
    ) {
      const leave = { term: 0, index: 0, type: EntryType.ConfChange, data: encodeLeaveJoint() };
      if (this.appendEntry([leave])) {
        this.pendingConfIndex = this.log.lastIndex();
        this.bcastAppendLater(false);
      }
    }
  }

  abortLeaderTransfer(): void {
    this.leadTransferee = null;
  }

  throwDropped(reason: ConstructorParameters<typeof RaftError>[2], message: string): never {
    throw dropped(reason, message);
  }
}

function encodeLeaveJoint(): Uint8Array {
  return encodeConfChange({ changes: [] });
}
