/**
 * Token buckets keyed by client (IP or username) in a bounded map. A bucket holds at most
 * `capacity` tokens and refills continuously at `capacity` per `windowMs`; each request takes one.
 * When the map is full the least recently used key is evicted: an evicted client starts again with a
 * full bucket, which errs on the side of letting traffic through rather than growing without bound.
 */
import type { Clock } from "../shared/clock.js";

export interface TokenBucketOptions {
  /** Tokens per window; also the burst size. */
  capacity: number;
  windowMs: number;
  /** Most keys tracked at once. */
  keysMax: number;
  clock: Clock;
}

/** Outcome of one {@link TokenBuckets.take}: allowed, or refused with the wait until a token exists. */
export type TakeResult = { allowed: true } | { allowed: false; retryAfterMs: number };

interface Bucket {
  tokens: number;
  updatedMs: number;
}

/** A bounded, least-recently-used map of token buckets. */
export class TokenBuckets {
  private readonly buckets = new Map<string, Bucket>();
  private readonly refillPerMs: number;

  constructor(private readonly options: TokenBucketOptions) {
    if (!(options.capacity >= 1) || !(options.windowMs > 0) || !(options.keysMax >= 1)) {
      throw new RangeError("token buckets need capacity >= 1, windowMs > 0 and keysMax >= 1");
    }
    this.refillPerMs = options.capacity / options.windowMs;
  }

  /** Number of keys currently tracked (never above `keysMax`). */
  get size(): number {
    return this.buckets.size;
  }

  /** Takes one token from `key`'s bucket. */
  take(key: string): TakeResult {
    const now = this.options.clock.nowMs();
    const bucket = this.bucketOf(key, now);
    const elapsedMs = Math.max(0, now - bucket.updatedMs);
    bucket.tokens = Math.min(this.options.capacity, bucket.tokens + elapsedMs * this.refillPerMs);
    bucket.updatedMs = now;
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return { allowed: true };
    }
    return { allowed: false, retryAfterMs: Math.ceil((1 - bucket.tokens) / this.refillPerMs) };
  }

  private bucketOf(key: string, now: number): Bucket {
    const existing = this.buckets.get(key);
    if (existing) {
      // Re-insert so iteration order is least recently used first.
      this.buckets.delete(key);
      this.buckets.set(key, existing);
      return existing;
    }
    while (this.buckets.size >= this.options.keysMax) {
      const oldest = this.buckets.keys().next().value as string;
      this.buckets.delete(oldest);
    }
    const bucket = { tokens: this.options.capacity, updatedMs: now };
    this.buckets.set(key, bucket);
    return bucket;
  }
}
