// Instance operations alone, on the real group and instance services: an operator's stop reaches
// the actor when one runs here, else the daemon under the holder's fencing token; a graceful stop of
// a STATIC slot holds it (and lets go when the daemon refuses); readiness catches the actor up; a
// draining instance whose last player left is EMPTY. The owner's stop is on the record
// (stopRequested) before the actor hears of it; a scope that moved meanwhile sends it to the daemon.
import assert from "node:assert/strict";
import { after, before, beforeEach, describe, test } from "node:test";
import type { InstanceEvent } from "../../actors/instance/transitions.js";
import { InstanceOperations } from "../../src/scheduler/instance-operations.js";
import { LiveInstances } from "../../src/scheduler/live-instances.js";
import { groupScope, ScopeLostError } from "../../src/scheduler/scopes.js";
import { SupervisedInstances } from "../../src/scheduler/supervised-instances.js";
import type { CommandResult, InstanceCommand } from "../../src/wire/daemon-proto.js";
import { instanceRecord, openSchedulerFixture, recordingLogger, type SchedulerFixture } from "./support.js";

describe("instance operations", () => {
  let fx: SchedulerFixture;
  let live: LiveInstances;
  let supervised: SupervisedInstances;
  let commands: InstanceCommand[];
  let answers: CommandResult[];
  let actorEvents: string[];
  let told: string[];
  let groupEvents: string[];
  let owned: boolean;
  let scopeMoved: boolean;
  let finishMeanwhile: boolean;
  let countsWritten: string[];
  let ops: InstanceOperations;
  let group = "";
  let n = 0;

  before(async () => {
    fx = await openSchedulerFixture("cloud-instance-ops-");
  });
  after(() => fx.close());

  beforeEach(async () => {
    group = `hub${++n}`;
    await fx.groups.create({ name: group, platform: "simulated", scalingMode: "STATIC", minInstances: 2 });
    live = new LiveInstances();
    supervised = new SupervisedInstances();
    commands = [];
    answers = [];
    actorEvents = [];
    told = [];
    groupEvents = [];
    owned = true;
    scopeMoved = false;
    finishMeanwhile = false;
    countsWritten = [];
    ops = new InstanceOperations({
      instances: fx.instances,
      groups: fx.groups,
      scopes: { scopeOf: groupScope, holderFencingToken: async () => 42 },
      live,
      supervised,
      logger: recordingLogger(),
      fencingTokenOf: () => (owned ? 3 : null),
      send: async (_nodeId, command) => (commands.push(command), answers.shift() ?? { command_id: "c", ok: true, error_code: "", message: "" }),
      savePlayerCount: async (id, count) => {
        if (scopeMoved) throw new ScopeLostError(groupScope(group));
        const doc = (await fx.instances.getDoc(id))!;
        await fx.instances.save({ ...doc, playerCount: count });
      },
      requestStop: async (id, g, kind) => {
        if (scopeMoved) throw new ScopeLostError(groupScope(g));
        if (finishMeanwhile) await fx.instances.save(instanceRecord({ id, group: g, node: "node-a", state: "CRASHED" }));
        const doc = (await fx.instances.getDoc(id))!;
        if (doc.state === "STOPPED" || doc.state === "CRASHED") return false;
        await fx.instances.save({ ...doc, stopRequested: doc.stopRequested === "FORCE_STOP" ? "FORCE_STOP" : kind });
        told.push(`${id} ${kind} recorded before ${actorEvents.length} actor events`);
        return true;
      },
      writesRecordOf: (id) => supervised.has(id),
      playerCountWritten: (id, g) => void countsWritten.push(`${id} ${g}`),
      toInstance: (id: string, event: InstanceEvent) => void actorEvents.push(`${id} ${event.type}`),
      toGroup: (g, event) => void groupEvents.push(`${g} ${event.type}`),
    });
  });

  async function running(id: string, follow: boolean, state: "RUNNING" | "DRAINING" | "STOPPED" = "RUNNING"): Promise<void> {
    const record = instanceRecord({ id, group, node: "node-a", state });
    await fx.instances.save(record);
    live.put(record);
    if (follow) supervised.follow(id, state);
  }
  const bodyOf = (command: InstanceCommand | undefined) => command?.body as { fencing_token: number; instance_id: string } | undefined;

  test("a stop of an instance supervised here goes to its actor; a STATIC graceful stop holds the slot first", async () => {
    await running(`${group}-1`, true);
    await ops.stopInstance(`${group}-1`, false);
    await ops.stopInstance(`${group}-1`, true);
    assert.deepEqual(actorEvents, [`${group}-1 STOP`, `${group}-1 FORCE_STOP`]);
    assert.deepEqual(commands, []);
    assert.deepEqual((await fx.groups.get(group)).stoppedInstances, [`${group}-1`]);
    assert.deepEqual(
      told,
      [`${group}-1 STOP recorded before 0 actor events`, `${group}-1 FORCE_STOP recorded before 1 actor events`],
      "each stop is on the record before its actor hears of it",
    );
    assert.equal((await fx.instances.getDoc(`${group}-1`))?.stopRequested, "FORCE_STOP");
  });

  test("the owner's scope moved while the stop was being recorded: the stop goes to the daemon under the holder's token", async () => {
    await running(`${group}-1`, true);
    scopeMoved = true;
    owned = false;
    await ops.stopInstance(`${group}-1`, true);
    assert.deepEqual(actorEvents, []);
    assert.deepEqual([commands[0]?.type, bodyOf(commands[0])?.fencing_token], ["force_stop_instance", 42]);
  });

  test("an instance that finished while its stop was being recorded: INVALID_STATE and the STATIC hold is undone", async () => {
    await running(`${group}-1`, true);
    finishMeanwhile = true;
    await assert.rejects(ops.stopInstance(`${group}-1`, false), { code: "INVALID_STATE" });
    assert.deepEqual(actorEvents, []);
    assert.deepEqual(commands, []);
    assert.deepEqual((await fx.groups.get(group)).stoppedInstances, [], "the hold is undone");
  });

  test("another controller's instance: the command goes to the daemon under the holder's token; a refusal lets the slot go", async () => {
    owned = false;
    await running(`${group}-2`, false);
    await ops.stopInstance(`${group}-2`, false);
    assert.deepEqual([commands[0]?.type, bodyOf(commands[0])?.fencing_token], ["stop_instance", 42]);
    assert.deepEqual((await fx.groups.get(group)).stoppedInstances, [`${group}-2`]);
    await fx.groups.setStoppedByOperator(group, `${group}-2`, false);
    answers.push({ command_id: "c", ok: false, error_code: "UNKNOWN_INSTANCE", message: "not here" });
    await assert.rejects(ops.stopInstance(`${group}-2`, false), { code: "UNKNOWN_INSTANCE" });
    assert.deepEqual((await fx.groups.get(group)).stoppedInstances, [], "the hold is undone");
    assert.deepEqual(actorEvents, []);
  });

  test("a finished or unknown instance is refused with the spec's codes", async () => {
    await running(`${group}-1`, true, "STOPPED");
    await assert.rejects(ops.stopInstance(`${group}-1`, true), { code: "INVALID_STATE" });
    await assert.rejects(ops.sendCommand(`${group}-nope`, "say hi"), { code: "NOT_FOUND" });
    assert.deepEqual(commands, []);
  });

  test("a console command carries this controller's token; readiness catches the actor up and tolerates INVALID_STATE", async () => {
    await running(`${group}-1`, true);
    await ops.sendCommand(`${group}-1`, "say hi");
    assert.deepEqual(commands[0], { type: "stdin_instance", body: { group, fencing_token: 3, instance_id: `${group}-1`, line: "say hi" } });
    answers.push({ command_id: "c", ok: false, error_code: "INVALID_STATE", message: "already running" });
    await ops.markReady(`${group}-1`);
    assert.deepEqual(actorEvents, [`${group}-1 DISPATCHED`, `${group}-1 SPAWNED`, `${group}-1 READY`]);
    assert.equal(commands[1]?.type, "mark_instance_ready");
    // A refusal that may pass (the lease moved while the call was on its way) is a 503: the plugin reports it again.
    answers.push({ command_id: "c", ok: false, error_code: "STALE_EPOCH", message: "older" });
    await assert.rejects(ops.markReady(`${group}-1`), { status: 503, code: "READY_NOT_DELIVERED" });
  });

  test("player counts: recorded, the group told; a draining instance whose last player left is EMPTY", async () => {
    await running(`${group}-1`, true, "DRAINING");
    await ops.playerCountChanged(`${group}-1`, 4);
    assert.equal(live.get(`${group}-1`)?.playerCount, 4);
    assert.equal((await fx.instances.getDoc(`${group}-1`))?.playerCount, 4);
    assert.deepEqual(actorEvents, []);
    await ops.playerCountChanged(`${group}-1`, 0);
    assert.deepEqual(actorEvents, [`${group}-1 EMPTY`]);
    assert.deepEqual(groupEvents, [`${group} CHANGED`, `${group} CHANGED`]);
    assert.deepEqual(countsWritten, [`${group}-1 ${group}`, `${group}-1 ${group}`]);
  });

  test("player counts: a scope that moved while the count was written leaves it to the new owner (no error, the view unchanged)", async () => {
    await running(`${group}-3`, true);
    scopeMoved = true;
    await ops.playerCountChanged(`${group}-3`, 6);
    assert.equal(live.get(`${group}-3`)?.playerCount, 0);
    assert.deepEqual([countsWritten, groupEvents], [[], []]);
  });

  test("player counts of an instance another controller schedules: the view here changes, the record is the owner's to write", async () => {
    await running(`${group}-2`, false);
    await fx.instances.save({ ...(await fx.instances.getDoc(`${group}-2`))!, state: "DRAINING" });
    await ops.playerCountChanged(`${group}-2`, 3);
    assert.equal(live.get(`${group}-2`)?.playerCount, 3);
    const doc = await fx.instances.getDoc(`${group}-2`);
    assert.deepEqual([doc?.playerCount, doc?.state], [0, "DRAINING"], "the record (and the owner's state in it) untouched");
    assert.deepEqual([countsWritten, groupEvents, actorEvents], [[], [], []]);
  });
});
