/**
 * Expected failures of the daemon's process side, each with a stable code. A gateway turns them
 * into command rejections; they never crash the daemon.
 */
export type RunnerErrorCode =
  | "STALE_EPOCH"
  | "UNKNOWN_PLATFORM"
  | "INVALID_PLATFORM"
  | "INVALID_SPEC"
  | "INVALID_COMMAND"
  | "TOO_MANY_INSTANCES"
  | "INSTANCE_EXISTS"
  | "UNKNOWN_INSTANCE"
  | "INVALID_STATE"
  | "RUNNER_SHUT_DOWN"
  /** A live instance on this node already uses the start's port. */
  | "PORT_IN_USE"
  /** The start would take the live instances' memory above the node's maxMemoryMb. */
  | "INSUFFICIENT_MEMORY";

/** A refused runner command. `code` is stable; `message` is for people. */
export class RunnerError extends Error {
  constructor(
    readonly code: RunnerErrorCode,
    message: string,
  ) {
    super(message);
    this.name = "RunnerError";
  }
}

/**
 * A command carried a fencing token lower than the highest the runner has seen for the group: it
 * comes from a controller that lost the group's lease and must not act on it any more.
 */
export class StaleEpochError extends RunnerError {
  constructor(
    readonly group: string,
    readonly fencingToken: number,
    readonly highestFencingToken: number,
  ) {
    super("STALE_EPOCH", `Fencing token ${fencingToken} for group ${group} is older than ${highestFencingToken}`);
    this.name = "StaleEpochError";
  }
}
