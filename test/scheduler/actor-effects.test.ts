import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { createActor, SimulatedClock } from "xstate";
import type { EvaluationOutput } from "../../actors/group/transitions.js";
import {
  delayOfEvent,
  provideGroupEffects,
  provideInstanceEffects,
  provideNodeEffects,
  provideSupervisor,
  type GroupEffectsPort,
  type InstanceEffectsPort,
  type NodeEffectsPort,
} from "../../src/scheduler/actor-effects.js";

/** A port whose every method records `name args` (objects as JSON). */
function recordingPort<T extends object>(log: string[], names: readonly (keyof T & string)[], overrides: Partial<T> = {}): T {
  const port: Record<string, unknown> = {};
  for (const name of names)
    port[name] = (...args: unknown[]) => void log.push(`${name} ${args.map((a) => (typeof a === "string" ? a : JSON.stringify(a))).join(" ")}`);
  return { ...port, ...overrides } as T;
}

const instanceMethods = ["dispatch", "stop", "forceStop", "announceDrain", "crashed", "lost", "timedOut", "stopUnconfirmed"] as const;
const nodeMethods = ["disconnected", "connected", "drainRequested", "drainCompleted", "cordonChanged", "replaceInstances"] as const;
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));
const ref = { instanceId: "lobby-1", group: "lobby", node: "node-a" };

describe("actor effects provided from src/", () => {
  test("instance: commands and reports carry the instance, crashes their cause, timeouts their delay", () => {
    const log: string[] = [];
    const machine = provideInstanceEffects(recordingPort<InstanceEffectsPort>(log, instanceMethods));
    const clock = new SimulatedClock();
    const crashed = createActor(machine, { clock, input: ref }).start();
    crashed.send({ type: "DISPATCHED" });
    crashed.send({ type: "SPAWNED" });
    crashed.send({ type: "READY" });
    crashed.send({ type: "EXITED", exitCode: 137 });
    const failed = createActor(machine, { clock, input: ref }).start();
    failed.send({ type: "DISPATCHED" });
    failed.send({ type: "FAILED", reason: "template lobby-base: hash mismatch" });
    const slow = createActor(machine, { clock, input: { ...ref, adoptState: "STARTING" as const, timeouts: { startTimeoutMs: 1_000 } } }).start();
    clock.increment(1_000);
    assert.equal(slow.getSnapshot().value, "CRASHED");
    const json = JSON.stringify(ref);
    assert.deepEqual(log, [
      `dispatch ${json}`,
      `crashed ${json} {"kind":"EXIT","exitCode":137}`,
      `dispatch ${json}`,
      `crashed ${json} {"kind":"FAILURE","reason":"template lobby-base: hash mismatch"}`,
      `forceStop ${json}`,
      `timedOut ${json} startTimeout`,
    ]);
    assert.equal(delayOfEvent("xstate.after.stopTimeout.instance.STOPPING"), "stopTimeout");
    assert.equal(delayOfEvent("EXITED"), "EXITED");
  });

  test("node: cordon reports the new flag; going OFFLINE replaces the node's instances", () => {
    const log: string[] = [];
    const clock = new SimulatedClock();
    const node = createActor(provideNodeEffects(recordingPort<NodeEffectsPort>(log, nodeMethods)), {
      clock,
      input: { nodeId: "node-a", timeouts: { offlineGraceMs: 1_000 } },
    }).start();
    node.send({ type: "CORDON" });
    node.send({ type: "DISCONNECTED" });
    clock.increment(1_000);
    assert.deepEqual(log, ["cordonChanged node-a true", "disconnected node-a", "replaceInstances node-a"]);
  });

  test("group: evaluate gets the group and an AbortSignal that maintenance aborts; crash loop and failures are reported", async () => {
    const log: string[] = [];
    const signals: AbortSignal[] = [];
    let finish: (output: EvaluationOutput) => void = () => {};
    const port = recordingPort<GroupEffectsPort>(log, ["crashLoop", "resumed", "stopInstances", "evaluationFailed"], {
      evaluate: (group: string, signal: AbortSignal) => {
        log.push(`evaluate ${group}`);
        signals.push(signal);
        return new Promise<EvaluationOutput>((resolve) => (finish = resolve));
      },
    });
    const clock = new SimulatedClock();
    const group = createActor(provideGroupEffects(port), { clock, input: { group: "lobby", timings: { evaluationTimeoutMs: 5_000 } } }).start();
    group.send({ type: "MAINTENANCE_ON" });
    assert.equal(signals[0].aborted, true);
    group.send({ type: "MAINTENANCE_OFF" });
    clock.increment(5_000);
    group.send({ type: "TICK" });
    finish({ again: false });
    await settle();
    group.send({ type: "CRASH_LOOP", crashCount: 3, windowStartMs: 42 });
    assert.equal(log[0], "evaluate lobby");
    assert.deepEqual(log.slice(1, 4), ["resumed lobby", "evaluate lobby", "evaluationFailed lobby {}"]);
    assert.deepEqual(log.slice(-1), ['crashLoop lobby {"crashCount":3,"windowStartMs":42}']);
  });

  test("supervisor: children run with the provided effects; losing the scope aborts their evaluations", () => {
    const log: string[] = [];
    const signals: AbortSignal[] = [];
    const supervisor = provideSupervisor({
      instances: recordingPort<InstanceEffectsPort>(log, instanceMethods),
      groups: recordingPort<GroupEffectsPort>(log, ["crashLoop", "resumed", "stopInstances", "evaluationFailed"], {
        evaluate: (_group: string, signal: AbortSignal) => {
          signals.push(signal);
          return new Promise<EvaluationOutput>(() => {});
        },
      }),
      scopeAcquired: (scope, token) => void log.push(`acquired ${scope} ${token}`),
      scopeLost: (scope) => void log.push(`lost ${scope}`),
    });
    const actor = createActor(supervisor, { clock: new SimulatedClock(), input: { scope: "groups" } }).start();
    actor.send({ type: "SCOPE_ACQUIRED", fencingToken: 7, groups: [{ group: "lobby" }], instances: [] });
    actor.send({ type: "INSTANCE_ADDED", instance: { instanceId: "lobby-1", group: "lobby", node: "node-a" } });
    actor.send({ type: "SCOPE_LOST" });
    assert.deepEqual(log, ["acquired groups 7", `dispatch ${JSON.stringify(ref)}`, "lost groups"]);
    assert.equal(signals.length, 1);
    assert.equal(signals[0].aborted, true);
  });
});
