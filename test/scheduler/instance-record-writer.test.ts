// The instance record writer alone, following a real instance actor (xstate inspection) over the
// real instance service on an embedded store with the fake clock: each state the actor enters is
// written in order and published, the timestamps come from the clock, a finished instance lets its
// actor go, and a lost scope writes and announces nothing.
import assert from "node:assert/strict";
import { after, before, beforeEach, describe, test } from "node:test";
import { createActor } from "xstate";
import type { InstanceEvent } from "../../actors/instance/transitions.js";
import { isoFromMs } from "../../src/domain/shared/time.js";
import { actorClock } from "../../src/scheduler/actor-clock.js";
import { provideInstanceEffects, type InstanceEffectsPort } from "../../src/scheduler/actor-effects.js";
import type { InstanceStateChange } from "../../src/scheduler/instance-lifecycle.js";
import { InstanceRecordWriter, movesBackwards, type InstanceRecordWriterDeps } from "../../src/scheduler/instance-record-writer.js";
import { LiveInstances } from "../../src/scheduler/live-instances.js";
import { ScopeLostError } from "../../src/scheduler/scopes.js";
import { SupervisedInstances } from "../../src/scheduler/supervised-instances.js";
import { instanceRecord, openSchedulerFixture, recordingLogger, type RecordingLogger, type SchedulerFixture } from "./support.js";

const noEffects: InstanceEffectsPort = {
  dispatch: () => undefined,
  stop: () => undefined,
  forceStop: () => undefined,
  announceDrain: () => undefined,
  crashed: () => undefined,
  lost: () => undefined,
  timedOut: () => undefined,
  stopUnconfirmed: () => undefined,
};

describe("instance record writer", () => {
  let fx: SchedulerFixture;
  let live: LiveInstances;
  let supervised: SupervisedInstances;
  let logger: RecordingLogger;
  let pending: Promise<unknown>[];
  let told: string[];
  let n = 0;
  let id = "";

  before(async () => {
    fx = await openSchedulerFixture("cloud-record-writer-");
  });
  after(() => fx.close());

  beforeEach(async () => {
    id = `lobby-${++n}`;
    live = new LiveInstances();
    supervised = new SupervisedInstances();
    logger = recordingLogger();
    pending = [];
    told = [];
    fx.events.published.length = 0;
    const record = instanceRecord({ id, group: "lobby", node: "node-a", state: "SCHEDULED", playerCount: 3 });
    await fx.instances.save(record);
    live.put(record);
    supervised.follow(id, "SCHEDULED");
  });

  function writer(overrides: Partial<InstanceRecordWriterDeps> = {}): InstanceRecordWriter {
    return new InstanceRecordWriter({
      instances: fx.instances,
      events: fx.events,
      clock: fx.clock,
      logger,
      live,
      supervised,
      ensureCurrent: async () => undefined,
      toGroup: (group, event) => void told.push(`${group} ${event.type}`),
      instanceFinished: (group, instanceId) => void told.push(`finished ${group} ${instanceId}`),
      startSlotFreed: () => void told.push("slot freed"),
      track: (work) => void pending.push(work),
      ...overrides,
    });
  }
  /** An instance actor whose snapshots the writer follows, as a supervisor's child would be. */
  function followedActor(w: InstanceRecordWriter) {
    const actor = createActor(provideInstanceEffects(noEffects), {
      id: `instance:${id}`,
      clock: actorClock(fx.clock),
      input: { instanceId: id, group: "lobby", node: "node-a" },
      inspect: (event) => w.observe(event),
    });
    actor.start();
    return actor;
  }
  async function settled(): Promise<void> {
    while (pending.length > 0) await pending.shift();
  }
  const stateChanges = () => fx.events.ofType("INSTANCE_STATE_CHANGED").map((e) => `${String(e.oldState)}→${String(e.newState)}`);

  test("every state the actor enters is written in order and published; the record's times come from the clock", async () => {
    const w = writer();
    const changes: InstanceStateChange[] = [];
    w.onStateChange((change) => changes.push(change));
    const actor = followedActor(w);
    const send = (event: InstanceEvent) => actor.send(event);
    send({ type: "DISPATCHED" });
    fx.clock.set(fx.clock.nowMs() + 1_000);
    send({ type: "SPAWNED" });
    const startedMs = fx.clock.nowMs();
    // A record takes the clock's time when it is written, so the clock moves only between writes.
    await settled();
    send({ type: "READY" });
    send({ type: "STOP" });
    await settled();
    fx.clock.set(fx.clock.nowMs() + 60_000);
    send({ type: "EXITED", exitCode: 0 });
    await settled();
    assert.deepEqual(stateChanges(), ["SCHEDULED→PREPARING", "PREPARING→STARTING", "STARTING→RUNNING", "RUNNING→STOPPING", "STOPPING→STOPPED"]);
    assert.deepEqual(
      changes.map((c) => `${c.instanceId} ${c.from}→${c.to}`),
      stateChanges().map((c) => `${id} ${c}`),
    );
    const record = (await fx.instances.getDoc(id))!;
    assert.equal(record.state, "STOPPED");
    assert.equal(record.startedAt, isoFromMs(startedMs));
    assert.equal(record.stoppedAt, isoFromMs(fx.clock.nowMs()));
    assert.equal(record.playerCount, 0, "a finished instance has no players");
    assert.deepEqual(told, ["slot freed", "lobby CHANGED", "lobby CHANGED", `finished lobby ${id}`, "lobby CHANGED"]);
    assert.equal(live.get(id)?.state, "STOPPED");
    assert.equal(supervised.stateOf(id), "STOPPED", "forgetting is the scope lifecycle's, told through instanceFinished");
    actor.stop();
  });

  test("an actor that is not supervised here is not followed", async () => {
    supervised.forget(id);
    const actor = followedActor(writer());
    actor.send({ type: "DISPATCHED" });
    await settled();
    assert.deepEqual(stateChanges(), []);
    assert.equal((await fx.instances.getDoc(id))!.state, "SCHEDULED");
    actor.stop();
  });

  test("a lost scope writes and announces nothing; another failure is logged and still announced", async () => {
    const lost = followedActor(writer({ ensureCurrent: async () => Promise.reject(new ScopeLostError("group:lobby")) }));
    lost.send({ type: "DISPATCHED" });
    await settled();
    assert.equal((await fx.instances.getDoc(id))!.state, "SCHEDULED");
    assert.deepEqual([stateChanges(), told, logger.errors], [[], [], []]);
    lost.stop();

    supervised.follow(id, "SCHEDULED");
    const failing = followedActor(writer({ ensureCurrent: async () => Promise.reject(new Error("store down")) }));
    failing.send({ type: "DISPATCHED" });
    await settled();
    assert.deepEqual(stateChanges(), ["SCHEDULED→PREPARING"]);
    assert.match(logger.errors[0] ?? "", new RegExp(`Recording state PREPARING of instance ${id} failed`));
    failing.stop();
  });

  test("a player count lands after the state writes before it, and never on a finished record", async () => {
    const w = writer();
    const actor = followedActor(w);
    actor.send({ type: "DISPATCHED" });
    await w.savePlayerCount(id, 12);
    await settled();
    const record = (await fx.instances.getDoc(id))!;
    assert.deepEqual([record.state, record.playerCount], ["PREPARING", 12]);
    actor.send({ type: "STOP" });
    actor.send({ type: "EXITED", exitCode: 0 });
    await settled();
    await w.savePlayerCount(id, 5);
    assert.equal((await fx.instances.getDoc(id))!.playerCount, 0);
    actor.stop();
  });

  test("the owner's player count is fenced by the scope: after it moved, nothing is written", async () => {
    const w = writer();
    const actor = followedActor(w);
    actor.send({ type: "DISPATCHED" });
    await settled();
    actor.stop();
    const before = (await fx.instances.getDoc(id))!;
    assert.equal(before.state, "PREPARING");
    const moved = writer({ ensureCurrent: async () => Promise.reject(new ScopeLostError("group:lobby")) });
    await assert.rejects(moved.savePlayerCount(id, 9), ScopeLostError);
    assert.deepEqual(await fx.instances.getDoc(id), before, "the record untouched");
  });

  test("an unfenced player count (a controller that runs no scheduler) is written without the scope check", async () => {
    const before = (await fx.instances.getDoc(id))!;
    const unowned = writer({ ensureCurrent: async () => Promise.reject(new ScopeLostError("group:lobby")) });
    await assert.rejects(unowned.savePlayerCount(id, before.playerCount + 3), ScopeLostError, "fenced by default");
    await unowned.savePlayerCount(id, before.playerCount + 3, false);
    assert.equal((await fx.instances.getDoc(id))!.playerCount, before.playerCount + 3);
  });

  test("an owner that stalls between its fencing check and its write never puts back a state over the new owner's", async () => {
    // The old owner's check passes, then it stalls; meanwhile the scope moves and the new owner
    // claims the record and writes STOPPED. Then the old owner resumes: its write is refused.
    let stalled!: () => void;
    const resume = new Promise<void>((resolve) => (stalled = resolve));
    let checks = 0;
    const old = writer({
      ensureCurrent: async () => {
        checks += 1;
        if (checks === 1) return resume; // passes, after the stall
        throw new ScopeLostError("group:lobby"); // any later check: the scope has moved
      },
    });
    const actor = followedActor(old);
    actor.send({ type: "DISPATCHED" }); // the old owner is about to write PREPARING over SCHEDULED
    await new Promise((resolve) => setImmediate(resolve));
    const newOwner = writer();
    await newOwner.requestStop(id, "lobby", "STOP"); // a write of the new owner
    await fx.instances.update(id, async (doc) => ({ next: { ...doc!, state: "STOPPED" as const }, result: undefined }));
    stalled();
    await settled();
    actor.stop();
    const record = (await fx.instances.getDoc(id))!;
    assert.equal(record.state, "STOPPED", "the record never goes back");
    assert.equal(record.stopRequested, "STOP");
    assert.equal(checks, 2, "the refused write read again and checked again");
    assert.deepEqual(logger.errors, []);
  });

  test("a requested stop is written in order with the states, fenced, never weakened, and kept by later state writes", async () => {
    const w = writer();
    const actor = followedActor(w);
    actor.send({ type: "DISPATCHED" });
    actor.send({ type: "SPAWNED" });
    assert.equal(await w.requestStop(id, "lobby", "FORCE_STOP"), true);
    // Written after the state writes observed before it.
    assert.deepEqual([(await fx.instances.getDoc(id))!.state, (await fx.instances.getDoc(id))!.stopRequested], ["STARTING", "FORCE_STOP"]);
    assert.equal(await w.requestStop(id, "lobby", "STOP"), true);
    assert.equal((await fx.instances.getDoc(id))!.stopRequested, "FORCE_STOP", "a graceful stop does not weaken a force-stop");
    actor.send({ type: "FORCE_STOP" });
    await settled();
    assert.deepEqual([(await fx.instances.getDoc(id))!.state, (await fx.instances.getDoc(id))!.stopRequested], ["STOPPING", "FORCE_STOP"]);
    actor.send({ type: "EXITED", exitCode: 0 });
    await settled();
    assert.equal(await w.requestStop(id, "lobby", "STOP"), false, "a finished instance has nothing to stop");
    actor.stop();

    const fenced = writer({ ensureCurrent: async () => Promise.reject(new ScopeLostError("group:lobby")) });
    const other = `${id}-b`;
    await fx.instances.save(instanceRecord({ id: other, group: "lobby", node: "node-a", state: "RUNNING" }));
    await assert.rejects(fenced.requestStop(other, "lobby", "STOP"), ScopeLostError);
    assert.equal((await fx.instances.getDoc(other))!.stopRequested, undefined, "nothing written without the scope");
  });

  test("a write that would move the record backwards is refused with a WARN, announced to nobody, and the views follow the record", async () => {
    // Two actors followed one instance: this one was adopted SCHEDULED while the record went on to RUNNING.
    const startedAt = "2026-01-15T11:00:00.000Z";
    await fx.instances.save(instanceRecord({ id, group: "lobby", node: "node-a", state: "RUNNING", startedAt }));
    live.setState(id, "RUNNING");
    supervised.follow(id, "RUNNING");
    const w = writer();
    const changes: InstanceStateChange[] = [];
    w.onStateChange((change) => changes.push(change));
    const stale = followedActor(w); // enters SCHEDULED
    await settled();
    const record = (await fx.instances.getDoc(id))!;
    assert.deepEqual([record.state, record.startedAt], ["RUNNING", startedAt], "the record never goes back");
    assert.deepEqual([stateChanges(), changes, told], [[], [], []], "nothing announced, the group not told");
    assert.match(logger.warnings.join("\n"), new RegExp(`Refused to record SCHEDULED \\(from RUNNING\\) for instance ${id} over its recorded RUNNING`));
    assert.equal(live.get(id)?.state, "RUNNING", "the live view follows the record again");
    assert.equal(supervised.stateOf(id), "RUNNING");
    assert.deepEqual(logger.errors, []);
    stale.stop();

    // Any state over a finished record is refused too.
    await fx.instances.save(instanceRecord({ id, group: "lobby", node: "node-a", state: "CRASHED", startedAt, stoppedAt: startedAt }));
    supervised.follow(id, "SCHEDULED");
    const late = followedActor(w);
    late.send({ type: "DISPATCHED" });
    await settled();
    assert.equal((await fx.instances.getDoc(id))!.state, "CRASHED");
    assert.deepEqual(stateChanges(), []);
    assert.match(logger.warnings.join("\n"), /Refused to record PREPARING \(from SCHEDULED\) .* over its recorded CRASHED/);
    late.stop();
  });

  test("movesBackwards: only earlier states, and anything over a finished record", () => {
    assert.equal(movesBackwards("RUNNING", "SCHEDULED"), true);
    assert.equal(movesBackwards("STARTING", "PREPARING"), true);
    assert.equal(movesBackwards("STOPPING", "DRAINING"), true);
    assert.equal(movesBackwards("STOPPED", "RUNNING"), true);
    assert.equal(movesBackwards("STOPPED", "CRASHED"), true);
    assert.equal(movesBackwards("SCHEDULED", "PREPARING"), false);
    assert.equal(movesBackwards("PREPARING", "STOPPING"), false);
    assert.equal(movesBackwards("RUNNING", "STOPPING"), false, "a stop may skip DRAINING");
    assert.equal(movesBackwards("RUNNING", "CRASHED"), false);
    assert.equal(movesBackwards("RUNNING", "RUNNING"), false);
  });

  test("state listeners are bounded and can leave", () => {
    const w = writer();
    const leave = [];
    for (let i = 0; i < 16; i++) leave.push(w.onStateChange(() => undefined));
    assert.throws(() => w.onStateChange(() => undefined), /at most 16/);
    leave[0]();
    w.onStateChange(() => undefined);
  });
});
