// The node reconciler alone, on the fake clock: a round asks every node of a supervised instance and
// every other node that may hold strays, with what it believed when it asked; rounds run every
// interval on the injected clock and at once on request, never overlap (a request during a round is
// one more round after it), skip a node that cannot answer, and do nothing while no scope is owned.
import assert from "node:assert/strict";
import { beforeEach, describe, test } from "node:test";
import type { InstanceState } from "../../src/domain/instances/instance-schemas.js";
import { LiveInstances } from "../../src/scheduler/live-instances.js";
import { NodeReconciler } from "../../src/scheduler/node-reconciler.js";
import { SupervisedInstances } from "../../src/scheduler/supervised-instances.js";
import type { InstanceStateReport } from "../../src/wire/daemon-proto.js";
import { FakeClock } from "../support/fake-clock.js";
import { flush, instanceRecord, recordingLogger } from "./support.js";

const intervalMs = 30_000;

describe("node reconciler", () => {
  let clock: FakeClock;
  let live: LiveInstances;
  let supervised: SupervisedInstances;
  let owns: boolean;
  let queries: string[];
  let answers: Map<string, readonly InstanceStateReport[] | null>;
  let readings: string[];
  let gate: Promise<void> | null;
  let reconciler: NodeReconciler;

  beforeEach(() => {
    clock = new FakeClock(Date.parse("2026-02-01T10:00:00.000Z"));
    live = new LiveInstances();
    supervised = new SupervisedInstances();
    owns = true;
    queries = [];
    answers = new Map();
    readings = [];
    gate = null;
    reconciler = new NodeReconciler({
      live,
      supervised,
      clock,
      logger: recordingLogger(),
      intervalMs,
      otherNodes: async () => ["node-c"],
      listInstances: async (nodeId) => {
        queries.push(nodeId);
        if (gate) await gate;
        return answers.has(nodeId) ? answers.get(nodeId)! : [];
      },
      reconcile: async (nodeId, reports, asked: ReadonlyMap<string, InstanceState>) =>
        void readings.push(`${nodeId}: ${reports.length} reports; asked ${[...asked].map(([id, state]) => `${id}=${state}`).join(",")}`),
      ownsAnything: () => owns,
    });
  });

  function supervise(id: string, node: string, state: InstanceState): void {
    live.put(instanceRecord({ id, group: "lobby", node, state }));
    supervised.follow(id, state);
  }

  test("a round asks each node once with what was believed then; a node that cannot answer is skipped", async () => {
    supervise("lobby-1", "node-a", "RUNNING");
    supervise("lobby-2", "node-a", "SCHEDULED");
    supervise("lobby-3", "node-b", "STARTING");
    live.put(instanceRecord({ id: "other-1", group: "other", node: "node-b", state: "RUNNING" }));
    answers.set("node-b", null);
    await reconciler.request();
    assert.deepEqual(queries.sort(), ["node-a", "node-b", "node-c"]);
    assert.deepEqual(readings.sort(), ["node-a: 0 reports; asked lobby-1=RUNNING,lobby-2=SCHEDULED", "node-c: 0 reports; asked "]);
    assert.equal(reconciler.rounds, 1);
  });

  test("rounds run every interval on the clock, and not while nothing is owned", async () => {
    supervise("lobby-1", "node-a", "RUNNING");
    reconciler.start();
    await clock.advanceAsync(intervalMs - 1);
    assert.deepEqual(queries, []);
    await clock.advanceAsync(1);
    await flush();
    assert.deepEqual(queries.sort(), ["node-a", "node-c"]);
    owns = false;
    await clock.advanceAsync(intervalMs);
    await flush();
    assert.equal(queries.length, 2, "no scope owned: no query");
    owns = true;
    await clock.advanceAsync(intervalMs);
    await flush();
    assert.equal(queries.length, 4);
    reconciler.stop();
    assert.equal(clock.pendingTimers(), 0, "no timer is left");
  });

  test("a request during a round is one more round after it, not an overlapping one", async () => {
    supervise("lobby-1", "node-a", "RUNNING");
    let open!: () => void;
    gate = new Promise((resolve) => (open = resolve));
    const first = reconciler.request();
    await flush();
    const second = reconciler.request();
    const third = reconciler.request();
    await flush();
    assert.deepEqual(queries.sort(), ["node-a", "node-c"], "the first round is still waiting for its answers");
    gate = null;
    open();
    await Promise.all([first, second, third]);
    assert.equal(reconciler.rounds, 2, "the requests made during the round are one round");
    assert.equal(queries.length, 4);
  });
});
