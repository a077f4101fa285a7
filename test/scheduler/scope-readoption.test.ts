// A scope lost and acquired again with the same fencing token while its first adoption is still
// reading the records (the lease keeper gives a lease up at its local deadline on a loaded machine,
// and the store still holds it, so the next tick gets the same token back). The scope lifecycle,
// the real record writer and the instance service on an embedded store with the fake clock: the
// scope ends with one supervisor and one actor per instance, and a record written RUNNING never
// goes back to SCHEDULED when the dispatch timeout passes. Before, both adoptions went through and
// the first supervisor was left running with its own actors: its actor of the instance adopted
// SCHEDULED dispatched it again 30 s later and wrote SCHEDULED over the RUNNING record.
import assert from "node:assert/strict";
import { after, afterEach, before, beforeEach, describe, test } from "node:test";
import type { InspectionEvent } from "xstate";
import type { GroupEffectsPort, InstanceEffectsPort } from "../../src/scheduler/actor-effects.js";
import { InstanceRecordWriter } from "../../src/scheduler/instance-record-writer.js";
import { LiveInstances } from "../../src/scheduler/live-instances.js";
import { ScopeLifecycle } from "../../src/scheduler/scope-lifecycle.js";
import { groupScope } from "../../src/scheduler/scopes.js";
import { SupervisedInstances } from "../../src/scheduler/supervised-instances.js";
import { flush, instanceRecord, openSchedulerFixture, recordingLogger, type SchedulerFixture } from "./support.js";

const dispatchTimeoutMs = 30_000;
const intervalMs = 10_000;

describe("a scope acquired again with the same token during its adoption", () => {
  let fx: SchedulerFixture;
  let live: LiveInstances;
  let supervised: SupervisedInstances;
  let lifecycle: ScopeLifecycle;
  let effects: string[];
  let evaluations: number;
  let pending: Promise<unknown>[];
  /** Instance actors started (each instance actor's first snapshot). */
  let actorsStarted: Map<string, number>;
  let group = "";
  let n = 0;

  before(async () => {
    fx = await openSchedulerFixture("cloud-scope-readoption-");
  });
  after(() => fx.close());
  // A failed test leaves no actor running on the shared clock.
  afterEach(() => lifecycle.stop());

  beforeEach(() => {
    group = `roll${++n}`;
    live = new LiveInstances();
    supervised = new SupervisedInstances();
    effects = [];
    evaluations = 0;
    pending = [];
    actorsStarted = new Map();
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
      evaluate: async () => (evaluations++, { again: false }),
      crashLoop: () => undefined,
      resumed: () => undefined,
      stopInstances: () => undefined,
      evaluationFailed: () => undefined,
    };
    const writer = new InstanceRecordWriter({
      instances: fx.instances,
      events: fx.events,
      clock: fx.clock,
      logger: recordingLogger(),
      live,
      supervised,
      ensureCurrent: (g) => lifecycle.ensureCurrent(g),
      toGroup: () => undefined,
      instanceFinished: (g, id) => lifecycle.instanceFinished(g, id),
      startSlotFreed: () => undefined,
      track: (work) => void pending.push(work),
    });
    const seen = new Set<object>();
    lifecycle = new ScopeLifecycle({
      groups: fx.groups,
      instances: fx.instances,
      scopes: { scopeOf: groupScope, ensureCurrent: async () => undefined },
      live,
      supervised,
      clock: fx.clock,
      logger: recordingLogger(),
      tuning: { instanceTimeouts: { dispatchTimeoutMs }, evaluationIntervalMs: intervalMs, evaluationTimeoutMs: 5_000 },
      effects: { instances, groups },
      completeStop: () => undefined,
      adoptedDraining: () => undefined,
      inspect: (event: InspectionEvent) => {
        const id = (event.actorRef as { id?: string }).id ?? "";
        if (event.type === "@xstate.snapshot" && id.startsWith("instance:") && !seen.has(event.actorRef)) {
          seen.add(event.actorRef);
          actorsStarted.set(id, (actorsStarted.get(id) ?? 0) + 1);
        }
        writer.observe(event);
      },
    });
  });

  async function settled(): Promise<void> {
    await flush();
    while (pending.length > 0) await pending.shift();
  }

  async function acquiredTwice(): Promise<void> {
    const first = lifecycle.acquired(groupScope(group), 7);
    lifecycle.lost(groupScope(group)); // the keeper's local deadline passed while the records were read
    const second = lifecycle.acquired(groupScope(group), 7); // the next tick: the store still held it, same token
    await Promise.all([first, second]);
    await settled();
  }

  test("one actor per instance: a record written RUNNING stays RUNNING past the dispatch timeout", async () => {
    await fx.groups.create({ name: group, platform: "simulated", minInstances: 2 });
    await fx.instances.save(instanceRecord({ id: `${group}-a`, group, node: "node-a", state: "SCHEDULED" }));
    await fx.instances.save(instanceRecord({ id: `${group}-b`, group, node: "node-a", state: "RUNNING", startedAt: "2026-01-15T11:00:00.000Z" }));
    await acquiredTwice();
    assert.deepEqual(Object.fromEntries(actorsStarted), { [`instance:${group}-a`]: 1, [`instance:${group}-b`]: 1 }, "one actor per adopted instance");
    assert.deepEqual(effects, [`dispatch ${group}-a`], "the instance adopted SCHEDULED is dispatched once");
    assert.equal(evaluations, 1, "one group actor evaluates");

    // The daemon reports it up to RUNNING; the record follows.
    for (const type of ["DISPATCHED", "SPAWNED", "READY"] as const) lifecycle.toInstance(`${group}-a`, { type });
    await settled();
    const running = await fx.instances.getDoc(`${group}-a`);
    assert.equal(running?.state, "RUNNING");
    assert.ok(running?.startedAt, "STARTING set startedAt");

    for (let i = 0; i < 4; i++) {
      await fx.clock.advanceAsync(dispatchTimeoutMs);
      await settled();
    }
    assert.equal((await fx.instances.getDoc(`${group}-a`))?.state, "RUNNING", "never back to SCHEDULED");
    assert.equal((await fx.instances.getDoc(`${group}-b`))?.state, "RUNNING");
    assert.deepEqual(effects, [`dispatch ${group}-a`], "no second dispatch, no force-stop of a running instance");
    assert.equal(supervised.stateOf(`${group}-a`), "RUNNING");
    assert.equal(live.get(`${group}-a`)?.state, "RUNNING");
    assert.equal(evaluations, 1 + Math.floor((4 * dispatchTimeoutMs) / intervalMs), "one group actor, one evaluation per interval");

    lifecycle.lost(groupScope(group));
    await fx.clock.advanceAsync(10 * intervalMs);
    assert.equal(fx.clock.pendingTimers(), 0, "no actor is left running once the scope is lost");
    lifecycle.stop();
  });

  test("an instance recorded by an evaluation that outlived the loss, and adopted since, keeps its adopted state", async () => {
    await fx.groups.create({ name: group, platform: "simulated", minInstances: 1 });
    const doc = instanceRecord({ id: `${group}-a`, group, node: "node-a", state: "SCHEDULED" });
    await fx.instances.save(doc);
    await lifecycle.acquired(groupScope(group), 7);
    for (const type of ["DISPATCHED", "SPAWNED", "READY"] as const) lifecycle.toInstance(doc.id, { type });
    await settled();
    lifecycle.instanceAdded(doc); // the evaluation's late hand-over of the record it wrote SCHEDULED
    await settled();
    assert.equal(supervised.stateOf(doc.id), "RUNNING");
    assert.equal(live.get(doc.id)?.state, "RUNNING");
    assert.equal(live.startingOn("node-a"), 0, "no start slot held by a running instance");
    assert.equal(actorsStarted.get(`instance:${doc.id}`), 1);
    assert.deepEqual(effects, [`dispatch ${doc.id}`]);
    lifecycle.stop();
  });

  test("the later adoption wins whichever read returns last, and a loss after both leaves nothing running", async () => {
    await fx.groups.create({ name: group, platform: "simulated", minInstances: 1 });
    await fx.instances.save(instanceRecord({ id: `${group}-a`, group, node: "node-a", state: "RUNNING", startedAt: "2026-01-15T11:00:00.000Z" }));
    await acquiredTwice();
    assert.equal(lifecycle.fencingTokenOf(group), 7);
    assert.equal(actorsStarted.get(`instance:${group}-a`), 1);
    lifecycle.toInstance(`${group}-a`, { type: "STOP" });
    await settled();
    assert.deepEqual(effects, [`stop ${group}-a`], "one actor got the stop");
    lifecycle.lost(groupScope(group));
    await fx.clock.advanceAsync(10 * intervalMs);
    assert.equal(fx.clock.pendingTimers(), 0);
    assert.equal(supervised.size, 0);
    lifecycle.stop();
  });
});
