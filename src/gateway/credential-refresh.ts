/**
 * The refresh of connected daemons' template credentials: every `intervalMs` (half a credential's
 * lifetime) each daemon with a session here gets a fresh one on its stream.
 */
import type { Clock } from "../shared/clock.js";
import { controllerMessage } from "../wire/daemon-proto.js";
import type { DaemonGateway } from "./daemon-gateway.js";

export interface CredentialRefreshOptions {
  gateway: Pick<DaemonGateway, "listSessions" | "sendToNode">;
  /** Issues a node's credential (the same issuer the gateway hands a daemon on connect). */
  issue(nodeId: string): { token: string; expires_at_ms: number };
  intervalMs: number;
  clock: Clock;
}

/** Starts the refresh; returns its stop. */
export function startCredentialRefresh(options: CredentialRefreshOptions): () => void {
  const { gateway } = options;
  const timer = options.clock.setInterval(
    () => {
      for (const session of gateway.listSessions()) gateway.sendToNode(session.nodeId, controllerMessage("api_credential", options.issue(session.nodeId)));
    },
    options.intervalMs,
    { unref: true },
  );
  return () => timer.cancel();
}
