/**
 * The fake clock of the tests: time moves only when a test advances it, and timers due by then run
 * in time order (ties in the order they were set), each seeing `nowMs()` at its due time. Timers set
 * by a callback run in the same advance when they fall due within it.
 */
import type { Clock, Timer } from "../../src/shared/clock.js";

interface Scheduled {
  readonly seq: number;
  dueMs: number;
  readonly intervalMs: number | null;
  readonly callback: () => void;
  cancelled: boolean;
}

export class FakeClock implements Clock {
  private currentMs: number;
  private seq = 0;
  private scheduled: Scheduled[] = [];

  constructor(startMs = 0) {
    this.currentMs = startMs;
  }

  nowMs(): number {
    return this.currentMs;
  }

  setTimeout(callback: () => void, delayMs: number): Timer {
    return this.schedule(callback, delayMs, null);
  }

  setInterval(callback: () => void, intervalMs: number): Timer {
    return this.schedule(callback, intervalMs, Math.max(1, intervalMs));
  }

  /** Timers not yet run or cancelled. */
  pendingTimers(): number {
    return this.scheduled.filter((timer) => !timer.cancelled).length;
  }

  /** How long until each pending timer is due, soonest first. */
  pendingDelaysMs(): number[] {
    return this.scheduled
      .filter((timer) => !timer.cancelled)
      .sort((a, b) => a.dueMs - b.dueMs || a.seq - b.seq)
      .map((timer) => timer.dueMs - this.currentMs);
  }

  /** Advances to the soonest pending timer (running it and anything due with it); returns how far. */
  advanceToNext(): number {
    const [nextMs] = this.pendingDelaysMs();
    if (nextMs === undefined) throw new Error("no timer is pending");
    this.advance(nextMs);
    return nextMs;
  }

  /** Moves time forward by `ms`, running every timer that falls due on the way. */
  advance(ms: number): void {
    const targetMs = this.currentMs + ms;
    for (let next = this.nextDue(targetMs); next; next = this.nextDue(targetMs)) {
      this.currentMs = Math.max(this.currentMs, next.dueMs);
      this.fire(next);
    }
    this.currentMs = targetMs;
  }

  /**
   * Like {@link advance}, but lets promises settle after each timer (and before the first), so code
   * that awaits between timers (a retry loop, a keeper renewing a lease) runs as it would in time.
   */
  async advanceAsync(ms: number): Promise<void> {
    const targetMs = this.currentMs + ms;
    await settle();
    for (let next = this.nextDue(targetMs); next; next = this.nextDue(targetMs)) {
      this.currentMs = Math.max(this.currentMs, next.dueMs);
      this.fire(next);
      await settle();
    }
    this.currentMs = targetMs;
  }

  /** Sets the time without running timers (a wall clock jump). */
  set(ms: number): void {
    this.currentMs = ms;
  }

  private schedule(callback: () => void, delayMs: number, intervalMs: number | null): Timer {
    const timer: Scheduled = { seq: this.seq++, dueMs: this.currentMs + Math.max(0, delayMs), intervalMs, callback, cancelled: false };
    this.scheduled.push(timer);
    return {
      cancel: () => {
        timer.cancelled = true;
      },
    };
  }

  private nextDue(targetMs: number): Scheduled | undefined {
    this.scheduled = this.scheduled.filter((timer) => !timer.cancelled);
    let best: Scheduled | undefined;
    for (const timer of this.scheduled) {
      if (timer.dueMs > targetMs) continue;
      if (!best || timer.dueMs < best.dueMs || (timer.dueMs === best.dueMs && timer.seq < best.seq)) best = timer;
    }
    return best;
  }

  private fire(timer: Scheduled): void {
    if (timer.intervalMs === null) timer.cancelled = true;
    else timer.dueMs += timer.intervalMs;
    timer.callback();
  }
}

/** Lets pending promise callbacks (and the immediates they queue) run. */
async function settle(): Promise<void> {
  for (let round = 0; round < 3; round++) await new Promise<void>((resolve) => setImmediate(resolve));
}
