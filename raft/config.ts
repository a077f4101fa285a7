/**
 * Configuration defaults, validation, and the bootstrap of a brand-new cluster member.
 */
import { encodeConfChange } from "./codec.js";
import { RaftError, RaftErrorCode, assert } from "./errors.js";
import { ConfChangeType, type ConfState, type Entry, EntryType, type HardState, type RaftConfig } from "./types.js";

/** Default bound on the entries of one append message (and on one proposal), in bytes. */
export const DEFAULT_MAX_SIZE_PER_MSG_BYTES = 1024 * 1024;
/** Default bound on append messages in flight to one follower. */
export const DEFAULT_MAX_INFLIGHT_MSGS = 256;
/** Default bound on the leader's uncommitted entry payload, in bytes. */
export const DEFAULT_MAX_UNCOMMITTED_ENTRIES_SIZE_BYTES = 64 * 1024 * 1024;
/** Default bound on reads waiting for leadership confirmation on the leader. */
export const DEFAULT_MAX_PENDING_READ_REQUESTS = 4096;

/** Storage that has never been written: no entries, no snapshot, no hard state. */
export function isBrandNew(storage: RaftConfig["storage"], hardState: HardState): boolean {
  return (
    storage.firstIndex() === 1 &&
    storage.lastIndex() === 0 &&
    storage.snapshot().metadata.index === 0 &&
    hardState.term === 0 &&
    hardState.vote === null &&
    hardState.commit === 0
  );
}

/** Throws `INVALID_CONFIG` when the configuration cannot work. */
export function validateConfig(c: RaftConfig): void {
  const bad = (why: string): never => {
    throw new RaftError(RaftErrorCode.InvalidConfig, why);
  };
  if (c.id === "") bad("id must not be empty");
  if (!(c.heartbeatTick > 0)) bad("heartbeatTick must be positive");
  if (!(c.electionTick > c.heartbeatTick)) bad("electionTick must be greater than heartbeatTick");
  if (c.maxInflightMsgs !== undefined && !(c.maxInflightMsgs > 0)) bad("maxInflightMsgs must be positive");
  if (c.maxSizePerMsgBytes !== undefined && !(c.maxSizePerMsgBytes > 0)) bad("maxSizePerMsgBytes must be positive");
  if (c.maxUncommittedEntriesSizeBytes !== undefined && !(c.maxUncommittedEntriesSizeBytes > 0)) bad("maxUncommittedEntriesSizeBytes must be positive");
}

/**
 * The initial configuration as committed conf-change entries of term 1, one per member, identical
 * on every initial member: a node that joins later learns the membership by replaying them.
 */
export function bootstrapEntries(confState: ConfState): Entry[] {
  assert(confState.votersOutgoing.length === 0, "cannot bootstrap a joint configuration");
  const changes = [
    ...confState.voters.map((nodeId) => ({ type: ConfChangeType.AddVoter, nodeId })),
    ...confState.learners.map((nodeId) => ({ type: ConfChangeType.AddLearner, nodeId })),
  ];
  return changes.map((change, i) => ({ term: 1, index: i + 1, type: EntryType.ConfChange, data: encodeConfChange({ changes: [change] }) }));
}
