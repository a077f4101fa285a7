/**
 * The scheduler's tick accounting for the metrics (spec document 2, "Metrics"). Every group's actor
 * evaluates on its own timer, so the host counts in ticks of `evaluationIntervalMs`:
 *
 * - each evaluation pass of one group is timed into `cloud_scheduler_tick_duration_seconds`;
 * - when a tick ends, the number of groups evaluated during it goes to
 *   `cloud_scheduler_groups_evaluated`;
 * - a tick is successful when no evaluation in it failed (threw or timed out); the lag gauge
 *   `cloud_scheduler_last_tick_lag_millis` is the time since the end of the last successful tick,
 *   0 before the first one. A healthy scheduler stays below one interval; a stuck one keeps growing.
 *
 * Durations are read from the injected Clock, like every other time in the scheduler.
 */
import type { HistogramHandle } from "../metrics/metrics.js";
import type { Clock, Timer } from "../shared/clock.js";

export interface SchedulerTicksDeps {
  clock: Clock;
  tickDuration: HistogramHandle;
  groupsEvaluated: HistogramHandle;
  /** Length of one tick: `scheduler.evaluationIntervalSeconds` in ms. */
  tickIntervalMs: number;
}

/** Times evaluation passes and closes a tick every interval. */
export class SchedulerTicks {
  private readonly evaluated = new Set<string>();
  private failedInTick = false;
  private lastSuccessfulTickMs: number | null = null;
  private timer: Timer | null = null;

  constructor(private readonly deps: SchedulerTicksDeps) {}

  /** Runs one evaluation pass of `group`, timing it; a rejection marks the tick failed and is rethrown. */
  async measure<T>(group: string, evaluate: () => Promise<T>): Promise<T> {
    const startedMs = this.deps.clock.nowMs();
    try {
      const result = await evaluate();
      this.evaluated.add(group);
      return result;
    } catch (err) {
      this.failedInTick = true;
      throw err;
    } finally {
      this.deps.tickDuration.observe(Math.max(0, this.deps.clock.nowMs() - startedMs) / 1000);
    }
  }

  /** An evaluation failed outside {@link measure} (its timeout): the tick is not successful. */
  failed(): void {
    this.failedInTick = true;
  }

  start(): void {
    this.timer ??= this.deps.clock.setInterval(() => this.closeTick(), this.deps.tickIntervalMs, { unref: true });
  }

  stop(): void {
    this.timer?.cancel();
    this.timer = null;
  }

  /** Ends the current tick: records how many groups it evaluated and whether it succeeded. */
  closeTick(): void {
    this.deps.groupsEvaluated.observe(this.evaluated.size);
    if (!this.failedInTick) this.lastSuccessfulTickMs = this.deps.clock.nowMs();
    this.evaluated.clear();
    this.failedInTick = false;
  }

  /** Milliseconds since the last successful tick ended; 0 before the first. */
  lastTickLagMs(): number {
    return this.lastSuccessfulTickMs === null ? 0 : Math.max(0, this.deps.clock.nowMs() - this.lastSuccessfulTickMs);
  }
}
