/** Outermost middleware: counts and times every request, whatever answered it. */
import type { MiddlewareHandler } from "hono";
import type { AppEnv } from "../types.js";

/** The slice of the metrics service the HTTP layer records into. */
export interface HttpMetricsRecorder {
  /** False when `metrics.enabled` is false: nothing is recorded and /metrics answers 404. */
  readonly enabled: boolean;
  /** One finished request: method as received, final status, duration in seconds. */
  observeHttp(method: string, status: number, seconds: number): void;
}

/** Records `cloud_http_requests_total` / `cloud_http_request_duration_seconds` for every request. */
export const httpMetrics = (opts: { metrics: HttpMetricsRecorder }): MiddlewareHandler<AppEnv> =>
  async function httpMetrics(c, next) {
    const startNs = process.hrtime.bigint();
    try {
      await next();
    } finally {
      if (opts.metrics.enabled) {
        const seconds = Number(process.hrtime.bigint() - startNs) / 1e9;
        opts.metrics.observeHttp(c.req.method.toLowerCase(), c.res.status, seconds);
      }
    }
  };
