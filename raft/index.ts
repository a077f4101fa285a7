/**
 * The public API of the Raft library: {@link RawNode}, {@link MemoryStorage}, the wire codecs,
 * the typed errors and the shared types.
 */
export * from "./types.js";
export { RawNode } from "./raw-node.js";
export { MemoryStorage } from "./memory-storage.js";
export { encodeConfChange, decodeConfChange, encodeMessage, decodeMessage } from "./codec.js";
export {
  RaftError,
  RaftErrorCode,
  type ProposalDropReason,
  ErrCompacted,
  ErrUnavailable,
  ErrSnapOutOfDate,
  RaftAssertionError,
  hasErrorCode,
} from "./errors.js";
export { committedEntriesDurable, entrySizeBytes, isEmptyHardState, EMPTY_CONF_STATE, EMPTY_HARD_STATE } from "./util.js";
export {
  DEFAULT_MAX_SIZE_PER_MSG_BYTES,
  DEFAULT_MAX_INFLIGHT_MSGS,
  DEFAULT_MAX_UNCOMMITTED_ENTRIES_SIZE_BYTES,
  DEFAULT_MAX_PENDING_READ_REQUESTS,
} from "./config.js";
