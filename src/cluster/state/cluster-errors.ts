/**
 * Expected failures of the cluster service as {@link ApiError}s with the spec's codes, and the
 * startup refusal {@link ClusterStartupError} (a configuration or state mismatch the operator must
 * resolve; the controller does not start).
 */
import { ApiError, AssertionError, conflict, notFound } from "../../shared/errors.js";
import { CommandRefusal } from "./cluster-commands.js";

export const raftUnavailable = (detail: string) => new ApiError(503, "RAFT_UNAVAILABLE", `Raft cannot commit: ${detail}`);
export const clusterNotReady = () => conflict("The cluster meta is not stamped yet; retry shortly", "CLUSTER_NOT_READY");

/** The controller must not start: its cluster identity does not match its configuration or data. */
export class ClusterStartupError extends Error {
  readonly code = "CLUSTER_STARTUP_REFUSED";
  constructor(message: string) {
    super(message);
    this.name = "ClusterStartupError";
  }
}

/** The HTTP error for a refused command. */
export function refusalError(code: CommandRefusal, message: string): ApiError {
  switch (code) {
    case CommandRefusal.NotReady:
      return clusterNotReady();
    case CommandRefusal.MemberNotFound:
      return notFound(message, "MEMBER_NOT_FOUND");
    case CommandRefusal.JoinTokenNotFound:
      return notFound(message, "JOIN_TOKEN_NOT_FOUND");
    case CommandRefusal.ConfigVersionNotFound:
      return notFound(message, "CONFIG_VERSION_NOT_FOUND");
    case CommandRefusal.InvalidCommand:
      throw new AssertionError(`the cluster state refused a command as invalid: ${message}`);
    default:
      return conflict(message, code);
  }
}
