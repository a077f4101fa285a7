// The rollout step alone: surge and unavailability bounds, the batch, the canary phase, the order
// of retirement, and the group rules that decide the bounds (STATIC in place, RECREATE, DYNAMIC's
// ceiling, no deadlock when neither surge nor unavailability is allowed). A whole rollout is
// simulated step by step to check the availability floor holds at every step.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { DeploymentSettings } from "../../src/deployments/deployment-schemas.js";
import { planRolloutStep, rolloutBounds, type OldInstance, type RolloutBounds } from "../../src/deployments/rollout-plan.js";

const settings: DeploymentSettings = {
  strategy: "ROLLING",
  batchSize: 1,
  canaryInstances: null,
  canaryPercent: null,
  healthGate: true,
  minHealthySeconds: 10,
  autoRollback: false,
  promotionTimeoutSeconds: null,
  maxSurge: 1,
  maxUnavailable: 0,
};
const running = (n: number, players = 0): OldInstance[] =>
  Array.from({ length: n }, (_, i) => ({ id: `old-${i + 1}`, state: "RUNNING", playerCount: players }));
const dynamic = { scalingMode: "DYNAMIC" as const, static: false, minInstances: 2, maxInstances: 10 };

describe("rollout bounds", () => {
  test("RECREATE takes every instance at once; STATIC rolls one slot at a time without surge", () => {
    assert.deepEqual(rolloutBounds(dynamic, { ...settings, strategy: "RECREATE" }, 4), { surge: 0, maxUnavailable: 4, batchSize: 4 });
    assert.deepEqual(rolloutBounds({ scalingMode: "STATIC", static: true, minInstances: 3, maxInstances: 3 }, { ...settings, maxSurge: 5, batchSize: 3 }, 3), {
      surge: 0,
      maxUnavailable: 1,
      batchSize: 1,
    });
  });

  test("DYNAMIC surges no higher than maxInstances; no surge and no unavailability becomes one unavailable", () => {
    assert.equal(rolloutBounds(dynamic, { ...settings, maxSurge: 5 }, 8).surge, 2);
    assert.deepEqual(rolloutBounds(dynamic, settings, 10), { surge: 0, maxUnavailable: 1, batchSize: 1 });
    assert.equal(rolloutBounds({ ...dynamic, scalingMode: "MANUAL" }, { ...settings, maxSurge: 5 }, 10).surge, 5);
  });
});

describe("one rollout step", () => {
  const bounds: RolloutBounds = { surge: 1, maxUnavailable: 0, batchSize: 1 };

  test("surge first: one new instance, no old one retired before a new one is healthy", () => {
    const step = planRolloutStep({ desired: 3, targetNew: 3, bounds, newCounted: 0, newHealthy: 0, old: running(3), oldRetiring: 0 });
    assert.deepEqual(step, { wantNew: 1, maxTotal: 4, retire: [] });
    const waiting = planRolloutStep({ desired: 3, targetNew: 3, bounds, newCounted: 1, newHealthy: 0, old: running(3), oldRetiring: 0 });
    assert.deepEqual(waiting.retire, [], "a new instance that is not healthy yet does not let an old one go");
    const healthy = planRolloutStep({ desired: 3, targetNew: 3, bounds, newCounted: 1, newHealthy: 1, old: running(3), oldRetiring: 0 });
    assert.equal(healthy.retire.length, 1);
  });

  test("retirement order: not serving first, then fewest players, then id; at most a batch retiring", () => {
    const old: OldInstance[] = [
      { id: "a", state: "RUNNING", playerCount: 5 },
      { id: "b", state: "RUNNING", playerCount: 1 },
      { id: "c", state: "STARTING", playerCount: 0 },
      { id: "d", state: "RUNNING", playerCount: 1 },
    ];
    const step = planRolloutStep({
      desired: 4,
      targetNew: 4,
      bounds: { surge: 0, maxUnavailable: 2, batchSize: 3 },
      newCounted: 0,
      newHealthy: 0,
      old,
      oldRetiring: 0,
    });
    assert.deepEqual(step.retire, ["c", "b"], "c is not serving (one already unavailable), so one RUNNING more stays within maxUnavailable 2");
    const busy = planRolloutStep({
      desired: 4,
      targetNew: 4,
      bounds: { surge: 0, maxUnavailable: 2, batchSize: 3 },
      newCounted: 0,
      newHealthy: 0,
      old,
      oldRetiring: 3,
    });
    assert.deepEqual(busy.retire, [], "a full batch still draining holds further retirements");
  });

  test("canary: only the canaries start, and as many old instances stay beside them", () => {
    const step = planRolloutStep({ desired: 4, targetNew: 1, bounds, newCounted: 1, newHealthy: 1, old: running(4), oldRetiring: 0 });
    assert.deepEqual(step, { wantNew: 1, maxTotal: 5, retire: ["old-1"] });
    const held = planRolloutStep({ desired: 4, targetNew: 1, bounds, newCounted: 1, newHealthy: 1, old: running(3), oldRetiring: 0 });
    assert.deepEqual(held, { wantNew: 1, maxTotal: 5, retire: [] }, "three old beside one canary: nothing more until promoted");
  });

  for (const [name, b] of [
    ["surge 1, unavailable 0, batch 1", { surge: 1, maxUnavailable: 0, batchSize: 1 }],
    ["surge 2, unavailable 1, batch 3", { surge: 2, maxUnavailable: 1, batchSize: 3 }],
    ["in place (surge 0, unavailable 1)", { surge: 0, maxUnavailable: 1, batchSize: 1 }],
  ] as const) {
    test(`a whole rollout of 6 (${name}): never below the floor nor above the ceiling, every old instance retired once`, () => {
      const desired = 6;
      let old = running(desired);
      let starting = 0;
      let healthy = 0;
      let retiring: string[] = [];
      const retiredOnce = new Set<string>();
      for (let round = 0; round < 100 && (old.length > 0 || retiring.length > 0 || starting > 0); round++) {
        // The world moves: last round's retirements finish, last round's starts become healthy.
        retiring = [];
        healthy += starting;
        const step = planRolloutStep({ desired, targetNew: desired, bounds: b, newCounted: healthy, newHealthy: healthy, old, oldRetiring: retiring.length });
        for (const id of step.retire) {
          assert.ok(!retiredOnce.has(id), `${id} retired twice`);
          retiredOnce.add(id);
        }
        old = old.filter((i) => !step.retire.includes(i.id));
        retiring = [...step.retire];
        starting = Math.max(0, step.wantNew - healthy);
        assert.ok(healthy + old.length >= desired - b.maxUnavailable, `round ${round}: ${healthy + old.length} available`);
        assert.ok(healthy + starting + old.length <= desired + b.surge, `round ${round}: ${healthy + starting + old.length} counted`);
      }
      assert.equal(old.length, 0);
      assert.equal(healthy, desired);
      assert.equal(retiredOnce.size, desired);
    });
  }
});
