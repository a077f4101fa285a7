/**
 * Expected failures of the Raft library, as typed errors with stable codes. Broken invariants are
 * not errors but assertions ({@link assert}): they mean a bug, and the process should crash.
 */

/** Stable codes carried by {@link RaftError}; hosts switch on these, never on messages. */
export const RaftErrorCode = {
  /** A proposal was not accepted (leader transfer in progress, uncommitted log full, too large, conf change refused). */
  ProposalDropped: "PROPOSAL_DROPPED",
  /** This node knows no leader to which a proposal or read could be forwarded. */
  NotLeader: "NOT_LEADER",
  /** The requested log index lies before the first index still kept (compacted away). */
  Compacted: "COMPACTED",
  /** The requested log index lies after the last index the storage holds. */
  Unavailable: "UNAVAILABLE",
  /** A snapshot is not newer than the one the storage already holds. */
  SnapshotOutOfDate: "SNAPSHOT_OUT_OF_DATE",
  /** A membership change cannot be applied to the current configuration. */
  InvalidConfChange: "INVALID_CONF_CHANGE",
  /** The configuration handed to the node is unusable. */
  InvalidConfig: "INVALID_CONFIG",
  /** A local-only message type was passed to `step()`. */
  StepLocalMessage: "STEP_LOCAL_MESSAGE",
  /** Bytes from the wire could not be decoded. */
  MalformedMessage: "MALFORMED_MESSAGE",
} as const;
/** One of the {@link RaftErrorCode} values. */
export type RaftErrorCode = (typeof RaftErrorCode)[keyof typeof RaftErrorCode];

/** Why a proposal was dropped; carried by {@link RaftError} with code `PROPOSAL_DROPPED`. */
export type ProposalDropReason = "leader-transfer-in-progress" | "uncommitted-size-exceeded" | "too-large" | "not-a-member" | "conf-change-refused";

/**
 * An expected failure of the Raft library. `code` is stable and is what callers branch on;
 * `reason` refines `PROPOSAL_DROPPED`.
 */
export class RaftError extends Error {
  constructor(
    readonly code: RaftErrorCode,
    message: string,
    readonly reason?: ProposalDropReason,
  ) {
    super(message);
    this.name = "RaftError";
  }
}

/** The storage no longer holds the requested index: it was compacted into a snapshot. */
export class ErrCompacted extends RaftError {
  constructor(readonly index: number) {
    super(RaftErrorCode.Compacted, `log index ${index} is compacted`);
    this.name = "ErrCompacted";
  }
}

/** The storage does not hold the requested index yet. */
export class ErrUnavailable extends RaftError {
  constructor(readonly index: number) {
    super(RaftErrorCode.Unavailable, `log index ${index} is not available`);
    this.name = "ErrUnavailable";
  }
}

/** A snapshot at or before the storage's current snapshot was offered. */
export class ErrSnapOutOfDate extends RaftError {
  constructor(readonly index: number) {
    super(RaftErrorCode.SnapshotOutOfDate, `snapshot at index ${index} is out of date`);
    this.name = "ErrSnapOutOfDate";
  }
}

/**
 * True when `error` carries the given stable code. Storage errors are recognised by code, not by
 * class, so storages outside this library may throw their own error classes with the same codes.
 */
export function hasErrorCode(error: unknown, code: string): boolean {
  return typeof error === "object" && error !== null && (error as { code?: unknown }).code === code;
}

/** Thrown when an invariant of the library is broken: a bug, never an expected condition. */
export class RaftAssertionError extends Error {
  constructor(message: string) {
    super(`raft invariant broken: ${message}`);
    this.name = "RaftAssertionError";
  }
}

/**
 * Throws a {@link RaftAssertionError} unless `condition` holds. Pass the message as a function
 * when it is built from values, so hot paths do not format strings that are never used.
 */
export function assert(condition: unknown, message: string | (() => string)): asserts condition {
  if (!condition) throw new RaftAssertionError(typeof message === "string" ? message : message());
}
