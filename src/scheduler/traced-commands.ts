/**
 * Daemon commands inside a client span (docs/decisions/tracing.md): each command gets a span of its
 * own, child of whatever is active (the HTTP request that asked for it, or none for the
 * scheduler's own dispatches), and carries the span's `traceparent` to the daemon, through another
 * controller when that one holds the daemon's stream.
 */
import { SpanKind, SpanStatusCode, type Tracing } from "../shared/tracing.js";
import type { DaemonLink } from "./scheduler-host.js";

/** `link` with every command traced; `link` itself when tracing is off. */
export function tracedDaemonLink(link: DaemonLink, tracing: Tracing): DaemonLink {
  if (!tracing.enabled) return link;
  return {
    onReport: (handler) => link.onReport(handler),
    sendCommand: (nodeId, command) =>
      tracing.inSpan(
        `daemon ${command.type}`,
        { kind: SpanKind.CLIENT, attributes: { "cloud.node.id": nodeId, "cloud.command": command.type } },
        async (span) => {
          const result = await link.sendCommand(nodeId, { ...command, traceparent: tracing.traceparent() });
          if (!result.ok) {
            span.setAttribute("cloud.error_code", result.error_code);
            span.setStatus({ code: SpanStatusCode.ERROR, message: result.error_code });
          }
          return result;
        },
      ),
  };
}
