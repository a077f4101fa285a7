/**
 * One server span per request (docs/decisions/tracing.md): an inbound `traceparent` (a plugin's, or
 * any client's) is continued, else a root span is sampled with `telemetry.samplerRatio`. Everything
 * the request does (daemon commands included) runs inside the span. A recorded span is named on
 * the response: `X-Trace-Id`, and `X-Trace-Url` when `telemetry.traceUiTemplate` is set, so the
 * dashboard can link a traced response to its trace.
 */
import type { MiddlewareHandler } from "hono";
import { routePath } from "hono/route";
import { SpanKind, SpanStatusCode, type Tracing } from "../../shared/tracing.js";
import type { AppEnv } from "../types.js";

/** The trace's URL from a template holding `{traceId}`; empty when there is no template. */
export function traceUrl(template: string, traceId: string): string {
  return template ? template.replaceAll("{traceId}", traceId) : "";
}

export const traceRequests = (opts: { tracing: Tracing; traceUiTemplate: string }): MiddlewareHandler<AppEnv> =>
  async function traceRequests(c, next) {
    if (!opts.tracing.enabled) return next();
    const method = c.req.method.toUpperCase();
    await opts.tracing.inSpan(
      method,
      { kind: SpanKind.SERVER, traceparent: c.req.header("traceparent"), attributes: { "http.request.method": method, "url.path": c.req.path } },
      async (span) => {
        const { traceId, traceFlags } = span.spanContext();
        // Before the handler: a route that answers with a Response of its own still carries them.
        if (span.isRecording() && (traceFlags & 1) === 1) {
          c.header("X-Trace-Id", traceId);
          const url = traceUrl(opts.traceUiTemplate, traceId);
          if (url) c.header("X-Trace-Url", url);
        }
        await next();
        const route = routePath(c, -1);
        if (route && route !== "*") {
          span.updateName(`${method} ${route}`);
          span.setAttribute("http.route", route);
        }
        span.setAttribute("http.response.status_code", c.res.status);
        if (c.res.status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
        const requestId = c.get("requestId");
        if (requestId) span.setAttribute("cloud.request_id", requestId);
      },
    );
  };
