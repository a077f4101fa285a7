/** Expected failures of the daemon gateway, each with a stable code. */

/** Stable codes of {@link GatewayError}. */
export type GatewayErrorCode =
  /** No session for the node on this controller. */
  | "NODE_NOT_CONNECTED"
  /** The session's outbound queue is full; the command was not sent. */
  | "QUEUE_FULL"
  /** The daemon did not answer the command in time. */
  | "COMMAND_TIMEOUT"
  /** The session ended before the daemon answered. */
  | "NODE_DISCONNECTED"
  /** The gateway is stopping or stopped. */
  | "GATEWAY_STOPPED";

/** A typed, expected gateway failure. */
export class GatewayError extends Error {
  constructor(
    readonly code: GatewayErrorCode,
    message: string,
  ) {
    super(message);
    this.name = "GatewayError";
  }
}
