/**
 * A mutex across controllers, in the shared key-value store: read-modify-write sequences on one
 * document (an operator's control of a deployment) taken through different controllers never
 * interleave. The key holds a random owner value with a TTL, renewed every third of it while the
 * holder works (a long template import keeps it), so a controller that dies holding it blocks the
 * others for at most the TTL; release removes it only while it is still the owner's.
 * The holder is handed an AbortSignal that fires when the lock is lost (a renewal found the key
 * gone or taken, or none was confirmed within the TTL: kv-hold.ts); it then stops writing, and the
 * write it was about to make is conditional anyway (the record's revision).
 * Within one controller the same key is serialised in memory first, so local callers queue without
 * polling the store.
 */
import { randomBytes } from "node:crypto";
import { KeyedMutex, type KeyedLock, type LockedSection } from "../domain/shared/keyed-mutex.js";
import { sleep, systemClock, type Clock } from "../shared/clock.js";
import { ApiError } from "../shared/errors.js";
import type { KvStore } from "../store/ports.js";
import { KvHold } from "./kv-hold.js";
import { KV_KEY_PREFIX } from "./keys.js";

/** `cloud:v1:mutex:<name>`: held while one controller runs a guarded sequence. */
export const mutexKey = (name: string): string => `${KV_KEY_PREFIX}mutex:${name}`;

export interface KvMutexOptions {
  /** How long a holder keeps the key at most (a dead holder's key expires after it). Default 10 s. */
  ttlMs?: number;
  /** How long a caller waits for the key before 503 MUTEX_TIMEOUT. Default 5 s. */
  waitMs?: number;
  /** Pause between two attempts to take the key. Default 20 ms. */
  retryMs?: number;
  clock?: Clock;
}

/**
 * The lock was lost while its holder worked (503 LOCK_LOST, Retry-After 1): nothing more was
 * written by the holder; the request can be sent again.
 */
export class LockLostError extends ApiError {
  readonly retryAfterSeconds = 1;
  constructor(name: string, why: string) {
    super(503, "LOCK_LOST", `The lock on ${name} was lost while the change was being made (${why}); nothing more was written, try again`);
    this.name = "LockLostError";
  }
}

export class KvMutex implements KeyedLock {
  private readonly local = new KeyedMutex();
  private readonly ttlMs: number;
  private readonly waitMs: number;
  private readonly retryMs: number;
  private readonly clock: Clock;

  constructor(
    private readonly kv: Pick<KvStore, "setIfAbsent" | "compareAndSet" | "compareAndDelete">,
    options: KvMutexOptions = {},
  ) {
    this.ttlMs = options.ttlMs ?? 10_000;
    this.waitMs = options.waitMs ?? 5_000;
    this.retryMs = options.retryMs ?? 20;
    this.clock = options.clock ?? systemClock;
  }

  /** The same mutex with every name prefixed (`group:`, `node:`, …), so record kinds never share a key. */
  scoped(prefix: string, options: { waitMs?: number } = {}): KeyedLock {
    return { run: (name, fn) => this.run(`${prefix}${name}`, fn, options.waitMs) };
  }

  /**
   * Runs `fn` while this caller alone, across the cluster, holds `name` (waiting `waitMs` at most
   * for it); `fn`'s signal aborts with {@link LockLostError} when the lock is lost.
   */
  run<T>(name: string, fn: LockedSection<T>, waitMs = this.waitMs): Promise<T> {
    return this.local.run(name, async () => {
      const key = mutexKey(name);
      const owner = randomBytes(12).toString("base64url");
      const deadline = this.clock.nowMs() + waitMs;
      let sentAtMs = this.clock.nowMs();
      while (!(await this.kv.setIfAbsent(key, owner, { ttlMs: this.ttlMs }))) {
        if (this.clock.nowMs() >= deadline) throw new ApiError(503, "MUTEX_TIMEOUT", `Another controller is changing ${name}; try again`);
        await sleep(this.clock, this.retryMs);
        sentAtMs = this.clock.nowMs();
      }
      const hold = new KvHold({
        kv: this.kv,
        key,
        value: owner,
        ttlMs: this.ttlMs,
        clock: this.clock,
        sentAtMs,
        lostReason: (why) => new LockLostError(name, why),
      });
      try {
        return await fn(hold.signal);
      } finally {
        hold.stop();
        // A release that fails costs the others at most the TTL; it never hides what `fn` did.
        await this.kv.compareAndDelete(key, owner).catch(() => false);
      }
    });
  }
}
