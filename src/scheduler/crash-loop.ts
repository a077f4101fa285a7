/**
 * The crash-loop detector (spec document 1: an in-memory sliding window per group). A group whose
 * crash count reaches `crashLoopThreshold` within `crashLoopWindowMs` trips: the caller pauses the
 * group, increments the crash-loop metric and publishes GROUP_CRASH_LOOP. Tripping clears the
 * group's window, so one loop trips once; after an operator resumes the group
 * (docs/decisions/scheduler.md, "Crash loop"), {@link CrashLoopDetector.reset} starts it afresh.
 */
import { configDefaults } from "../config/schema.js";
import type { Clock } from "../shared/clock.js";

/** Detector settings (controller.yml `crashes.crashLoopThreshold`, `crashes.crashLoopWindowSeconds`). */
export interface CrashLoopOptions {
  crashLoopThreshold: number;
  crashLoopWindowMs: number;
}

/** controller.yml's defaults (the spec's 3 crashes within 300 s). */
export const defaultCrashLoopOptions: CrashLoopOptions = {
  crashLoopThreshold: configDefaults.crashes.crashLoopThreshold,
  crashLoopWindowMs: configDefaults.crashes.crashLoopWindowSeconds * 1000,
};

/** What recording one crash concluded. */
export interface CrashLoopVerdict {
  /** True exactly when this crash completed a loop. */
  tripped: boolean;
  /** Crashes of the group inside the window, this one included. */
  crashCount: number;
  /** Time of the oldest crash inside the window (GROUP_CRASH_LOOP's windowStart). */
  windowStartMs: number;
}

/**
 * Sliding window of crash times per group. Memory is bounded: a group keeps at most
 * `crashLoopThreshold` times (older ones cannot matter), and groups without a crash inside the
 * window are dropped by {@link CrashLoopDetector.prune} and on every record.
 */
export class CrashLoopDetector {
  private readonly crashesByGroup = new Map<string, number[]>();

  constructor(
    private readonly options: CrashLoopOptions,
    private readonly clock: Clock,
  ) {
    if (!(options.crashLoopThreshold >= 1) || !(options.crashLoopWindowMs > 0)) {
      throw new Error(`crash loop: threshold must be at least 1 and the window positive (got ${options.crashLoopThreshold}, ${options.crashLoopWindowMs} ms)`);
    }
  }

  /** Records a crash of `group` now. */
  recordCrash(group: string): CrashLoopVerdict {
    const nowMs = this.clock.nowMs();
    const times = this.inWindow(group, nowMs);
    times.push(nowMs);
    if (times.length > this.options.crashLoopThreshold) times.shift();
    const verdict = { tripped: times.length >= this.options.crashLoopThreshold, crashCount: times.length, windowStartMs: times[0] };
    if (verdict.tripped) this.crashesByGroup.delete(group);
    else this.crashesByGroup.set(group, times);
    return verdict;
  }

  /** Crashes of `group` inside the window now. */
  crashCount(group: string): number {
    return this.inWindow(group, this.clock.nowMs()).length;
  }

  /** Forgets the group's window: on resume (a fresh start) and on delete. */
  reset(group: string): void {
    this.crashesByGroup.delete(group);
  }

  /** Drops every group without a crash inside the window; returns how many groups remain. */
  prune(): number {
    const nowMs = this.clock.nowMs();
    for (const group of [...this.crashesByGroup.keys()]) {
      if (this.inWindow(group, nowMs).length === 0) this.crashesByGroup.delete(group);
    }
    return this.crashesByGroup.size;
  }

  private inWindow(group: string, nowMs: number): number[] {
    const times = this.crashesByGroup.get(group) ?? [];
    // A crash exactly windowMs ago has left the window: "within 300 s" is strictly less.
    const fresh = times.filter((t) => nowMs - t < this.options.crashLoopWindowMs);
    if (fresh.length === 0) this.crashesByGroup.delete(group);
    return fresh;
  }
}
