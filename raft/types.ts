/**
 * Public types of the Raft library. The core is pure: the host feeds it ticks and messages, takes a
 * {@link Ready} out, persists (fsync) hard state, entries and snapshot, sends the messages, applies
 * the committed entries, and then calls `advance()`. Nothing here performs I/O.
 *
 * Node ids are non-empty strings (controller ids); terms and indexes are plain numbers (safe
 * integers; a cluster would need 2^53 entries to overflow).
 */

export type NodeId = string;

export const EntryType = {
  Normal: "normal",
  ConfChange: "conf-change",
} as const;
export type EntryType = (typeof EntryType)[keyof typeof EntryType];

export interface Entry {
  readonly term: number;
  readonly index: number;
  readonly type: EntryType;
  /** Opaque payload; for conf-change entries an encoded {@link ConfChange}. Empty for no-ops. */
  readonly data: Uint8Array;
}

/** What must be durable before any message that depends on it leaves the node. */
export interface HardState {
  readonly term: number;
  readonly vote: NodeId | null;
  readonly commit: number;
}

export interface ConfState {
  readonly voters: readonly NodeId[];
  readonly learners: readonly NodeId[];
  /** Outgoing voters while a joint configuration is in effect; empty otherwise. */
  readonly votersOutgoing: readonly NodeId[];
  readonly learnersNext: readonly NodeId[];
  readonly autoLeave: boolean;
}

export interface SnapshotMetadata {
  readonly index: number;
  readonly term: number;
  readonly confState: ConfState;
}

export interface Snapshot {
  readonly metadata: SnapshotMetadata;
  readonly data: Uint8Array;
}

export const ConfChangeType = {
  AddVoter: "add-voter",
  AddLearner: "add-learner",
  RemoveNode: "remove-node",
} as const;
export type ConfChangeType = (typeof ConfChangeType)[keyof typeof ConfChangeType];

export interface ConfChangeSingle {
  readonly type: ConfChangeType;
  readonly nodeId: NodeId;
}

/**
 * How a conf change moves between configurations:
 * - `auto` (default): a change of at most one voter is applied directly; more go through a joint
 *   configuration that the leader leaves automatically;
 * - `joint-implicit`: always joint, left automatically;
 * - `joint-explicit`: always joint, left only by proposing an empty conf change.
 */
export const ConfChangeTransition = {
  Auto: "auto",
  JointImplicit: "joint-implicit",
  JointExplicit: "joint-explicit",
} as const;
export type ConfChangeTransition = (typeof ConfChangeTransition)[keyof typeof ConfChangeTransition];

/** A membership change: one or more single changes; an empty list leaves a joint configuration. */
export interface ConfChange {
  readonly changes: readonly ConfChangeSingle[];
  /** Defaults to `auto`. */
  readonly transition?: ConfChangeTransition;
  /** Opaque context carried with the change (e.g. the member's addresses). */
  readonly context?: Uint8Array;
}

export const MessageType = {
  Hup: "hup",
  Beat: "beat",
  Prop: "prop",
  App: "app",
  AppResp: "app-resp",
  Vote: "vote",
  VoteResp: "vote-resp",
  PreVote: "pre-vote",
  PreVoteResp: "pre-vote-resp",
  Snap: "snap",
  Heartbeat: "heartbeat",
  HeartbeatResp: "heartbeat-resp",
  Unreachable: "unreachable",
  SnapStatus: "snap-status",
  CheckQuorum: "check-quorum",
  TransferLeader: "transfer-leader",
  TimeoutNow: "timeout-now",
  ReadIndex: "read-index",
  ReadIndexResp: "read-index-resp",
} as const;
export type MessageType = (typeof MessageType)[keyof typeof MessageType];

/** One Raft message. Fields not used by a type are left at their zero values. */
export interface Message {
  readonly type: MessageType;
  readonly from: NodeId;
  readonly to: NodeId;
  readonly term: number;
  readonly logTerm: number;
  readonly index: number;
  readonly entries: readonly Entry[];
  readonly commit: number;
  readonly snapshot: Snapshot | null;
  readonly reject: boolean;
  readonly rejectHint: number;
  /** Read-index request id, transfer target, etc.; opaque to the transport. */
  readonly context: Uint8Array;
}

export const StateRole = {
  Follower: "follower",
  PreCandidate: "pre-candidate",
  Candidate: "candidate",
  Leader: "leader",
} as const;
export type StateRole = (typeof StateRole)[keyof typeof StateRole];

export interface SoftState {
  readonly leader: NodeId | null;
  readonly role: StateRole;
}

/** A linearizable read that may be served once the applied index reaches `index`. */
export interface ReadState {
  readonly index: number;
  readonly requestCtx: Uint8Array;
}

/**
 * Everything the host must do, in order: persist `hardState`, `entries` and `snapshot` (fsync),
 * then send `messages`, then apply `committedEntries`, then call `advance()`. Two things may go
 * earlier, in parallel with the write: the first `messagesBeforePersist` messages, and the
 * committed entries when they are all below `entries[0].index` (`committedEntriesDurable` in util.ts).
 */
export interface Ready {
  readonly softState: SoftState | null;
  readonly hardState: HardState | null;
  readonly entries: readonly Entry[];
  readonly snapshot: Snapshot | null;
  readonly committedEntries: readonly Entry[];
  readonly messages: readonly Message[];
  /**
   * How many of `messages`, from the first, depend on nothing this Ready persists: a leader's
   * appends, heartbeats, snapshots, TimeoutNow and read answers in a term that is already durable.
   * The host may send them before (or while) it persists: a leader writes its log in parallel with
   * replicating it (thesis §10.2.1), and counts its own entries towards a commit only once
   * `advance()` reports them durable. The rest (votes, acknowledgements) wait for the write.
   */
  readonly messagesBeforePersist: number;
  readonly readStates: readonly ReadState[];
  /**
   * True when `hardState`/`entries`/`snapshot` must be fsynced before the messages after the first
   * `messagesBeforePersist` go out.
   */
  readonly mustSync: boolean;
}

/**
 * Read-only view of the durable log that the core consults. The host appends what a Ready
 * carried (after persisting it) through the implementation's own methods.
 */
export interface Storage {
  initialState(): { hardState: HardState; confState: ConfState };
  /** Entries in [lo, hi), at most `maxSizeBytes` in total but always at least one. */
  entries(lo: number, hi: number, maxSizeBytes: number): Entry[];
  term(index: number): number;
  firstIndex(): number;
  lastIndex(): number;
  snapshot(): Snapshot;
}

/** Seeded randomness passed in by the host: returns an integer in [0, n). */
export type RandomInt = (n: number) => number;

export interface RaftConfig {
  readonly id: NodeId;
  readonly electionTick: number;
  readonly heartbeatTick: number;
  readonly storage: Storage;
  readonly random: RandomInt;
  /** Index of the last entry the state machine has applied (restart). */
  readonly applied?: number;
  readonly preVote?: boolean;
  readonly checkQuorum?: boolean;
  readonly maxSizePerMsgBytes?: number;
  readonly maxInflightMsgs?: number;
  readonly maxUncommittedEntriesSizeBytes?: number;
  readonly maxCommittedSizePerReadyBytes?: number;
  /** Bound on reads waiting for leadership confirmation on the leader; more are dropped. */
  readonly maxPendingReadRequests?: number;
}

export interface ProgressStatus {
  readonly match: number;
  readonly next: number;
  readonly state: "probe" | "replicate" | "snapshot";
  readonly isLearner: boolean;
  readonly recentActive: boolean;
  readonly inflight: number;
}

export interface Status {
  readonly id: NodeId;
  readonly hardState: HardState;
  readonly softState: SoftState;
  readonly applied: number;
  readonly leadTransferee: NodeId | null;
  readonly config: ConfState;
  /** Present on the leader only. */
  readonly progress: Readonly<Record<NodeId, ProgressStatus>> | null;
}
