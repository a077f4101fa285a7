// The daemon report router alone: each daemon report becomes the instance actor events of
// docs/decisions/scheduler-host.md ("Daemon reports"), an inventory that lacks an instance ends it
// as LOST, and a report about an instance that is not live gets the process force-stopped.
import assert from "node:assert/strict";
import { beforeEach, describe, test } from "node:test";
import type { InstanceEvent } from "../../actors/instance/transitions.js";
import type { InstanceFields } from "../../src/domain/instances/instance-service.js";
import type { DaemonReport } from "../../src/gateway/daemon-gateway.js";
import { DaemonReportRouter, pendingCrashReportsMax, READY_CHAIN } from "../../src/scheduler/daemon-report-router.js";
import { LiveInstances } from "../../src/scheduler/live-instances.js";
import type { InstanceStateReport } from "../../src/wire/daemon-proto.js";
import { FakeClock } from "../support/fake-clock.js";
import { RecordingEventBus } from "../support/store-fixture.js";
import { flush, instanceRecord, recordingLogger } from "./support.js";

const START_MS = Date.parse("2026-02-01T10:00:00.000Z");

function stateReport(instanceId: string, state: string, extra: Partial<InstanceStateReport> = {}): InstanceStateReport {
  return {
    instance_id: instanceId,
    group: "lobby",
    state,
    fencing_token: 1,
    port: 30000,
    pid: 4242,
    exit_code: 0,
    message: "",
    timestamp_ms: START_MS,
    ...extra,
  };
}
const stateOf = (nodeId: string, report: InstanceStateReport): DaemonReport => ({
  nodeId,
  sessionId: "s1",
  message: { payload: "instance_state", instance_state: report },
});
const inventoryOf = (nodeId: string, reports: InstanceStateReport[]): DaemonReport => ({
  nodeId,
  sessionId: "s1",
  message: { payload: "inventory", inventory: { instances: reports } },
});

describe("daemon report router", () => {
  let clock: FakeClock;
  let live: LiveInstances;
  let records: Map<string, InstanceFields>;
  let supervised: Set<string>;
  let sent: string[];
  let strays: string[];
  let events: RecordingEventBus;
  let router: DaemonReportRouter;
  let lines: string[];

  beforeEach(() => {
    clock = new FakeClock(START_MS);
    live = new LiveInstances();
    records = new Map();
    supervised = new Set();
    sent = [];
    strays = [];
    lines = [];
    events = new RecordingEventBus();
    router = new DaemonReportRouter({
      live,
      instances: { getDoc: async (id: string) => (records.has(id) ? { ...records.get(id)!, _id: id } : null) } as never,
      events,
      logger: recordingLogger(),
      clock,
      console: { line: (id, line, stream) => void lines.push(`${id} ${stream} ${line}`) },
      isSupervised: (id) => supervised.has(id),
      toInstance: (id: string, event: InstanceEvent) => void sent.push(`${id} ${describeEvent(event)}`),
      forceStopStray: async (nodeId, instanceId, group) => void strays.push(`${nodeId} ${instanceId} ${group}`),
    });
  });

  /** A live instance supervised here (its actor runs here), on `node`, in `state`. */
  function supervise(id: string, node: string, state: InstanceFields["state"]): void {
    const record = instanceRecord({ id, group: "lobby", node, state });
    records.set(id, record);
    live.put(record);
    supervised.add(id);
  }

  test("each state report becomes the events of the table, earlier states first", () => {
    supervise("lobby-1", "node-a", "SCHEDULED");
    const table: [string, Partial<InstanceStateReport>, string[]][] = [
      ["PREPARING", {}, ["DISPATCHED"]],
      ["STARTING", {}, ["DISPATCHED", "SPAWNED"]],
      ["RUNNING", {}, READY_CHAIN.map(describeEvent)],
      ["STOPPING", {}, ["STOP"]],
      ["STOPPED", { exit_code: 0 }, ["EXITED 0"]],
      ["CRASHED", { exit_code: 137 }, ["EXITED 137"]],
      ["CRASHED", { exit_code: -1, message: "PREPARE_FAILED: template lobby-base missing" }, ["FAILED PREPARE_FAILED: template lobby-base missing"]],
      ["CRASHED", { exit_code: -1, message: "SPAWN_FAILED: ENOENT" }, ["FAILED SPAWN_FAILED: ENOENT"]],
    ];
    for (const [state, extra, expected] of table) {
      sent.length = 0;
      router.route(stateOf("node-a", stateReport("lobby-1", state, extra)));
      assert.deepEqual(
        sent,
        expected.map((e) => `lobby-1 ${e}`),
        `${state} ${extra.message ?? ""}`,
      );
    }
    assert.deepEqual(strays, []);
  });

  test("a live instance another controller follows: its reports are left to that controller", async () => {
    const record = instanceRecord({ id: "lobby-2", group: "lobby", node: "node-a", state: "RUNNING" });
    records.set(record.id, record);
    live.put(record);
    router.route(stateOf("node-a", stateReport("lobby-2", "STOPPING")));
    await flush();
    assert.deepEqual([sent, strays], [[], []]);
  });

  test("an instance that is not live here is force-stopped unless its record says it is live on that node", async () => {
    // Replaced while its node was away: the record is finished.
    records.set("lobby-old", instanceRecord({ id: "lobby-old", group: "lobby", node: "node-a", state: "CRASHED" }));
    router.route(stateOf("node-a", stateReport("lobby-old", "RUNNING")));
    // Unknown to the records (a leftover of a daemon restart).
    router.route(stateOf("node-b", stateReport("lobby-ghost", "STARTING", { group: "hub" })));
    // Live, but on another node than the one reporting it.
    supervise("lobby-3", "node-a", "RUNNING");
    router.route(stateOf("node-b", stateReport("lobby-3", "RUNNING")));
    // Live on that node per its record, though not in the live view yet (scope not adopted here).
    records.set("lobby-4", instanceRecord({ id: "lobby-4", group: "lobby", node: "node-a", state: "RUNNING" }));
    router.route(stateOf("node-a", stateReport("lobby-4", "RUNNING")));
    // An end is no process to stop.
    router.route(stateOf("node-a", stateReport("lobby-gone", "STOPPED")));
    router.route(stateOf("node-a", stateReport("lobby-gone", "CRASHED")));
    await flush();
    assert.deepEqual(strays.sort(), ["node-a lobby-old lobby", "node-b lobby-3 lobby", "node-b lobby-ghost hub"]);
    assert.deepEqual(sent, [], "no actor hears of them");
  });

  test("an inventory that lacks an instance ends it as LOST; SCHEDULED ones may still be on their way", async () => {
    supervise("lobby-run", "node-a", "RUNNING");
    supervise("lobby-prep", "node-a", "PREPARING");
    supervise("lobby-sched", "node-a", "SCHEDULED");
    supervise("lobby-stopping", "node-a", "STOPPING");
    supervise("lobby-kept", "node-a", "STARTING");
    supervise("lobby-other-node", "node-b", "RUNNING");
    clock.set(START_MS + 5_000);
    router.route(inventoryOf("node-a", [stateReport("lobby-kept", "RUNNING")]));
    await flush();
    assert.deepEqual(
      sent.sort(),
      [...READY_CHAIN.map((e) => `lobby-kept ${describeEvent(e)}`), "lobby-prep FAILED LOST", "lobby-run EXITED -1", "lobby-stopping EXITED -1"].sort(),
    );
    assert.deepEqual(router.takeCrashDetails("lobby-run"), { exitCode: -1, classification: "LOST", logTail: [], uptimeMs: 0, timestampMs: START_MS + 5_000 });
    assert.equal(router.takeCrashDetails("lobby-run"), undefined, "taken once");
    assert.equal(router.takeCrashDetails("lobby-stopping"), undefined, "a stop that ended is no crash");
  });

  test("a node's answer to the owner's query: what runs is routed, what is gone ends as the record and the daemon say", async () => {
    supervise("lobby-run", "node-a", "RUNNING");
    supervise("lobby-lost", "node-a", "RUNNING");
    supervise("lobby-prep", "node-a", "PREPARING");
    supervise("lobby-asked", "node-a", "RUNNING");
    records.set("lobby-asked", { ...records.get("lobby-asked")!, stopRequested: "FORCE_STOP" });
    supervise("lobby-draining", "node-a", "STOPPING");
    supervise("lobby-stopped", "node-a", "RUNNING");
    supervise("lobby-crashed", "node-a", "STARTING");
    supervise("lobby-booting", "node-a", "STARTING");
    supervise("lobby-sched", "node-a", "SCHEDULED");
    const asked = new Map([...supervised].map((id) => [id, live.get(id)!.state]));
    await router.reconcile(
      "node-a",
      [
        stateReport("lobby-run", "RUNNING"),
        stateReport("lobby-booting", "RUNNING"),
        stateReport("lobby-stopped", "STOPPED", { exit_code: 0 }),
        stateReport("lobby-crashed", "CRASHED", { exit_code: 3, message: "ERROR_EXIT" }),
        stateReport("lobby-stray", "RUNNING"),
      ],
      asked,
    );
    await flush();
    assert.deepEqual(
      sent.sort(),
      [
        ...READY_CHAIN.map((e) => `lobby-run ${describeEvent(e)}`),
        // A STARTING record whose process is ready: READY drives it RUNNING.
        ...READY_CHAIN.map((e) => `lobby-booting ${describeEvent(e)}`),
        "lobby-lost EXITED -1",
        "lobby-prep FAILED LOST",
        // A stop on the record: STOPPED, not CRASHED.
        "lobby-asked FORCE_STOP",
        "lobby-asked EXITED -1",
        "lobby-draining EXITED -1",
        // The daemon remembers a stop: STOPPED.
        "lobby-stopped STOP",
        "lobby-stopped EXITED 0",
        "lobby-crashed EXITED 3",
      ].sort(),
    );
    assert.equal(router.takeCrashDetails("lobby-lost")?.classification, "LOST");
    assert.deepEqual(router.takeCrashDetails("lobby-crashed"), { exitCode: 3, classification: "ERROR_EXIT", logTail: [], uptimeMs: 0, timestampMs: START_MS });
    assert.equal(router.takeCrashDetails("lobby-asked"), undefined, "a requested stop is no crash");
    assert.deepEqual(strays, ["node-a lobby-stray lobby"], "a process without a live record is force-stopped");
  });

  test("the owner's query and its races: SCHEDULED when asked, finished or moved since, or started again, are left alone", async () => {
    supervise("lobby-sched", "node-a", "SCHEDULED");
    supervise("lobby-finished", "node-a", "RUNNING");
    supervise("lobby-moved", "node-a", "RUNNING");
    supervise("lobby-again", "node-a", "RUNNING");
    supervise("lobby-unsupervised", "node-a", "RUNNING");
    const asked = new Map([...supervised].map((id) => [id, live.get(id)!.state]));
    // Between the query and the answer: the start went out, a final report arrived, the record moved,
    // a STATIC slot started again under its id, a scope was lost.
    live.setState("lobby-sched", "PREPARING");
    records.set("lobby-finished", { ...records.get("lobby-finished")!, state: "STOPPED" });
    records.set("lobby-moved", { ...records.get("lobby-moved")!, node: "node-b" });
    live.setState("lobby-again", "PREPARING");
    supervised.delete("lobby-unsupervised");
    await router.reconcile("node-a", [], asked);
    await flush();
    assert.deepEqual(sent, []);
    assert.deepEqual(strays, []);
  });

  test("an inventory that lacks an instance whose record holds a requested stop ends it STOPPED", async () => {
    supervise("lobby-asked", "node-a", "RUNNING");
    records.set("lobby-asked", { ...records.get("lobby-asked")!, stopRequested: "STOP" });
    router.route(inventoryOf("node-a", []));
    await flush();
    assert.deepEqual(sent, ["lobby-asked STOP", "lobby-asked EXITED -1"]);
    assert.equal(router.takeCrashDetails("lobby-asked"), undefined);
  });

  test("crash reports wait for their CRASHED state, bounded; console lines and cache status are passed on", () => {
    router.route({
      nodeId: "node-a",
      sessionId: "s1",
      message: {
        payload: "crash_report",
        crash_report: {
          instance_id: "lobby-1",
          group: "lobby",
          exit_code: 1,
          signal: "",
          classification: "",
          last_lines: ["boom"],
          uptime_ms: 1234,
          fencing_token: 1,
          timestamp_ms: 0,
        },
      },
    });
    assert.deepEqual(router.takeCrashDetails("lobby-1"), {
      exitCode: 1,
      classification: "ERROR_EXIT",
      logTail: ["boom"],
      uptimeMs: 1234,
      timestampMs: START_MS,
    });
    for (let i = 0; i <= pendingCrashReportsMax; i++) {
      router.route({
        nodeId: "node-a",
        sessionId: "s1",
        message: {
          payload: "crash_report",
          crash_report: {
            instance_id: `x-${i}`,
            group: "x",
            exit_code: 1,
            signal: "",
            classification: "OOM",
            last_lines: [],
            uptime_ms: 1,
            fencing_token: 1,
            timestamp_ms: 1,
          },
        },
      });
    }
    assert.equal(router.takeCrashDetails("x-0"), undefined, "the oldest was dropped");
    assert.equal(router.takeCrashDetails(`x-${pendingCrashReportsMax}`)?.classification, "OOM");

    router.route({
      nodeId: "node-a",
      sessionId: "s1",
      message: { payload: "console_line", console_line: { instance_id: "lobby-1", stream: "stdout", line: "Done (1.2s)!", timestamp_ms: 99, sequence: 1 } },
    });
    assert.deepEqual(lines, ["lobby-1 stdout Done (1.2s)!"]);
    assert.deepEqual(events.ofType("INSTANCE_CONSOLE_OUTPUT"), [{ instanceId: "lobby-1", line: "Done (1.2s)!", timestampMs: 99 }]);
    router.route({ nodeId: "node-a", sessionId: "s1", message: { payload: "cache_status", cache_status: { total_size_bytes: 2048, entry_count: 3 } } });
    assert.deepEqual(events.ofType("NODE_CACHE_STATUS"), [{ nodeId: "node-a", totalSizeBytes: 2048, timestamp: new Date(START_MS).toISOString() }]);
  });
});

function describeEvent(event: InstanceEvent): string {
  if (event.type === "EXITED") return `EXITED ${event.exitCode}`;
  if (event.type === "FAILED") return `FAILED ${event.reason}`;
  return event.type;
}
