/**
 * A key held in the shared key-value store for as long as some work runs (a record lock, the
 * restore maintenance flag): the holder wrote `<key> = <value>` with a TTL, and this keeps renewing
 * it, every third of the TTL, with a compare-and-set of the exact value. Its `signal` aborts the
 * moment the hold is lost, so the holder stops writing instead of carrying on unprotected:
 *
 * - a renewal finds another value (the key expired and someone else took it, or it was flushed);
 * - or no renewal was confirmed in time: the local deadline is the send time of the last confirmed
 *   write + TTL − TTL/6 (the store starts the TTL on receipt, after the send, and the margin
 *   absorbs timer lateness), so the key cannot have expired in the store before the signal fires.
 *   A store that is down or frozen therefore ends the hold within one TTL.
 *
 * Time goes through the injected clock; renewals never overlap.
 */
import type { Clock, Timer } from "../shared/clock.js";
import { assert } from "../shared/errors.js";
import type { KvStore } from "../store/ports.js";

/** Options of {@link KvHold}. */
export interface KvHoldOptions {
  kv: Pick<KvStore, "compareAndSet">;
  key: string;
  /** The holder's value, already written by the caller. */
  value: string;
  ttlMs: number;
  clock: Clock;
  /** When the write that took the key was sent (the deadline counts from there). */
  sentAtMs: number;
  /** What the signal aborts with (the error a holder throws when it finds it fired). */
  lostReason(why: string): Error;
}

/** A held key, renewed until {@link KvHold.stop}; see the module comment. */
export class KvHold {
  private readonly controller = new AbortController();
  private readonly renewal: Timer;
  private deadline: Timer;
  private renewing = false;
  private stopped = false;

  constructor(private readonly options: KvHoldOptions) {
    assert(Number.isSafeInteger(options.ttlMs) && options.ttlMs >= 3, "a held key needs a TTL of at least 3 ms");
    this.deadline = this.armDeadline(options.sentAtMs);
    this.renewal = options.clock.setInterval(() => void this.renew(), Math.floor(options.ttlMs / 3), { unref: true });
  }

  /** Aborts when the hold is lost; never aborts after {@link stop}. */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** Stops renewing (the holder is done and releases the key itself). */
  stop(): void {
    this.stopped = true;
    this.renewal.cancel();
    this.deadline.cancel();
  }

  private async renew(): Promise<void> {
    if (this.renewing || this.stopped) return;
    this.renewing = true;
    const { kv, key, value, ttlMs, clock } = this.options;
    const sentAtMs = clock.nowMs();
    try {
      if (await kv.compareAndSet(key, value, value, { ttlMs })) {
        if (!this.stopped && !this.signal.aborted) {
          this.deadline.cancel();
          this.deadline = this.armDeadline(sentAtMs);
        }
      } else {
        this.lose(`${key} is no longer held (it expired or was taken)`);
      }
    } catch {
      // The store did not answer: the deadline decides.
    } finally {
      this.renewing = false;
    }
  }

  private armDeadline(sentAtMs: number): Timer {
    const { ttlMs, clock, key } = this.options;
    const deadlineMs = sentAtMs + ttlMs - Math.floor(ttlMs / 6);
    return clock.setTimeout(() => this.lose(`${key} was not renewed within its TTL (${ttlMs} ms)`), Math.max(0, deadlineMs - clock.nowMs()), {
      unref: true,
    });
  }

  private lose(why: string): void {
    if (this.stopped || this.signal.aborted) return;
    this.renewal.cancel();
    this.deadline.cancel();
    this.controller.abort(this.options.lostReason(why));
  }
}
