/**
 * CORS (hono/cors) for requests that carry an `Origin` header. Browsers send it on every
 * cross-origin request and preflight; other clients (cloudctl, daemons, probes) do not, and skipping
 * the CORS middleware for them keeps it from building a placeholder response on every request.
 */
import type { MiddlewareHandler } from "hono";
import { cors } from "hono/cors";
import type { AppEnv } from "../types.js";

/** Preflight results may be cached by browsers for this long. */
const PREFLIGHT_MAX_AGE_SECONDS = 600;

export const crossOrigin = (opts: { origins: readonly string[] }): MiddlewareHandler<AppEnv> => {
  const handler = cors({
    origin: opts.origins.includes("*") ? "*" : [...opts.origins],
    allowMethods: ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"],
    allowHeaders: ["Authorization", "Content-Type", "X-Correlation-Id", "traceparent"],
    exposeHeaders: ["X-Request-Id", "X-Correlation-Id", "Retry-After", "X-Trace-Id", "X-Trace-Url"],
    maxAge: PREFLIGHT_MAX_AGE_SECONDS,
  });
  return async function crossOrigin(c, next) {
    if (c.req.header("origin") === undefined) return next();
    return handler(c, next);
  };
};
