import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { createActor, fromPromise, SimulatedClock, type AnyActorRef } from "xstate";
import { groupMachine } from "../../actors/group/group-machine.js";
import type { EvaluationOutput } from "../../actors/group/transitions.js";
import { instanceMachine } from "../../actors/instance/instance-machine.js";
import { groupChildId, instanceChildId, supervisedChildren, supervisorMachine } from "../../actors/supervisor/supervisor-machine.js";

/** A supervisor whose children record their effects and whose evaluations never finish on their own. */
function startSupervisor() {
  const clock = new SimulatedClock();
  const log: string[] = [];
  const signals: AbortSignal[] = [];
  const supervisor = supervisorMachine.provide({
    actions: {
      reportScopeAcquired: () => void log.push("acquired"),
      reportScopeLost: () => void log.push("lost"),
    },
    actors: {
      group: groupMachine.provide({
        actors: {
          evaluate: fromPromise<EvaluationOutput, { group: string }>(({ input, signal }) => {
            log.push(`evaluate ${input.group}`);
            signals.push(signal);
            return new Promise(() => {});
          }),
        },
      }),
      instance: instanceMachine.provide({
        actions: {
          dispatch: ({ context }) => void log.push(`dispatch ${context.instanceId}`),
          sendStop: ({ context }) => void log.push(`stop ${context.instanceId}`),
        },
      }),
    },
  });
  const actor = createActor(supervisor, { clock, input: { scope: "groups" } });
  actor.start();
  return { clock, log, signals, actor, children: () => supervisedChildren(actor.getSnapshot()) };
}

const acquired = {
  type: "SCOPE_ACQUIRED" as const,
  fencingToken: 7,
  groups: [{ group: "lobby" }, { group: "bedwars", maintenance: true }],
  instances: [
    { instanceId: "lobby-1", group: "lobby", node: "node-a", adoptState: "RUNNING" as const },
    { instanceId: "lobby-2", group: "lobby", node: "node-b", adoptState: "STARTING" as const },
    { instanceId: "bedwars-1", group: "bedwars", node: "node-a", adoptState: "DRAINING" as const },
  ],
};

describe("scope supervisor", () => {
  test("acquiring the scope spawns a group actor per group and adopts every live instance without commands", () => {
    const run = startSupervisor();
    run.actor.send(acquired);
    const snapshot = run.actor.getSnapshot();
    assert.equal(snapshot.value, "OWNING");
    assert.equal(snapshot.context.fencingToken, 7);
    assert.deepEqual(Object.keys(snapshot.children).sort(), ["group:bedwars", "group:lobby", "instance:bedwars-1", "instance:lobby-1", "instance:lobby-2"]);
    assert.equal(snapshot.children[groupChildId("bedwars")]?.getSnapshot().value, "MAINTENANCE");
    assert.equal(snapshot.children[instanceChildId("lobby-2")]?.getSnapshot().value, "STARTING");
    assert.deepEqual(run.log, ["acquired", "evaluate lobby"], "adopted instances get no command; the group in maintenance is not evaluated");
  });

  test("losing the scope stops every child at once, aborting running evaluations", () => {
    const run = startSupervisor();
    run.actor.send(acquired);
    const children: AnyActorRef[] = run.children();
    assert.equal(children.length, 5);
    const transitions: string[] = [];
    run.actor.subscribe((s) => transitions.push(`${s.value}:${Object.keys(s.children).length}`));
    run.actor.send({ type: "SCOPE_LOST" });
    assert.deepEqual(transitions, ["RELEASED:0"], "one transition takes every child away");
    for (const child of children) assert.equal(child.getSnapshot().status, "stopped", `${child.id} stopped`);
    assert.equal(run.signals[0].aborted, true);
    assert.equal(run.actor.getSnapshot().context.fencingToken, null);
    assert.deepEqual(run.log.slice(-1), ["lost"]);
    // Stopped children no longer react to time: no timeout fires for the adopted STARTING instance.
    run.clock.increment(24 * 3600_000);
    assert.equal(run.children().length, 0);
  });

  test("while released, events for children are dropped; re-acquiring adopts afresh", () => {
    const run = startSupervisor();
    run.actor.send({ type: "GROUP_ADDED", group: { group: "lobby" } });
    run.actor.send({ type: "INSTANCE_ADDED", instance: { instanceId: "x", group: "lobby", node: "n" } });
    assert.equal(run.children().length, 0);
    run.actor.send(acquired);
    run.actor.send({ type: "SCOPE_LOST" });
    run.actor.send({ ...acquired, fencingToken: 9 });
    assert.equal(run.children().length, 5);
    assert.equal(run.actor.getSnapshot().context.fencingToken, 9);
  });

  test("groups and instances come and go while owned; events are routed to the right child", () => {
    const run = startSupervisor();
    run.actor.send({ ...acquired, instances: [] });
    run.actor.send({ type: "GROUP_ADDED", group: { group: "duels" } });
    run.actor.send({ type: "GROUP_ADDED", group: { group: "duels" } });
    run.actor.send({ type: "INSTANCE_ADDED", instance: { instanceId: "duels-1", group: "duels", node: "node-a" } });
    assert.deepEqual(run.log.slice(-2), ["evaluate duels", "dispatch duels-1"]);
    run.actor.send({ type: "TO_INSTANCE", instanceId: "duels-1", event: { type: "DISPATCHED" } });
    run.actor.send({ type: "TO_INSTANCE", instanceId: "nobody", event: { type: "STOP" } });
    const instance = run.actor.getSnapshot().children[instanceChildId("duels-1")];
    assert.equal(instance?.getSnapshot().value, "PREPARING");
    run.actor.send({ type: "TO_GROUP", group: "bedwars", event: { type: "MAINTENANCE_OFF" } });
    assert.equal(run.actor.getSnapshot().children[groupChildId("bedwars")]?.getSnapshot().value, "EVALUATING");
    run.actor.send({ type: "TO_INSTANCE", instanceId: "duels-1", event: { type: "NODE_LOST" } });
    assert.equal(instance?.getSnapshot().status, "done");
    run.actor.send({ type: "INSTANCE_FINISHED", instanceId: "duels-1" });
    run.actor.send({ type: "GROUP_REMOVED", group: "duels" });
    assert.deepEqual(Object.keys(run.actor.getSnapshot().children).sort(), ["group:bedwars", "group:lobby"]);
    assert.deepEqual(run.actor.getSnapshot().context.groups, ["lobby", "bedwars"]);
  });
});
