import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { nodeMachine, type NodeStartState, type NodeTimeouts } from "../../actors/node/node-machine.js";
import { NODE_EFFECTS, NODE_EVENT_TYPES, NODE_MACHINE_STATES, NODE_TRANSITIONS } from "../../actors/node/transitions.js";
import { delayName, eventsFrom, isDelayEvent } from "../../actors/shared/transition-table.js";
import { NODE_STATES } from "../../src/domain/nodes/node-schemas.js";
import { documentedTable, renderedTable, startRecorded } from "./machine-harness.js";

const timeouts: NodeTimeouts = { offlineGraceMs: 30_000 };
const delayMs: Record<string, number> = { offlineGrace: timeouts.offlineGraceMs };

function nodeIn(state: NodeStartState, drainRequested = state === "DRAINING") {
  const run = startRecorded(nodeMachine, NODE_EFFECTS, { nodeId: "node-a", state, drainRequested, timeouts });
  assert.equal(run.state(), state);
  run.take();
  return run;
}

const restoreTarget: Record<string, NodeStartState> = { restoresDraining: "DRAINING", restoresUnreachable: "UNREACHABLE", restoresOffline: "OFFLINE" };

describe("node machine: the table", () => {
  test("the machine's lasting states are the four node states of the domain", () => {
    assert.deepEqual(NODE_MACHINE_STATES.filter((s) => s !== "RESTORING").sort(), [...NODE_STATES].sort());
  });

  test("docs/decisions/node-states.md carries the current table", () => {
    assert.equal(documentedTable("docs/decisions/node-states.md", "node"), renderedTable(NODE_TRANSITIONS));
  });

  for (const row of NODE_TRANSITIONS) {
    const label = `${row.from} --${row.event}${row.guard ? ` [${row.guard}]` : ""}--> ${row.to}: ${row.effects.join(", ") || "no effect"}`;
    test(`edge ${label}`, () => {
      if (row.from === "RESTORING") {
        const start = row.guard ? restoreTarget[row.guard] : "ONLINE";
        const run = startRecorded(nodeMachine, NODE_EFFECTS, { nodeId: "n", state: start, timeouts });
        assert.equal(run.state(), row.to);
        assert.deepEqual(run.take(), []);
        return;
      }
      const run = nodeIn(row.from as NodeStartState, row.guard === "drainRequested" || row.from === "DRAINING");
      if (isDelayEvent(row.event)) {
        const ms = delayMs[delayName(row.event)];
        let effects: string[] = [];
        for (let step = 0; step < 5; step++) {
          run.clock.increment(ms - 1);
          assert.equal(run.state(), row.from, "nothing happens a millisecond early");
          run.clock.increment(1);
          effects = run.take();
          if (run.state() === row.to && (row.from !== row.to || row.guard !== undefined)) break;
        }
        assert.equal(run.state(), row.to);
        assert.deepEqual(effects, row.effects);
      } else {
        run.actor.send({ type: row.event } as never);
        assert.equal(run.state(), row.to);
        assert.deepEqual(run.take(), [...row.effects]);
      }
    });
  }

  test("an event the table does not list for a state changes nothing and has no effect", () => {
    for (const state of NODE_MACHINE_STATES) {
      if (state === "RESTORING") continue;
      const listed = eventsFrom(NODE_TRANSITIONS, state);
      for (const type of NODE_EVENT_TYPES) {
        if (listed.has(type)) continue;
        const run = nodeIn(state);
        run.actor.send({ type } as never);
        assert.equal(run.state(), state, `${state} ignores ${type}`);
        assert.deepEqual(run.take(), []);
      }
    }
  });
});

describe("node machine: outages under a simulated clock", () => {
  test("unreachable past the grace period: OFFLINE, instances replaced once", () => {
    const run = nodeIn("ONLINE");
    run.actor.send({ type: "DISCONNECTED" });
    run.clock.increment(timeouts.offlineGraceMs - 1);
    assert.equal(run.state(), "UNREACHABLE");
    run.clock.increment(1);
    assert.equal(run.state(), "OFFLINE");
    run.clock.increment(10 * timeouts.offlineGraceMs);
    assert.deepEqual(run.take(), ["reportDisconnected", "replaceInstances"]);
  });

  test("back within the grace period: ONLINE, nothing replaced; a connected node has no timer of its own", () => {
    const run = nodeIn("ONLINE");
    run.actor.send({ type: "DISCONNECTED" });
    assert.equal(run.state(), "UNREACHABLE");
    run.clock.increment(timeouts.offlineGraceMs - 1);
    run.actor.send({ type: "CONNECTED" });
    assert.equal(run.state(), "ONLINE");
    run.clock.increment(10 * timeouts.offlineGraceMs);
    assert.equal(run.state(), "ONLINE", "only the gateway's session decides that a node is gone");
    run.actor.send({ type: "DISCONNECTED" });
    run.clock.increment(timeouts.offlineGraceMs - 1);
    assert.equal(run.state(), "UNREACHABLE", "a new outage gets the whole grace period");
    assert.deepEqual(run.take(), ["reportDisconnected", "reportConnected", "reportDisconnected"]);
  });

  test("a drained node that was lost comes back DRAINING; a drain while unreachable is kept", () => {
    const drained = nodeIn("DRAINING");
    drained.actor.send({ type: "DISCONNECTED" });
    drained.actor.send({ type: "CONNECTED" });
    assert.equal(drained.state(), "DRAINING");
    const lost = nodeIn("ONLINE");
    lost.actor.send({ type: "DISCONNECTED" });
    lost.actor.send({ type: "DRAIN" });
    assert.equal(lost.state(), "UNREACHABLE");
    lost.actor.send({ type: "CONNECTED" });
    assert.equal(lost.state(), "DRAINING");
    lost.actor.send({ type: "UNDRAIN" });
    assert.equal(lost.state(), "ONLINE");
  });

  test("cordon is a flag beside the state", () => {
    const run = nodeIn("ONLINE");
    run.actor.send({ type: "CORDON" });
    run.actor.send({ type: "DRAIN" });
    const snapshot = run.actor.getSnapshot();
    assert.deepEqual([snapshot.value, snapshot.context.cordoned], ["DRAINING", true]);
    assert.deepEqual(run.take(), ["persistCordon", "announceDrain"]);
  });
});
