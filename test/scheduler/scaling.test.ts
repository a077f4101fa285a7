import { describe, test } from "node:test";
import assert from "node:assert/strict";
import type { InstanceState } from "../../src/domain/instances/instance-schemas.js";
import { FakeClock } from "../support/fake-clock.js";
import {
  decideExplicitStart,
  decideScaling,
  defaultScalingPolicy,
  trackIdle,
  type ScalingDecision,
  type ScalingGroup,
  type ScalingInstance,
} from "../../src/scheduler/scaling.js";

const base: ScalingGroup = { name: "lobby", scalingMode: "DYNAMIC", minInstances: 2, maxInstances: 6, maxPlayers: 100, maintenance: false };
const minuteMs = 60_000;

function inst(id: string, state: InstanceState, playerCount = 0): ScalingInstance {
  return { id, state, playerCount };
}

function scale(decision: ScalingDecision) {
  assert.equal(decision.action, "SCALE");
  return decision.action === "SCALE" ? decision : (undefined as never);
}

describe("decideScaling", () => {
  test("maintenance and a crash-loop pause skip the group, whatever its mode", () => {
    for (const scalingMode of ["STATIC", "DYNAMIC", "MANUAL"] as const) {
      const m = decideScaling({ group: { ...base, scalingMode, maintenance: true }, instances: [], paused: false, nowMs: 0, idleSinceMs: new Map() });
      assert.deepEqual(m, { action: "SKIP", reason: "MAINTENANCE", message: "group lobby is in maintenance" });
      const p = decideScaling({ group: { ...base, scalingMode }, instances: [], paused: true, nowMs: 0, idleSinceMs: new Map() });
      assert.equal(p.action === "SKIP" && p.reason, "CRASH_LOOP_PAUSED");
    }
  });

  test("STATIC: exactly minInstances; crashed and stopping ones do not count; surplus stops not-yet-running first", () => {
    const group: ScalingGroup = { ...base, scalingMode: "STATIC", minInstances: 3 };
    const short = scale(
      decideScaling({ group, instances: [inst("a", "RUNNING"), inst("b", "CRASHED"), inst("c", "STOPPING")], paused: false, nowMs: 0, idleSinceMs: new Map() }),
    );
    assert.equal(short.start, 2);
    const over = scale(
      decideScaling({
        group: { ...group, minInstances: 2 },
        instances: [inst("a", "RUNNING", 5), inst("b", "RUNNING", 0), inst("c", "STARTING"), inst("d", "RUNNING", 1)],
        paused: false,
        nowMs: 0,
        idleSinceMs: new Map(),
      }),
    );
    assert.deepEqual(over.stop, ["c", "b"]);
    assert.equal(over.start, 0);
  });

  test("STATIC: a slot an operator stopped counts; nothing starts in its place", () => {
    const group: ScalingGroup = { ...base, name: "hub", scalingMode: "STATIC", minInstances: 3 };
    const input = (instances: ScalingInstance[], stopped: string[]) => ({
      group,
      instances,
      paused: false,
      nowMs: 0,
      idleSinceMs: new Map(),
      stoppedByOperator: new Set(stopped),
    });
    const held = scale(decideScaling(input([inst("hub-1", "STOPPED"), inst("hub-2", "RUNNING"), inst("hub-3", "RUNNING")], ["hub-1"])));
    assert.deepEqual([held.start, held.stop, held.target], [0, [], 3]);
    assert.match(held.message, /1 stopped by an operator/);
    // The same group without the operator's stop: the crashed slot is refilled.
    assert.equal(scale(decideScaling(input([inst("hub-1", "CRASHED"), inst("hub-2", "RUNNING"), inst("hub-3", "RUNNING")], []))).start, 1);
    // A stopped id that is counted anyway (started again meanwhile) is not counted twice.
    assert.equal(scale(decideScaling(input([inst("hub-1", "RUNNING"), inst("hub-2", "RUNNING")], ["hub-1"]))).start, 1);
    // Ids that are not slots of the group do not hold anything.
    assert.equal(scale(decideScaling(input([inst("hub-2", "RUNNING")], ["other-1", "hub-x"]))).start, 2);
  });

  test("STATIC surplus stops the highest slots first, ids that are not slots before them", () => {
    const group: ScalingGroup = { ...base, name: "hub", scalingMode: "STATIC", minInstances: 2 };
    const instances = [inst("hub-1", "RUNNING", 0), inst("hub-10", "RUNNING", 9), inst("hub-2", "STARTING"), inst("hub-3", "RUNNING", 0)];
    const d = scale(decideScaling({ group, instances, paused: false, nowMs: 0, idleSinceMs: new Map() }));
    assert.deepEqual(d.stop, ["hub-10", "hub-3"], "numeric order, not string order, and players do not matter");
    const mixed = scale(
      decideScaling({
        group: { ...group, minInstances: 1 },
        instances: [inst("hub-1", "RUNNING"), inst("hub-2", "RUNNING"), inst("hub-1a2b3c4d", "RUNNING")],
        paused: false,
        nowMs: 0,
        idleSinceMs: new Map(),
      }),
    );
    assert.deepEqual(mixed.stop, ["hub-1a2b3c4d", "hub-2"]);
    // Lowered below the slots an operator stopped: the running ones stop, the stopped stay stopped.
    const below = scale(
      decideScaling({
        group: { ...group, minInstances: 1 },
        instances: [inst("hub-1", "STOPPED"), inst("hub-2", "RUNNING")],
        paused: false,
        nowMs: 0,
        idleSinceMs: new Map(),
        stoppedByOperator: new Set(["hub-1"]),
      }),
    );
    assert.deepEqual([below.start, below.stop], [0, ["hub-2"]]);
  });

  test("MANUAL never starts or stops on its own", () => {
    const group: ScalingGroup = { ...base, scalingMode: "MANUAL", minInstances: 3 };
    const d = scale(decideScaling({ group, instances: [inst("a", "RUNNING", 0)], paused: false, nowMs: 10 * minuteMs, idleSinceMs: new Map([["a", 0]]) }));
    assert.deepEqual([d.start, d.stop], [0, []]);
  });

  test("DYNAMIC: below min starts the missing ones", () => {
    const d = scale(
      decideScaling({ group: base, instances: [inst("a", "RUNNING", 50), inst("x", "CRASHED")], paused: false, nowMs: 0, idleSinceMs: new Map() }),
    );
    assert.equal(d.start, 1);
  });

  test("DYNAMIC: scale up at 80 % fill of RUNNING slots, not below", () => {
    const at79 = [inst("a", "RUNNING", 80), inst("b", "RUNNING", 78)];
    assert.equal(scale(decideScaling({ group: base, instances: at79, paused: false, nowMs: 0, idleSinceMs: new Map() })).start, 0);
    const at80 = [inst("a", "RUNNING", 80), inst("b", "RUNNING", 80)];
    const up = scale(decideScaling({ group: base, instances: at80, paused: false, nowMs: 0, idleSinceMs: new Map() }));
    assert.equal(up.start, 1);
    assert.equal(up.message, "DYNAMIC: 160 players fill 80 % of 200 slots");
  });

  test("DYNAMIC: a surge asks for enough instances at once, capped at maxInstances", () => {
    const full = [inst("a", "RUNNING", 100), inst("b", "RUNNING", 100)];
    // 200 players at 80 per instance: 3 instances, at least one more than now.
    assert.equal(scale(decideScaling({ group: base, instances: full, paused: false, nowMs: 0, idleSinceMs: new Map() })).start, 1);
    const many = Array.from({ length: 5 }, (_, i) => inst(`r${i}`, "RUNNING", 100));
    const d = scale(decideScaling({ group: base, instances: many, paused: false, nowMs: 0, idleSinceMs: new Map() }));
    assert.equal(d.start, 1, "7 wanted, 6 allowed");
    assert.equal(d.target, 6);
  });

  test("DYNAMIC: an instance already starting covers the scale-up (no repeat)", () => {
    const instances = [inst("a", "RUNNING", 90), inst("b", "RUNNING", 90), inst("c", "STARTING")];
    assert.equal(scale(decideScaling({ group: base, instances, paused: false, nowMs: 0, idleSinceMs: new Map() })).start, 0);
  });

  test("DYNAMIC: idle instances stop after the cooldown, never below min, longest idle first", () => {
    const clock = new FakeClock(0);
    const instances = [inst("a", "RUNNING", 0), inst("b", "RUNNING", 0), inst("c", "RUNNING", 0), inst("d", "RUNNING", 0)];
    let idle = trackIdle(new Map(), [instances[2]], clock.nowMs());
    clock.advance(minuteMs);
    idle = trackIdle(idle, instances, clock.nowMs());
    assert.deepEqual(
      [...idle],
      [
        ["a", minuteMs],
        ["b", minuteMs],
        ["c", 0],
        ["d", minuteMs],
      ],
    );
    clock.advance(defaultScalingPolicy.idleCooldownMs - minuteMs - 1);
    assert.deepEqual(scale(decideScaling({ group: base, instances, paused: false, nowMs: clock.nowMs(), idleSinceMs: idle })).stop, []);
    clock.advance(1);
    assert.deepEqual(scale(decideScaling({ group: base, instances, paused: false, nowMs: clock.nowMs(), idleSinceMs: idle })).stop, ["c"]);
    clock.advance(minuteMs);
    const d = scale(decideScaling({ group: base, instances, paused: false, nowMs: clock.nowMs(), idleSinceMs: idle }));
    assert.deepEqual(d.stop, ["c", "a"], "min 2 stay");
    assert.equal(d.target, 2);
  });

  test("DYNAMIC: no scale-down while the others would pass 60 % (no flapping against scale-up)", () => {
    // 160 players on 3 instances: stopping the idle one leaves 80 % on 2, which would scale up again.
    const instances = [inst("a", "RUNNING", 80), inst("b", "RUNNING", 80), inst("c", "RUNNING", 0)];
    const idle = new Map([["c", 0]]);
    const nowMs = 60 * minuteMs;
    assert.deepEqual(scale(decideScaling({ group: base, instances, paused: false, nowMs, idleSinceMs: idle })).stop, []);
    const fewer = [inst("a", "RUNNING", 60), inst("b", "RUNNING", 60), inst("c", "RUNNING", 0)];
    assert.deepEqual(scale(decideScaling({ group: base, instances: fewer, paused: false, nowMs, idleSinceMs: idle })).stop, ["c"]);
  });

  test("DYNAMIC: above maxInstances (after a PATCH) stops the surplus", () => {
    const instances = Array.from({ length: 4 }, (_, i) => inst(`r${i}`, "RUNNING", i));
    const d = scale(decideScaling({ group: { ...base, maxInstances: 2 }, instances, paused: false, nowMs: 0, idleSinceMs: new Map() }));
    assert.deepEqual(d.stop, ["r0", "r1"]);
  });

  test("a scaling mode outside the schema's three is a broken invariant", () => {
    assert.throws(
      () => decideScaling({ group: { ...base, scalingMode: "AUTO" }, instances: [], paused: false, nowMs: 0, idleSinceMs: new Map() }),
      /unknown scaling mode: AUTO/,
    );
  });

  test("starts are bounded per decision; capped tells the loop to evaluate again", () => {
    const group: ScalingGroup = { ...base, scalingMode: "STATIC", minInstances: 1_200 };
    const d = scale(decideScaling({ group, instances: [], paused: false, nowMs: 0, idleSinceMs: new Map() }));
    assert.deepEqual([d.start, d.capped, d.target], [500, true, 1_200]);
  });
});

describe("decideExplicitStart", () => {
  test("per mode; nothing in maintenance or while paused", () => {
    const running = [inst("a", "RUNNING"), inst("b", "STARTING")];
    assert.deepEqual(decideExplicitStart({ ...base, scalingMode: "STATIC", minInstances: 5 }, running, false), { count: 3 });
    assert.deepEqual(decideExplicitStart({ ...base, scalingMode: "STATIC", minInstances: 2 }, running, false), {
      count: 0,
      reason: "STATIC group already has 2 of 2",
    });
    assert.deepEqual(decideExplicitStart({ ...base, minInstances: 4 }, running, false), { count: 2 });
    assert.deepEqual(decideExplicitStart(base, running, false), { count: 1 });
    assert.deepEqual(decideExplicitStart({ ...base, scalingMode: "MANUAL", minInstances: 0, maxInstances: 2 }, running, false), {
      count: 0,
      reason: "group is at maxInstances 2",
    });
    assert.deepEqual(decideExplicitStart({ ...base, scalingMode: "MANUAL" }, running, false), { count: 1 });
    assert.equal(decideExplicitStart({ ...base, maintenance: true }, [], false).count, 0);
    assert.match(decideExplicitStart(base, [], true).reason ?? "", /paused after a crash loop/);
  });
});
