// Scaling on reported load (docs/decisions/scheduler.md, "Scaling on load"): the pure rule driven
// evaluation by evaluation on the fake clock, as the group evaluator drives it — read the load,
// update the bookkeeping, decide, note a load start.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { LoadScaling } from "../../src/domain/groups/group-schemas.js";
import type { InstanceState } from "../../src/domain/instances/instance-schemas.js";
import {
  decideScaling,
  noLoadTracking,
  readLoad,
  trackLoad,
  type LoadSample,
  type LoadTracking,
  type ScalingDecision,
  type ScalingGroup,
  type ScalingInstance,
} from "../../src/scheduler/scaling.js";
import { FakeClock } from "../support/fake-clock.js";

const evaluationMs = 15_000;
const thresholds: LoadScaling = { minTps: 18, sustainSeconds: 30, cooldownSeconds: 120 };
const group: ScalingGroup = {
  name: "arena",
  scalingMode: "DYNAMIC",
  minInstances: 1,
  maxInstances: 3,
  maxPlayers: 100,
  maintenance: false,
  loadScaling: thresholds,
};

const inst = (id: string, state: InstanceState = "RUNNING", playerCount = 10): ScalingInstance => ({ id, state, playerCount });

type Scale = Extract<ScalingDecision, { action: "SCALE" }>;

/** The evaluator's loop over the pure parts: one call is one evaluation at the clock's time. */
class LoadScaler {
  tracking: LoadTracking = noLoadTracking;
  idle = new Map<string, number>();
  constructor(
    readonly clock: FakeClock,
    public g: ScalingGroup = group,
  ) {}

  evaluate(instances: ScalingInstance[], samples: LoadSample[]): Scale {
    const nowMs = this.clock.nowMs();
    const reading = readLoad(this.g.loadScaling!, instances, samples, nowMs);
    this.tracking = trackLoad(this.tracking, reading, nowMs);
    const decision = decideScaling({ group: this.g, instances, paused: false, nowMs, idleSinceMs: this.idle, load: { reading, tracking: this.tracking } });
    assert.equal(decision.action, "SCALE");
    const scale = decision as Scale;
    if (scale.trigger === "LOAD") this.tracking = { ...this.tracking, lastLoadStartMs: nowMs };
    return scale;
  }
}

describe("scaling on load", () => {
  const sample = (clock: FakeClock, instanceId: string, tps1m: number, msptAvg = 1000 / tps1m): LoadSample => ({
    instanceId,
    tps1m,
    msptAvg,
    reportedAtMs: clock.nowMs(),
  });

  test("the mean TPS below minTps for sustainSeconds adds one instance; one low evaluation does not", () => {
    const clock = new FakeClock(1_000_000);
    const scaler = new LoadScaler(clock);
    const instances = [inst("a"), inst("b")];

    // A spike: one evaluation low, the next one normal again.
    assert.equal(scaler.evaluate(instances, [sample(clock, "a", 10), sample(clock, "b", 14)]).start, 0);
    clock.advance(evaluationMs);
    assert.equal(scaler.evaluate(instances, [sample(clock, "a", 19.9), sample(clock, "b", 19.9)]).start, 0);
    assert.equal(scaler.tracking.breachSinceMs, null, "a reading within the threshold ends the breach");

    // Lasting: seen at 0, 15 and 30 s.
    clock.advance(evaluationMs);
    const first = scaler.evaluate(instances, [sample(clock, "a", 10), sample(clock, "b", 14)]);
    assert.deepEqual([first.start, first.stop], [0, []]);
    assert.match(first.message, /mean TPS 12\.00 below 18 \(2 reporting\) for 0 s; scaling up once it lasts 30 s/);
    clock.advance(evaluationMs);
    assert.equal(scaler.evaluate(instances, [sample(clock, "a", 10), sample(clock, "b", 14)]).start, 0);
    clock.advance(evaluationMs);
    const up = scaler.evaluate(instances, [sample(clock, "a", 10), sample(clock, "b", 14)]);
    assert.deepEqual([up.start, up.target, up.trigger], [1, 3, "LOAD"]);
    assert.match(up.message, /for 30 s: one more instance/);
  });

  test("a new instance still starting, then the cooldown, hold the next start; at maxInstances nothing more", () => {
    const clock = new FakeClock(0);
    const scaler = new LoadScaler(clock, { ...group, loadScaling: { minTps: 18, sustainSeconds: 0, cooldownSeconds: 60 } });
    const low = () => [sample(clock, "a", 8)];
    assert.equal(scaler.evaluate([inst("a")], low()).start, 1, "sustainSeconds 0: at once");

    clock.advance(evaluationMs);
    const starting = scaler.evaluate([inst("a"), inst("b", "STARTING", 0)], low());
    assert.equal(starting.start, 0);
    assert.match(starting.message, /1 instance is still starting/);

    clock.advance(evaluationMs);
    const cooling = scaler.evaluate([inst("a"), inst("b")], [...low(), sample(clock, "b", 20)]);
    assert.equal(cooling.start, 0, "mean 14 is still low, but the cooldown runs");
    assert.match(cooling.message, /cooldown of 60 s/);

    clock.advance(30_000);
    const second = scaler.evaluate([inst("a"), inst("b")], [...low(), sample(clock, "b", 20)]);
    assert.deepEqual([second.start, second.trigger], [1, "LOAD"], "60 s after the first start");

    clock.advance(120_000);
    const full = scaler.evaluate([inst("a"), inst("b"), inst("c")], [...low(), sample(clock, "b", 9), sample(clock, "c", 9)]);
    assert.equal(full.start, 0);
    assert.match(full.message, /at maxInstances 3/);
    for (let i = 0; i < 10; i++) {
      clock.advance(evaluationMs);
      assert.equal(scaler.evaluate([inst("a"), inst("b"), inst("c")], [...low(), sample(clock, "b", 9), sample(clock, "c", 9)]).start, 0);
    }
  });

  test("maxMsptAvg alone, and either threshold of two", () => {
    const clock = new FakeClock(0);
    const mspt = new LoadScaler(clock, { ...group, loadScaling: { maxMsptAvg: 45, sustainSeconds: 0, cooldownSeconds: 0 } });
    assert.equal(mspt.evaluate([inst("a"), inst("b")], [sample(clock, "a", 20, 40), sample(clock, "b", 20, 48)]).start, 0, "mean 44");
    const over = mspt.evaluate([inst("a"), inst("b")], [sample(clock, "a", 20, 44), sample(clock, "b", 20, 48)]);
    assert.equal(over.start, 1);
    assert.match(over.message, /mean MSPT 46\.00 above 45/);

    const both = new LoadScaler(clock, { ...group, loadScaling: { minTps: 15, maxMsptAvg: 45, sustainSeconds: 0, cooldownSeconds: 0 } });
    assert.equal(both.evaluate([inst("a")], [sample(clock, "a", 19, 50)]).start, 1, "TPS fine, MSPT over");
    assert.equal(new LoadScaler(clock, both.g).evaluate([inst("a")], [sample(clock, "a", 12, 30)]).start, 1, "MSPT fine, TPS under");
  });

  test("what counts: RUNNING instances with a sample of at most 2 minutes; a figure of 0 is not reported", () => {
    const clock = new FakeClock(500_000);
    const now = clock.nowMs();
    const at = (instanceId: string, tps1m: number, ageMs: number, msptAvg = 10): LoadSample => ({ instanceId, tps1m, msptAvg, reportedAtMs: now - ageMs });
    const instances = [inst("a"), inst("b"), inst("c", "DRAINING"), inst("d", "STARTING"), inst("e")];
    const reading = readLoad(thresholds, instances, [at("a", 10, 120_000), at("b", 20, 0), at("c", 1, 0), at("d", 1, 0), at("e", 2, 120_001)], now);
    assert.deepEqual(reading, { tpsAvg: 15, msptAvg: 10, reporting: 2, breach: "mean TPS 15.00 below 18 (2 reporting)" });

    // A proxy-like report without tick figures (both 0) counts for neither mean.
    const noTicks = readLoad(thresholds, [inst("a"), inst("b")], [at("a", 0, 0, 0), at("b", 19, 0)], now);
    assert.deepEqual(noTicks, { tpsAvg: 19, msptAvg: 10, reporting: 1, breach: null });

    // Nobody reporting: no breach, so the bookkeeping ends any breach and nothing starts.
    const silent = readLoad(thresholds, [inst("a")], [], now);
    assert.deepEqual(silent, { tpsAvg: null, msptAvg: null, reporting: 0, breach: null });
    assert.deepEqual(trackLoad({ breachSinceMs: 1, lastLoadStartMs: 2 }, silent, now), { breachSinceMs: null, lastLoadStartMs: 2 });
  });

  test("load never stops anything, and holds idle stops while it is over a threshold", () => {
    const clock = new FakeClock(0);
    const scaler = new LoadScaler(clock, { ...group, minInstances: 1, maxInstances: 2, loadScaling: { minTps: 18, sustainSeconds: 0, cooldownSeconds: 0 } });
    const instances = [inst("a"), inst("b", "RUNNING", 0)];
    scaler.idle = new Map([["b", -600_000]]);
    const held = scaler.evaluate(instances, [sample(clock, "a", 8), sample(clock, "b", 20)]);
    assert.deepEqual([held.start, held.stop], [0, []], "idle for 10 min, but the group lags (and is at maxInstances)");
    const calm = scaler.evaluate(instances, [sample(clock, "a", 19), sample(clock, "b", 20)]);
    assert.deepEqual(calm.stop, ["b"], "within the threshold: the player-fill rule stops the idle one");
    // High TPS never scales down a busy group.
    const busy = scaler.evaluate([inst("a", "RUNNING", 50), inst("b", "RUNNING", 50)], [sample(clock, "a", 20), sample(clock, "b", 20)]);
    assert.deepEqual([busy.start, busy.stop], [0, []]);
  });

  test("only DYNAMIC groups: STATIC and MANUAL ignore the load; player fill still comes first", () => {
    const clock = new FakeClock(0);
    const lagging = [sample(clock, "a", 5)];
    for (const scalingMode of ["STATIC", "MANUAL"] as const) {
      const scaler = new LoadScaler(clock, { ...group, scalingMode, loadScaling: { minTps: 18, sustainSeconds: 0, cooldownSeconds: 0 } });
      const d = scaler.evaluate([inst("a")], lagging);
      assert.equal(d.start, 0, scalingMode);
      assert.equal(d.trigger, undefined);
    }
    const fill = new LoadScaler(clock, { ...group, maxInstances: 6, loadScaling: { minTps: 18, sustainSeconds: 0, cooldownSeconds: 0 } });
    const d = fill.evaluate([inst("a", "RUNNING", 95), inst("b", "RUNNING", 95)], [sample(clock, "a", 5), sample(clock, "b", 5)]);
    assert.equal(d.start, 1, "190 players on 200 slots: the fill rule's target (3) already adds one");
    assert.equal(d.trigger, undefined);
    assert.match(d.message, /players fill 95 %/);
  });
});
