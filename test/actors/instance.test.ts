import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { defaultInstanceTimeouts, instanceMachine, type InstanceTimeouts } from "../../actors/instance/instance-machine.js";
import {
  INSTANCE_DELAYS,
  INSTANCE_EFFECTS,
  INSTANCE_EVENT_TYPES,
  INSTANCE_FINAL_STATES,
  INSTANCE_MACHINE_STATES,
  INSTANCE_TRANSITIONS,
  type InstanceAdoptableState,
  type InstanceEvent,
  type InstanceMachineState,
} from "../../actors/instance/transitions.js";
import { delayName, eventsFrom, isDelayEvent } from "../../actors/shared/transition-table.js";
import { INSTANCE_STATES } from "../../src/domain/instances/instance-schemas.js";
import { documentedTable, pathTo, renderedTable, startRecorded } from "./machine-harness.js";

const timeouts: InstanceTimeouts = {
  dispatchTimeoutMs: 1_000,
  dispatchAttemptsMax: 3,
  prepareTimeoutMs: 5_000,
  startTimeoutMs: 7_000,
  drainTimeoutMs: 11_000,
  stopTimeoutMs: 13_000,
};
const delayMs: Record<string, number> = {
  dispatchTimeout: timeouts.dispatchTimeoutMs,
  prepareTimeout: timeouts.prepareTimeoutMs,
  startTimeout: timeouts.startTimeoutMs,
  drainTimeout: timeouts.drainTimeoutMs,
  stopTimeout: timeouts.stopTimeoutMs,
};

function eventOf(type: string): InstanceEvent {
  if (type === "EXITED") return { type, exitCode: 1 };
  if (type === "FAILED") return { type, reason: "template fetch failed" };
  return { type } as InstanceEvent;
}

/**
 * Paths that must not take the shortest route: STOPPING via PREPARING + STOP would already have sent
 * the force-stop, so the graceful stop path goes through RUNNING.
 */
const preferredPaths: Partial<Record<InstanceMachineState, string[]>> = {
  STOPPING: ["DISPATCHED", "SPAWNED", "READY", "STOP"],
};

/** A recorded instance actor driven to `state` by the shortest event path; effects cleared. */
function instanceIn(state: InstanceMachineState) {
  const run = startRecorded(instanceMachine, INSTANCE_EFFECTS, { instanceId: "lobby-1", group: "lobby", node: "node-a", timeouts });
  for (const type of preferredPaths[state] ?? pathTo(INSTANCE_TRANSITIONS, "SCHEDULED", state)) run.actor.send(eventOf(type));
  assert.equal(run.state(), state, `reached ${state}`);
  run.take();
  return run;
}

describe("instance machine: the table", () => {
  test("the machine's states are the eight instance states of the domain", () => {
    assert.deepEqual(INSTANCE_MACHINE_STATES.filter((s) => s !== "CREATED").sort(), [...INSTANCE_STATES].sort());
  });

  test("creation dispatches once and waits in SCHEDULED", () => {
    const run = startRecorded(instanceMachine, INSTANCE_EFFECTS, { instanceId: "i", group: "g", node: "n", timeouts });
    assert.equal(run.state(), "SCHEDULED");
    assert.deepEqual(run.take(), ["dispatch"]);
  });

  test("docs/decisions/instance-states.md carries the current table", () => {
    assert.equal(documentedTable("docs/decisions/instance-states.md", "instance"), renderedTable(INSTANCE_TRANSITIONS));
  });

  for (const row of INSTANCE_TRANSITIONS) {
    const label = `${row.from} --${row.event}${row.guard ? ` [${row.guard}]` : ""}--> ${row.to}: ${row.effects.join(", ") || "no effect"}`;
    test(`edge ${label}`, () => {
      if (row.from === "CREATED") {
        const adoptState = row.guard ? (row.to as InstanceAdoptableState) : undefined;
        const created = startRecorded(instanceMachine, INSTANCE_EFFECTS, { instanceId: "i", group: "g", node: "n", adoptState, timeouts });
        assert.equal(created.state(), row.to);
        assert.deepEqual(created.take(), [...row.effects]);
        return;
      }
      const run = instanceIn(row.from);
      if (isDelayEvent(row.event)) {
        const ms = delayMs[delayName(row.event)];
        // A fallback row after a guarded one is reached once the guard stops holding: keep
        // advancing by the delay (bounded) until the edge's target is entered with its effects.
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
        run.actor.send(eventOf(row.event));
        assert.equal(run.state(), row.to);
        assert.deepEqual(run.take(), [...row.effects]);
      }
      const finished = INSTANCE_FINAL_STATES.includes(row.to);
      assert.equal(run.actor.getSnapshot().status, finished ? "done" : "active");
      if (finished) assert.deepEqual(run.actor.getSnapshot().output, { state: row.to });
    });
  }

  test("an event the table does not list for a state changes nothing and has no effect", () => {
    for (const state of INSTANCE_MACHINE_STATES) {
      if (state === "CREATED") continue;
      const listed = eventsFrom(INSTANCE_TRANSITIONS, state);
      for (const type of INSTANCE_EVENT_TYPES) {
        if (listed.has(type)) continue;
        const run = instanceIn(state);
        run.actor.send(eventOf(type));
        assert.equal(run.state(), state, `${state} ignores ${type}`);
        assert.deepEqual(run.take(), [], `${state} + ${type} has no effect`);
      }
    }
  });

  test("every live state but RUNNING has a bounded wait; every state can reach STOPPED or CRASHED", () => {
    for (const state of INSTANCE_MACHINE_STATES) {
      if (INSTANCE_FINAL_STATES.includes(state) || state === "CREATED") continue;
      const timed = INSTANCE_TRANSITIONS.some((r) => r.from === state && isDelayEvent(r.event));
      assert.equal(timed, state !== "RUNNING", `${state} has a timeout`);
      assert.ok(
        INSTANCE_TRANSITIONS.some((r) => r.from === state && r.event === "FORCE_STOP"),
        `${state} can be force-stopped`,
      );
    }
    const delays = new Set(INSTANCE_TRANSITIONS.filter((r) => isDelayEvent(r.event)).map((r) => delayName(r.event)));
    assert.deepEqual([...delays].sort(), [...INSTANCE_DELAYS].sort());
  });
});

describe("instance machine: timeouts under a simulated clock", () => {
  test("never dispatched: resent every dispatchTimeoutMs, CRASHED after dispatchAttemptsMax attempts", () => {
    const run = instanceIn("SCHEDULED");
    run.clock.increment(timeouts.dispatchTimeoutMs);
    assert.deepEqual(run.take(), ["dispatch"]);
    run.clock.increment(timeouts.dispatchTimeoutMs);
    assert.deepEqual(run.take(), ["dispatch"]);
    assert.equal(run.actor.getSnapshot().context.dispatchAttempts, 3);
    run.clock.increment(timeouts.dispatchTimeoutMs - 1);
    assert.equal(run.state(), "SCHEDULED");
    run.clock.increment(1);
    assert.equal(run.state(), "CRASHED");
    assert.deepEqual(run.take(), ["sendForceStop", "reportTimeout"]);
  });

  test("a dispatch acknowledged before the timeout cancels it", () => {
    const run = instanceIn("SCHEDULED");
    run.clock.increment(timeouts.dispatchTimeoutMs - 1);
    run.actor.send({ type: "DISPATCHED" });
    run.clock.increment(timeouts.prepareTimeoutMs - 1);
    assert.equal(run.state(), "PREPARING", "the dispatch timer was cancelled");
    assert.deepEqual(run.take(), []);
    run.clock.increment(1);
    assert.equal(run.state(), "CRASHED", "PREPARING's own timer, started on entry, ran out");
  });

  test("PREPARING that never spawns: CRASHED at prepareTimeoutMs", () => {
    const run = instanceIn("PREPARING");
    run.clock.increment(timeouts.prepareTimeoutMs - 1);
    assert.equal(run.state(), "PREPARING");
    run.clock.increment(1);
    assert.equal(run.state(), "CRASHED");
    assert.deepEqual(run.take(), ["sendForceStop", "reportTimeout"]);
  });

  test("STARTING that never becomes ready: killed and CRASHED at startTimeoutMs; READY in time wins", () => {
    const late = instanceIn("STARTING");
    late.clock.increment(timeouts.startTimeoutMs);
    assert.equal(late.state(), "CRASHED");
    assert.deepEqual(late.take(), ["sendForceStop", "reportTimeout"]);
    const ready = instanceIn("STARTING");
    ready.clock.increment(timeouts.startTimeoutMs - 1);
    ready.actor.send({ type: "READY" });
    ready.clock.increment(24 * 3600_000);
    assert.equal(ready.state(), "RUNNING", "RUNNING has no timeout");
    assert.deepEqual(ready.take(), []);
  });

  test("DRAINING: stop command at drainTimeoutMs unless it empties first", () => {
    const run = instanceIn("DRAINING");
    run.clock.increment(timeouts.drainTimeoutMs);
    assert.equal(run.state(), "STOPPING");
    assert.deepEqual(run.take(), ["sendStop"]);
    const empty = instanceIn("DRAINING");
    empty.clock.increment(1_000);
    empty.actor.send({ type: "EMPTY" });
    assert.equal(empty.state(), "STOPPING");
    empty.clock.increment(timeouts.stopTimeoutMs - 1_000);
    assert.deepEqual(empty.take(), ["sendStop"], "the stop timer starts on entering STOPPING, not at the drain");
  });

  test("STOPPING: force-stop after stopTimeoutMs, STOPPED unconfirmed after another stopTimeoutMs", () => {
    const run = instanceIn("STOPPING");
    run.clock.increment(timeouts.stopTimeoutMs);
    assert.equal(run.state(), "STOPPING");
    assert.deepEqual(run.take(), ["sendForceStop"]);
    run.clock.increment(timeouts.stopTimeoutMs - 1);
    assert.equal(run.state(), "STOPPING");
    run.clock.increment(1);
    assert.equal(run.state(), "STOPPED");
    assert.deepEqual(run.take(), ["reportStopUnconfirmed"]);
  });

  test("a force-stop while STOPPING keeps the running timer and makes its expiry final", () => {
    const run = instanceIn("STOPPING");
    run.clock.increment(5_000);
    run.actor.send({ type: "FORCE_STOP" });
    assert.deepEqual(run.take(), ["sendForceStop"]);
    run.clock.increment(timeouts.stopTimeoutMs - 5_000);
    assert.equal(run.state(), "STOPPED");
    assert.deepEqual(run.take(), ["reportStopUnconfirmed"]);
  });

  test("an adopted instance keeps its recorded state and timers start afresh; an adopted SCHEDULED one is dispatched again", () => {
    const starting = startRecorded(instanceMachine, INSTANCE_EFFECTS, { instanceId: "i", group: "g", node: "n", adoptState: "STARTING", timeouts });
    assert.deepEqual(starting.take(), [], "nothing is sent to a process that is already starting");
    starting.clock.increment(timeouts.startTimeoutMs);
    assert.equal(starting.state(), "CRASHED");
    const scheduled = startRecorded(instanceMachine, INSTANCE_EFFECTS, { instanceId: "i", group: "g", node: "n", adoptState: "SCHEDULED", timeouts });
    assert.deepEqual(scheduled.take(), ["dispatch"]);
  });

  test("the full happy path and its default timeouts", () => {
    const run = startRecorded(instanceMachine, INSTANCE_EFFECTS, { instanceId: "i", group: "g", node: "n" });
    assert.deepEqual(run.actor.getSnapshot().context.timeouts, defaultInstanceTimeouts);
    for (const type of ["DISPATCHED", "SPAWNED", "READY", "DRAIN", "EMPTY"]) run.actor.send(eventOf(type));
    run.actor.send({ type: "EXITED", exitCode: 0 });
    assert.equal(run.state(), "STOPPED");
    assert.deepEqual(run.take(), ["dispatch", "announceDrain", "sendStop"]);
  });
});
