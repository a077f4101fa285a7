/**
 * Per-IP and per-user rate limits: token buckets with a bounded key map. A refused request gets
 * 429 RATE_LIMITED with `Retry-After` in whole seconds.
 */
import type { MiddlewareHandler } from "hono";
import type { Clock } from "../../shared/clock.js";
import { ApiError } from "../../shared/errors.js";
import { TokenBuckets } from "../token-buckets.js";
import type { AppContext, AppEnv } from "../types.js";

/** Keys tracked per limiter; beyond this the least recently seen client is forgotten. */
export const RATE_LIMIT_KEYS_MAX = 10_000;
const MINUTE_MS = 60_000;

/** 429 with the seconds to wait; the error handler copies `retryAfterSeconds` into `Retry-After`. */
export class RateLimitedError extends ApiError {
  constructor(readonly retryAfterSeconds: number) {
    super(429, "RATE_LIMITED", `Too many requests; retry after ${retryAfterSeconds} s`);
  }
}

export interface RateLimitOptions {
  perMinute: number;
  clock: Clock;
  keysMax?: number;
}

function limiter(opts: RateLimitOptions, keyOf: (c: AppContext) => string | null): MiddlewareHandler<AppEnv> {
  const buckets = new TokenBuckets({
    capacity: opts.perMinute,
    windowMs: MINUTE_MS,
    keysMax: opts.keysMax ?? RATE_LIMIT_KEYS_MAX,
    clock: opts.clock,
  });
  return async (c, next) => {
    const key = keyOf(c);
    if (key !== null) {
      const result = buckets.take(key);
      if (!result.allowed) throw new RateLimitedError(Math.max(1, Math.ceil(result.retryAfterMs / 1000)));
    }
    await next();
  };
}

/** Limits every caller by socket address. */
export const perIpRateLimit = (opts: RateLimitOptions): MiddlewareHandler<AppEnv> => {
  const limit = limiter(opts, (c) => c.get("clientIp"));
  return async function perIpRateLimit(c, next) {
    await limit(c, next);
  };
};

/** Limits signed-in principals by username; anonymous requests pass (the per-IP limit covers them). */
export const perUserRateLimit = (opts: RateLimitOptions): MiddlewareHandler<AppEnv> => {
  const limit = limiter(opts, (c) => c.get("principal")?.username ?? null);
  return async function perUserRateLimit(c, next) {
    await limit(c, next);
  };
};
