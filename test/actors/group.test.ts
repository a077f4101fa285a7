import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { createActor, fromPromise, SimulatedClock } from "xstate";
import { groupMachine, type GroupInput, type GroupTimings } from "../../actors/group/group-machine.js";
import {
  EVALUATE_DONE,
  EVALUATE_ERROR,
  GROUP_EFFECTS,
  GROUP_EVENT_TYPES,
  GROUP_MACHINE_STATES,
  GROUP_TRANSITIONS,
  type EvaluationOutput,
  type GroupMachineState,
} from "../../actors/group/transitions.js";
import { delayName, eventsFrom, isDelayEvent } from "../../actors/shared/transition-table.js";
import { documentedTable, renderedTable } from "./machine-harness.js";

const timings: GroupTimings = { evaluationIntervalMs: 15_000, evaluationTimeoutMs: 20_000 };
const delayMs: Record<string, number> = { evaluationInterval: timings.evaluationIntervalMs, evaluationTimeout: timings.evaluationTimeoutMs };

/** Lets settled promises deliver their done events (no timer involved). */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

interface Evaluation {
  group: string;
  signal: AbortSignal;
  resolve(output: EvaluationOutput): void;
  reject(error: Error): void;
}

/** A group actor whose evaluations wait for the test to settle them, with effects recorded. */
function startGroup(input: Partial<GroupInput> = {}) {
  const clock = new SimulatedClock();
  const calls: string[] = [];
  const evaluations: Evaluation[] = [];
  const machine = groupMachine.provide({
    actions: Object.fromEntries(GROUP_EFFECTS.map((name) => [name, () => void calls.push(name)])),
    actors: {
      evaluate: fromPromise<EvaluationOutput, { group: string }>(
        ({ input: evalInput, signal }) => new Promise((resolve, reject) => evaluations.push({ group: evalInput.group, signal, resolve, reject })),
      ),
    },
  });
  const actor = createActor(machine, { clock, input: { group: "lobby", timings, ...input } });
  actor.start();
  return { clock, calls, evaluations, actor, state: () => actor.getSnapshot().value as unknown as string, take: () => calls.splice(0, calls.length) };
}

type Run = ReturnType<typeof startGroup>;

async function groupIn(state: GroupMachineState): Promise<Run> {
  const run = state === "MAINTENANCE" ? startGroup({ maintenance: true }) : state === "PAUSED" ? startGroup({ paused: true }) : startGroup();
  if (state === "WAITING") {
    run.evaluations[0].resolve({ again: false });
    await settle();
  }
  assert.equal(run.state(), state);
  run.take();
  return run;
}

describe("group machine: the table", () => {
  test("docs/decisions/scheduler.md carries the current table", () => {
    assert.equal(documentedTable("docs/decisions/scheduler.md", "group"), renderedTable(GROUP_TRANSITIONS));
  });

  for (const row of GROUP_TRANSITIONS) {
    const label = `${row.from} --${row.event}${row.guard ? ` [${row.guard}]` : ""}--> ${row.to}: ${row.effects.join(", ") || "no effect"}`;
    test(`edge ${label}`, async () => {
      if (row.from === "STARTING") {
        const run = startGroup({ maintenance: row.guard === "startsInMaintenance", paused: row.guard === "startsPaused" });
        assert.equal(run.state(), row.to);
        assert.equal(run.evaluations.length, row.to === "EVALUATING" ? 1 : 0, "evaluates at once when created");
        return;
      }
      const run = await groupIn(row.from);
      const evaluationsBefore = run.evaluations.length;
      if (isDelayEvent(row.event)) {
        const ms = delayMs[delayName(row.event)];
        run.clock.increment(ms - 1);
        assert.equal(run.state(), row.from, "nothing happens a millisecond early");
        run.clock.increment(1);
      } else if (row.event === EVALUATE_DONE) {
        run.evaluations[0].resolve({ again: row.guard === "evaluateAgain" });
        await settle();
      } else if (row.event === EVALUATE_ERROR) {
        run.evaluations[0].reject(new Error("store unavailable"));
        await settle();
      } else {
        run.actor.send(row.event === "CRASH_LOOP" ? { type: "CRASH_LOOP", crashCount: 3, windowStartMs: 0 } : ({ type: row.event } as never));
      }
      assert.equal(run.state(), row.to);
      assert.deepEqual(run.take(), [...row.effects]);
      const entersEvaluation = row.to === "EVALUATING" && (row.from !== "EVALUATING" || row.reenter === true);
      assert.equal(run.evaluations.length - evaluationsBefore, entersEvaluation ? 1 : 0, "a new evaluation starts exactly on entering EVALUATING");
      if (row.from === "EVALUATING" && row.to !== "EVALUATING")
        assert.equal(
          run.evaluations[0].signal.aborted,
          row.event !== EVALUATE_DONE && row.event !== EVALUATE_ERROR,
          "leaving EVALUATING aborts a running evaluation",
        );
      assert.equal(run.actor.getSnapshot().status, row.to === "DELETED" ? "done" : "active");
    });
  }

  test("an event the table does not list for a state changes nothing and has no effect", async () => {
    for (const state of GROUP_MACHINE_STATES) {
      if (state === "STARTING" || state === "DELETED") continue;
      const listed = eventsFrom(GROUP_TRANSITIONS, state);
      for (const type of GROUP_EVENT_TYPES) {
        if (listed.has(type)) continue;
        const run = await groupIn(state);
        const before = run.evaluations.length;
        run.actor.send(type === "CRASH_LOOP" ? { type, crashCount: 3, windowStartMs: 0 } : ({ type } as never));
        assert.equal(run.state(), state, `${state} ignores ${type}`);
        assert.deepEqual(run.take(), []);
        assert.equal(run.evaluations.length, before);
      }
    }
  });
});

describe("group machine: the loop under a simulated clock", () => {
  test("evaluates at once, then every interval", async () => {
    const run = startGroup();
    assert.equal(run.evaluations.length, 1);
    for (let tick = 1; tick <= 3; tick++) {
      run.evaluations[tick - 1].resolve({ again: false });
      await settle();
      run.clock.increment(timings.evaluationIntervalMs - 1);
      assert.equal(run.evaluations.length, tick);
      run.clock.increment(1);
      assert.equal(run.evaluations.length, tick + 1);
    }
  });

  test("changes during an evaluation are coalesced into one follow-up evaluation", async () => {
    const run = startGroup();
    for (let i = 0; i < 10; i++) run.actor.send({ type: "CHANGED" });
    assert.equal(run.evaluations.length, 1);
    run.evaluations[0].resolve({ again: false });
    await settle();
    assert.equal(run.evaluations.length, 2);
    run.evaluations[1].resolve({ again: false });
    await settle();
    assert.equal(run.state(), "WAITING");
  });

  test("a change reacts at once, not at the next tick", async () => {
    const run = await groupIn("WAITING");
    run.clock.increment(1_000);
    run.actor.send({ type: "CHANGED" });
    assert.equal(run.evaluations.length, 2);
  });

  test("a hung evaluation is aborted after evaluationTimeoutMs and the loop goes on", async () => {
    const run = startGroup();
    run.clock.increment(timings.evaluationTimeoutMs);
    assert.equal(run.evaluations[0].signal.aborted, true);
    assert.deepEqual(run.take(), ["reportEvaluationFailed"]);
    run.clock.increment(timings.evaluationIntervalMs);
    assert.equal(run.evaluations.length, 2);
  });

  test("maintenance and a crash-loop pause skip every tick; resume evaluates at once", async () => {
    const run = await groupIn("WAITING");
    run.actor.send({ type: "CRASH_LOOP", crashCount: 3, windowStartMs: 0 });
    for (let i = 0; i < 10; i++) run.clock.increment(timings.evaluationIntervalMs);
    run.actor.send({ type: "CHANGED" });
    assert.equal(run.evaluations.length, 1);
    run.actor.send({ type: "MAINTENANCE_ON" });
    run.actor.send({ type: "MAINTENANCE_OFF" });
    assert.equal(run.state(), "EVALUATING", "leaving maintenance also ends the pause");
    assert.deepEqual(run.take(), ["announceCrashLoop", "clearCrashLoop"]);
    assert.equal(run.evaluations[1].group, "lobby");
  });
});
