// The scheduler's tick accounting on the fake clock, recorded into a real metrics service: each
// evaluation pass is timed, each tick observes the groups it evaluated, and the lag gauge is the
// time since the last tick in which nothing failed.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createMetrics } from "../../src/metrics/metrics.js";
import { SchedulerTicks } from "../../src/scheduler/scheduler-ticks.js";
import { FakeClock } from "../support/fake-clock.js";

const value = (text: string, line: string) => {
  const found = text.split("\n").find((l) => l.startsWith(`${line} `));
  return found === undefined ? undefined : Number(found.slice(line.length + 1));
};

function setup() {
  const clock = new FakeClock(1_000_000);
  const metrics = createMetrics({ enabled: true, processMetrics: false });
  const ticks = new SchedulerTicks({
    clock,
    tickDuration: metrics.schedulerTickDuration,
    groupsEvaluated: metrics.schedulerGroupsEvaluated,
    tickIntervalMs: 15_000,
  });
  metrics.setGaugeSources({ schedulerLastTickLagMillis: () => ticks.lastTickLagMs() });
  return { clock, metrics, ticks };
}

describe("scheduler ticks", () => {
  it("times each evaluation pass on the clock", async () => {
    const { clock, metrics, ticks } = setup();
    await ticks.measure("lobby", async () => clock.advance(250));
    await ticks.measure("bedwars", async () => clock.advance(3_000));
    const text = await metrics.render();
    assert.equal(value(text, "cloud_scheduler_tick_duration_seconds_count"), 2);
    assert.equal(value(text, "cloud_scheduler_tick_duration_seconds_sum"), 3.25);
    assert.equal(value(text, 'cloud_scheduler_tick_duration_seconds_bucket{le="0.25"}'), 1);
    assert.equal(value(text, 'cloud_scheduler_tick_duration_seconds_bucket{le="5"}'), 2);
    assert.deepEqual(metrics.schedulerTickTotals(), { count: 2, sumSeconds: 3.25 });
  });

  it("observes the groups evaluated in each tick, once per group", async () => {
    const { clock, metrics, ticks } = setup();
    ticks.start();
    await ticks.measure("lobby", async () => undefined);
    await ticks.measure("lobby", async () => undefined);
    await ticks.measure("bedwars", async () => undefined);
    clock.advance(15_000);
    clock.advance(15_000); // a tick with nothing evaluated
    ticks.stop();
    const text = await metrics.render();
    assert.equal(value(text, "cloud_scheduler_groups_evaluated_count"), 2);
    assert.equal(value(text, "cloud_scheduler_groups_evaluated_sum"), 2);
    assert.equal(value(text, 'cloud_scheduler_groups_evaluated_bucket{le="0"}'), 1);
    assert.equal(value(text, 'cloud_scheduler_groups_evaluated_bucket{le="2"}'), 2);
    assert.equal(clock.pendingTimers(), 0, "stop cancels the tick timer");
  });

  it("reports 0 lag before the first tick, then the time since the last successful one", async () => {
    const { clock, metrics, ticks } = setup();
    ticks.start();
    const lag = async () => value(await metrics.render(), "cloud_scheduler_last_tick_lag_millis");
    clock.advance(5_000);
    assert.equal(await lag(), 0);
    clock.advance(10_000); // tick 1 ends, successful
    clock.advance(4_000);
    assert.equal(await lag(), 4_000);
    await assert.rejects(ticks.measure("lobby", async () => Promise.reject(new Error("store down"))));
    clock.advance(11_000); // tick 2 ends with a failure
    assert.equal(await lag(), 15_000);
    ticks.failed(); // an evaluation timed out in tick 3
    clock.advance(15_000);
    assert.equal(await lag(), 30_000);
    clock.advance(15_000); // tick 4 succeeds
    assert.equal(await lag(), 0);
    ticks.stop();
  });
});
