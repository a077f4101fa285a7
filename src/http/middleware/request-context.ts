/**
 * Request id and correlation (spec document 2, "Request correlation"): a fresh request id, the
 * inbound `X-Correlation-Id` when it is safe to log (else a fresh UUID), both echoed as response
 * headers and put into the logging MDC with the method and path for the rest of the request.
 */
import { randomUUID } from "node:crypto";
import type { MiddlewareHandler } from "hono";
import type { LogService } from "../../logs/types.js";
import type { AppEnv } from "../types.js";

/** Longest inbound correlation id kept; longer ones are replaced. */
export const CORRELATION_ID_LENGTH_MAX = 128;
const CORRELATION_ID_PATTERN = /^[A-Za-z0-9._-]+$/;

/** The inbound correlation id when it is 1..128 characters of [A-Za-z0-9._-], else null. */
export function sanitizeCorrelationId(value: string | undefined | null): string | null {
  if (!value) return null;
  const trimmed = value.trim();
  if (trimmed.length === 0 || trimmed.length > CORRELATION_ID_LENGTH_MAX) return null;
  return CORRELATION_ID_PATTERN.test(trimmed) ? trimmed : null;
}

export const requestId = (opts: { logs: Pick<LogService, "withMdc">; newId?: () => string }): MiddlewareHandler<AppEnv> => {
  const newId = opts.newId ?? randomUUID;
  return async function requestId(c, next) {
    const id = newId();
    const correlationId = sanitizeCorrelationId(c.req.header("x-correlation-id")) ?? newId();
    c.set("requestId", id);
    c.set("correlationId", correlationId);
    c.header("X-Request-Id", id);
    c.header("X-Correlation-Id", correlationId);
    const mdc = { requestId: id, correlationId, httpMethod: c.req.method, httpPath: c.req.path };
    await opts.logs.withMdc(mdc, () => next());
    // A route may return a Response it built itself, without the prepared headers: echo again.
    if (c.res.headers.get("X-Request-Id") !== id) {
      c.header("X-Request-Id", id);
      c.header("X-Correlation-Id", correlationId);
    }
  };
};
