// The scope lifecycle alone, on the real group and instance services and the fake clock: acquiring
// a scope adopts its live instances in their recorded state and starts its group actor, whose ticks
// run on the injected clock; losing it stops every actor and fences every later write; events reach
// the actors only while the scope is owned.
import assert from "node:assert/strict";
import { after, before, beforeEach, describe, test } from "node:test";
import type { InspectionEvent } from "xstate";
import type { GroupEffectsPort, InstanceEffectsPort } from "../../src/scheduler/actor-effects.js";
import { LiveInstances } from "../../src/scheduler/live-instances.js";
import { ScopeLifecycle } from "../../src/scheduler/scope-lifecycle.js";
import { groupScope, ScopeLostError } from "../../src/scheduler/scopes.js";
import { SupervisedInstances } from "../../src/scheduler/supervised-instances.js";
import { flush, instanceRecord, openSchedulerFixture, recordingLogger, type SchedulerFixture } from "./support.js";
import { RevisionConflictError } from "../../src/store/ports.js";

const intervalMs = 10_000;

describe("scope lifecycle", () => {
  let fx: SchedulerFixture;
  let live: LiveInstances;
  let supervised: SupervisedInstances;
  let effects: string[];
  let evaluations: string[];
  let snapshots: string[];
  let currentChecks: string[];
  let completedStops: string[];
  let adoptedDraining: string[];
  let lifecycle: ScopeLifecycle;
  let group = "";
  let n = 0;

  before(async () => {
    fx = await openSchedulerFixture("cloud-scope-lifecycle-");
  });
  after(() => fx.close());

  beforeEach(async () => {
    group = `lobby${++n}`;
    live = new LiveInstances();
    supervised = new SupervisedInstances();
    effects = [];
    evaluations = [];
    snapshots = [];
    currentChecks = [];
    completedStops = [];
    adoptedDraining = [];
    const record = (name: string) => (ref: { instanceId: string }) => void effects.push(`${name} ${ref.instanceId}`);
    const instances: InstanceEffectsPort = {
      dispatch: record("dispatch"),
      stop: record("stop"),
      forceStop: record("forceStop"),
      announceDrain: record("announceDrain"),
      crashed: record("crashed"),
      lost: record("lost"),
      timedOut: record("timedOut"),
      stopUnconfirmed: record("stopUnconfirmed"),
    };
    const groups: GroupEffectsPort = {
      evaluate: async (name) => (evaluations.push(`${name}@${fx.clock.nowMs()}`), { again: false }),
      crashLoop: () => undefined,
      resumed: () => undefined,
      stopInstances: () => undefined,
      evaluationFailed: () => undefined,
    };
    lifecycle = new ScopeLifecycle({
      groups: fx.groups,
      instances: fx.instances,
      scopes: { scopeOf: groupScope, ensureCurrent: async (scope, token) => void currentChecks.push(`${scope}#${token}`) },
      live,
      supervised,
      clock: fx.clock,
      logger: recordingLogger(),
      tuning: { instanceTimeouts: {}, evaluationIntervalMs: intervalMs, evaluationTimeoutMs: 5_000 },
      effects: { instances, groups },
      completeStop: (doc, kind) => void completedStops.push(`${doc.id} ${doc.state} ${kind}`),
      adoptedDraining: (doc) => void adoptedDraining.push(`${doc.id} ${doc.group}`),
      inspect: (event: InspectionEvent) => {
        const id = (event.actorRef as { id?: string }).id ?? "";
        if (event.type === "@xstate.snapshot" && id.startsWith("instance:")) snapshots.push(`${id} ${String((event.snapshot as { value?: unknown }).value)}`);
      },
    });
  });

  async function seed(): Promise<number> {
    await fx.groups.create({ name: group, platform: "simulated", scalingMode: "STATIC", minInstances: 3 });
    await fx.instances.save(instanceRecord({ id: `${group}-1`, group, node: "node-a", state: "RUNNING" }));
    await fx.instances.save(instanceRecord({ id: `${group}-2`, group, node: "node-b", state: "SCHEDULED" }));
    await fx.instances.save(instanceRecord({ id: `${group}-3`, group, node: "node-a", state: "CRASHED", stoppedAt: "2026-01-15T11:00:00.000Z" }));
    return fx.clock.nowMs();
  }

  test("acquired: live instances adopted in their recorded state, a finished slot kept in view, the group actor ticks on the clock", async () => {
    const startMs = await seed();
    await lifecycle.acquired(groupScope(group), 5);
    await flush();
    assert.equal(lifecycle.fencingTokenOf(group), 5);
    assert.deepEqual(
      [supervised.stateOf(`${group}-1`), supervised.stateOf(`${group}-2`), supervised.stateOf(`${group}-3`)],
      ["RUNNING", "SCHEDULED", undefined],
    );
    assert.equal(live.get(`${group}-3`)?.state, "CRASHED", "the STATIC slot's record names its node");
    assert.deepEqual(effects, [`dispatch ${group}-2`], "a RUNNING instance is left alone; a SCHEDULED one is sent again");
    assert.ok(snapshots.includes(`instance:${group}-1 RUNNING`), "the record writer sees the adopted actors");
    assert.deepEqual(evaluations, [`${group}@${startMs}`]);
    await fx.clock.advanceAsync(intervalMs - 1);
    assert.equal(evaluations.length, 1);
    await fx.clock.advanceAsync(1);
    assert.deepEqual(evaluations, [`${group}@${startMs}`, `${group}@${startMs + intervalMs}`]);
    // Adopting claimed each live record after a fencing check: a write at the revision read.
    assert.deepEqual(currentChecks, [`group:${group}#5`, `group:${group}#5`]);
    await lifecycle.ensureCurrent(group);
    assert.deepEqual(currentChecks, [`group:${group}#5`, `group:${group}#5`, `group:${group}#5`]);
    lifecycle.stop();
  });

  test("acquired: the adopted live records are claimed (rewritten at the revision read), so a write prepared by the previous owner fails", async () => {
    await seed();
    const before = new Map((await fx.instances.findRevisioned({ group })).map((r) => [r.doc.id, r.rev]));
    await lifecycle.acquired(groupScope(group), 5);
    const after = new Map((await fx.instances.findRevisioned({ group })).map((r) => [r.doc.id, r.rev]));
    assert.notEqual(after.get(`${group}-1`), before.get(`${group}-1`), "RUNNING record claimed");
    assert.notEqual(after.get(`${group}-2`), before.get(`${group}-2`), "SCHEDULED record claimed");
    assert.equal(after.get(`${group}-3`), before.get(`${group}-3`), "a finished record is not claimed");
    const stale = (await fx.instances.getDoc(`${group}-1`))!;
    await assert.rejects(fx.instances.saveIf({ ...stale, state: "STOPPING" }, before.get(`${group}-1`)!), RevisionConflictError);
    assert.equal((await fx.instances.getDoc(`${group}-1`))!.state, "RUNNING");
    lifecycle.stop();
  });

  test("a scope lost while its records are being read adopts nothing: no instance is left supervised without an actor", async () => {
    await seed();
    const acquiring = lifecycle.acquired(groupScope(group), 5);
    lifecycle.lost(groupScope(group)); // the lease moved before the reads returned
    await acquiring;
    await flush();
    assert.equal(supervised.size, 0, "nothing supervised");
    assert.deepEqual(live.ofGroup(group), [], "nothing in the live view");
    assert.deepEqual(effects, [], "nothing dispatched");
    lifecycle.stop();
  });

  test("the scope of a group that no longer exists: its live instances are adopted and stopped", async () => {
    // The group was deleted and its owner died while stopping its instances.
    await fx.instances.save(instanceRecord({ id: `${group}-x`, group, node: "node-a", state: "RUNNING" }));
    await fx.instances.save(instanceRecord({ id: `${group}-y`, group, node: "node-a", state: "STOPPING" }));
    await fx.instances.save(instanceRecord({ id: `${group}-z`, group, node: "node-a", state: "STOPPED" }));
    await lifecycle.acquired(groupScope(group), 9);
    await flush();
    assert.deepEqual(
      [supervised.stateOf(`${group}-x`), supervised.stateOf(`${group}-y`), supervised.stateOf(`${group}-z`)],
      ["RUNNING", "STOPPING", undefined],
    );
    assert.deepEqual(completedStops.sort(), [`${group}-x RUNNING STOP`, `${group}-y STOPPING STOP`]);
    assert.deepEqual(evaluations, [], "no group actor: there is no group");
    lifecycle.stop();
  });

  test("lost: every actor stops, later events go nowhere, writes are fenced, no timer is left", async () => {
    await seed();
    await lifecycle.acquired(groupScope(group), 5);
    await flush();
    lifecycle.lost(groupScope(group));
    assert.equal(lifecycle.fencingTokenOf(group), null);
    assert.equal(lifecycle.isOwned(group), false);
    assert.equal(supervised.size, 0);
    await assert.rejects(lifecycle.ensureCurrent(group), ScopeLostError);
    effects.length = 0;
    lifecycle.toInstance(`${group}-1`, { type: "STOP" });
    lifecycle.toGroup(group, { type: "CHANGED" });
    await fx.clock.advanceAsync(10 * intervalMs);
    assert.deepEqual(effects, []);
    assert.equal(evaluations.length, 1);
    assert.equal(fx.clock.pendingTimers(), 0);
  });

  test("a renewed lease with a new token keeps the actors; a loss during adoption leaves no supervisor", async () => {
    await seed();
    await lifecycle.acquired(groupScope(group), 5);
    await lifecycle.acquired(groupScope(group), 6);
    assert.equal(lifecycle.fencingTokenOf(group), 6);
    assert.equal(supervised.stateOf(`${group}-1`), "RUNNING");
    lifecycle.toInstance(`${group}-1`, { type: "STOP" });
    assert.deepEqual(effects.slice(-1), [`stop ${group}-1`], "the same actor, still running");

    const other = `${group}-late`;
    await fx.groups.create({ name: other, platform: "simulated", scalingMode: "STATIC", minInstances: 1 });
    const adopting = lifecycle.acquired(groupScope(other), 9);
    lifecycle.lost(groupScope(other));
    await adopting;
    assert.equal(lifecycle.isOwned(other), false);
    lifecycle.toGroup(other, { type: "CHANGED" });
    assert.ok(!evaluations.some((e) => e.startsWith(`${other}@`)));
    await lifecycle.acquired(groupScope(other), 10);
    await flush();
    assert.ok(
      evaluations.some((e) => e.startsWith(`${other}@`)),
      "acquired without a loss, it runs",
    );
    lifecycle.stop();
  });

  test("acquired: an adopted instance whose record holds a requested stop has it completed, after its actor runs", async () => {
    await fx.groups.create({ name: group, platform: "simulated", minInstances: 0 });
    await fx.instances.save(instanceRecord({ id: `${group}-a`, group, node: "node-a", state: "RUNNING", stopRequested: "STOP" }));
    await fx.instances.save(instanceRecord({ id: `${group}-b`, group, node: "node-a", state: "STOPPING", stopRequested: "FORCE_STOP" }));
    await fx.instances.save(instanceRecord({ id: `${group}-c`, group, node: "node-a", state: "RUNNING" }));
    await fx.instances.save(instanceRecord({ id: `${group}-d`, group, node: "node-a", state: "STOPPED", stopRequested: "STOP" }));
    await lifecycle.acquired(groupScope(group), 2);
    assert.deepEqual(completedStops.sort(), [`${group}-a RUNNING STOP`, `${group}-b STOPPING FORCE_STOP`]);
    assert.equal(supervised.stateOf(`${group}-a`), "RUNNING", "its actor was adopted first");
    lifecycle.stop();
  });

  test("acquired: an instance adopted DRAINING is handed on (its players still to move), unless a stop of it is to be completed", async () => {
    await fx.groups.create({ name: group, platform: "simulated", minInstances: 0 });
    await fx.instances.save(instanceRecord({ id: `${group}-a`, group, node: "node-a", state: "DRAINING" }));
    await fx.instances.save(instanceRecord({ id: `${group}-b`, group, node: "node-a", state: "DRAINING", stopRequested: "FORCE_STOP" }));
    await fx.instances.save(instanceRecord({ id: `${group}-c`, group, node: "node-a", state: "RUNNING" }));
    await lifecycle.acquired(groupScope(group), 3);
    assert.deepEqual(adoptedDraining, [`${group}-a ${group}`]);
    assert.equal(supervised.stateOf(`${group}-a`), "DRAINING", "its actor was adopted first");
    assert.deepEqual(completedStops, [`${group}-b DRAINING FORCE_STOP`]);
    lifecycle.stop();
  });

  test("acquired: instances of the group that finished or vanished while another controller scheduled it leave the view", async () => {
    await fx.groups.create({ name: group, platform: "simulated", minInstances: 1 });
    await fx.instances.save(instanceRecord({ id: `${group}-a`, group, node: "node-a", state: "RUNNING" }));
    // Once in the live view here (scheduled here before); stopped and deleted by another controller since.
    live.put(instanceRecord({ id: `${group}-stopped`, group, node: "node-a", state: "RUNNING" }));
    live.put(instanceRecord({ id: `${group}-deleted`, group, node: "node-a", state: "RUNNING" }));
    await fx.instances.save(instanceRecord({ id: `${group}-stopped`, group, node: "node-a", state: "STOPPED" }));
    await lifecycle.acquired(groupScope(group), 3);
    assert.deepEqual(
      live.ofGroup(group).map((i) => `${i.id} ${i.state}`),
      [`${group}-a RUNNING`],
    );
    lifecycle.stop();
  });

  test("groups and instances added while owned get actors; a finished instance lets its actor go", async () => {
    await fx.groups.create({ name: group, platform: "simulated", scalingMode: "STATIC", minInstances: 1 });
    await lifecycle.acquired(groupScope(group), 1);
    const record = instanceRecord({ id: `${group}-new`, group, node: "node-a", state: "SCHEDULED" });
    lifecycle.instanceAdded(record);
    assert.deepEqual(effects, [`dispatch ${group}-new`]);
    assert.equal(supervised.stateOf(record.id), "SCHEDULED");
    assert.equal(live.get(record.id)?.node, "node-a");
    lifecycle.instanceFinished(group, record.id);
    assert.equal(supervised.has(record.id), false);
    lifecycle.toInstance(record.id, { type: "STOP" });
    assert.deepEqual(effects, [`dispatch ${group}-new`], "its actor is gone");

    evaluations.length = 0;
    lifecycle.groupRemoved(group);
    lifecycle.toGroup(group, { type: "CHANGED" });
    await flush();
    assert.deepEqual(evaluations, [], "the group actor is gone");
    await lifecycle.groupCreated(group);
    await flush();
    assert.equal(evaluations.length, 1, "a group created again evaluates at once");
    lifecycle.changedEverywhere();
    await flush();
    assert.equal(evaluations.length, 2);
    lifecycle.stop();
    assert.equal(fx.clock.pendingTimers(), 0);
  });
});
