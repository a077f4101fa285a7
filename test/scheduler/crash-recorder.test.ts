// The crash recorder alone, with the fake clock: a crash record from the daemon's crash report or
// from what the actor knows, INSTANCE_CRASHED, and crash loops counted only for the group's own
// failures within the window; a loop pauses the group and is announced.
import assert from "node:assert/strict";
import { beforeEach, describe, test } from "node:test";
import type { GroupEvent } from "../../actors/group/transitions.js";
import type { CrashReport } from "../../src/domain/crashes/crash-service.js";
import type { SchedulingIssue } from "../../src/domain/groups/group-schemas.js";
import type { InstanceState } from "../../src/domain/instances/instance-schemas.js";
import { classificationOfReason, CrashRecorder } from "../../src/scheduler/crash-recorder.js";
import type { CrashDetails } from "../../src/scheduler/daemon-report-router.js";
import { FakeClock } from "../support/fake-clock.js";
import { RecordingEventBus } from "../support/store-fixture.js";
import { recordingLogger } from "./support.js";

const START_MS = Date.parse("2026-03-01T08:00:00.000Z");
const ref = (n: number, group = "lobby") => ({ instanceId: `${group}-${n}`, group, node: "node-a" });

describe("crash recorder", () => {
  let clock: FakeClock;
  let events: RecordingEventBus;
  let recorded: CrashReport[];
  let details: Map<string, CrashDetails>;
  let told: { group: string; event: GroupEvent }[];
  let schedulingStates: string[];
  let crashLoops: number;
  let recorder: CrashRecorder;

  beforeEach(() => {
    clock = new FakeClock(START_MS);
    events = new RecordingEventBus();
    recorded = [];
    details = new Map();
    told = [];
    schedulingStates = [];
    crashLoops = 0;
    recorder = new CrashRecorder({
      crashes: { record: async (report: CrashReport) => (recorded.push(report), {} as never) },
      groups: {
        setSchedulingState: async (group, state) => (schedulingStates.push(`${group} ${JSON.stringify(state)}`), true),
        getDoc: async () => null,
      },
      events,
      metrics: { schedulerCrashLoops: { inc: () => void crashLoops++ } as never },
      clock,
      logger: recordingLogger(),
      crashLoop: { crashLoopThreshold: 3, crashLoopWindowMs: 60_000 },
      takeCrashDetails: (id) => {
        const d = details.get(id);
        details.delete(id);
        return d;
      },
      toGroup: (group, event) => void told.push({ group, event }),
    });
  });

  test("the daemon's crash report makes the record; without one the actor's cause does", async () => {
    details.set("lobby-1", { exitCode: 137, classification: "OOM_KILLED", logTail: ["Killed"], uptimeMs: 9_000, timestampMs: START_MS - 5 });
    await recorder.record(ref(1), { kind: "EXIT", exitCode: 137 });
    await recorder.record(ref(2), { kind: "EXIT", exitCode: 0 });
    clock.set(START_MS + 10);
    await recorder.record(ref(3), { kind: "FAILURE", reason: "TIMEOUT:startTimeout" });
    assert.deepEqual(
      recorded.map((r) => [r.instanceId, r.exitCode, r.classification, r.logTail, r.uptimeMs, r.timestampMs]),
      [
        ["lobby-1", 137, "OOM_KILLED", ["Killed"], 9_000, START_MS - 5],
        ["lobby-2", 0, "NORMAL_EXIT_UNEXPECTED", [], 0, START_MS],
        // A start that never ran has no output of its own: the reason is its log tail.
        ["lobby-3", -1, "TIMEOUT", ["[cloud] TIMEOUT: no progress within the startTimeout bound"], 0, START_MS + 10],
      ],
    );
    assert.deepEqual(events.ofType("INSTANCE_CRASHED")[0], {
      instanceId: "lobby-1",
      group: "lobby",
      nodeId: "node-a",
      exitCode: 137,
      classification: "OOM_KILLED",
      logTail: ["Killed"],
      uptimeMs: 9_000,
    });
    assert.equal(events.ofType("INSTANCE_CRASHED").length, 3);
  });

  test("a crash loop: threshold crashes within the window trip once; a lost node or process does not count", async () => {
    await recorder.record(ref(1), { kind: "EXIT", exitCode: 1 });
    await recorder.record(ref(2), { kind: "FAILURE", reason: "NODE_LOST" }, false);
    details.set("lobby-3", { exitCode: -1, classification: "LOST", logTail: [], uptimeMs: 0, timestampMs: START_MS });
    await recorder.record(ref(3), { kind: "EXIT", exitCode: -1 });
    await recorder.record(ref(4, "hub"), { kind: "EXIT", exitCode: 1 });
    await clock.advanceAsync(30_000);
    await recorder.record(ref(5), { kind: "EXIT", exitCode: 1 });
    assert.deepEqual(told, [], "two of lobby's own in the window");
    await clock.advanceAsync(30_001);
    await recorder.record(ref(6), { kind: "EXIT", exitCode: 1 });
    assert.deepEqual(told, [], "the first fell out of the window");
    await recorder.record(ref(7), { kind: "EXIT", exitCode: 1 });
    assert.deepEqual(told, [{ group: "lobby", event: { type: "CRASH_LOOP", crashCount: 3, windowStartMs: START_MS + 30_000 } }]);
    await recorder.record(ref(8), { kind: "EXIT", exitCode: 1 });
    assert.equal(told.length, 1, "tripping starts the window afresh");
  });

  test("reset: a resumed or deleted group starts counting afresh", async () => {
    await recorder.record(ref(1), { kind: "EXIT", exitCode: 1 });
    await recorder.record(ref(2), { kind: "EXIT", exitCode: 1 });
    recorder.reset("lobby");
    await recorder.record(ref(3), { kind: "EXIT", exitCode: 1 });
    assert.deepEqual(told, []);
  });

  test("the pause is written with the last crash's reason as the group's scheduling issue, counted and announced", async () => {
    details.set("lobby-3", {
      exitCode: 1,
      classification: "ERROR_EXIT",
      logTail: ["[Server] Starting", "Failed to bind to 0.0.0.0:28450: listen EADDRINUSE", ""],
      uptimeMs: 300,
      timestampMs: START_MS,
    });
    for (const n of [1, 2, 3]) await recorder.record(ref(n), { kind: "EXIT", exitCode: 1 });
    assert.equal(told.at(-1)?.event.type, "CRASH_LOOP");
    await recorder.pauseGroup("lobby", { crashCount: 3, windowStartMs: START_MS });
    assert.deepEqual(schedulingStates, [
      `lobby ${JSON.stringify({
        paused: true,
        schedulingIssue: {
          code: "CRASH_LOOP",
          message: "paused: 3 crashes within 60 s; the last: lobby-3 on node-a: ERROR_EXIT (exit 1): Failed to bind to 0.0.0.0:28450: listen EADDRINUSE",
          since: new Date(START_MS).toISOString(),
        },
      })}`,
    ]);
    assert.equal(crashLoops, 1);
    assert.deepEqual(events.ofType("GROUP_CRASH_LOOP"), [{ group: "lobby", crashCount: 3, windowStart: new Date(START_MS).toISOString() }]);
  });

  test("a pause after starts that never ran quotes the daemon's reason, not an empty log tail", async () => {
    for (const n of [1, 2, 3]) await recorder.record(ref(n), { kind: "FAILURE", reason: "PREPARE_FAILED: Unknown platform papr" });
    assert.equal(told.at(-1)?.event.type, "CRASH_LOOP");
    await recorder.pauseGroup("lobby", { crashCount: 3, windowStartMs: START_MS });
    const written = JSON.parse(schedulingStates.at(-1)!.slice("lobby ".length)) as { schedulingIssue: { message: string } };
    assert.match(
      written.schedulingIssue.message,
      /^paused: 3 crashes within 60 s; the last: lobby-3 on node-a: PREPARE_FAILED \(exit -1\): .*Unknown platform papr/,
    );
  });

  test("a failed start is the group's issue until an instance runs; a crash while running or a lost node is not; a crash-loop issue stays", async () => {
    let issue: SchedulingIssue | null = null;
    const starts = new CrashRecorder({
      crashes: { record: async () => ({}) as never },
      groups: {
        getDoc: async () => ({ schedulingIssue: issue }) as never,
        setSchedulingState: async (_group, state) => {
          if (state.schedulingIssue !== undefined) issue = state.schedulingIssue;
          const revised = state.reviseIssue?.(issue);
          if (revised !== undefined) issue = revised;
          return true;
        },
      },
      events,
      metrics: { schedulerCrashLoops: { inc: () => {} } as never },
      clock,
      logger: recordingLogger(),
      crashLoop: { crashLoopThreshold: 100, crashLoopWindowMs: 60_000 },
      takeCrashDetails: () => undefined,
      toGroup: () => {},
    });
    const change = (n: number, from: InstanceState, to: InstanceState) => ({ ...ref(n), from, to });
    // The crash is recorded in the actor's transition, before its CRASHED state is written.
    void starts.record(ref(1), { kind: "EXIT", exitCode: 1 });
    await starts.stateChanged(change(1, "RUNNING", "CRASHED"));
    void starts.record(ref(2), { kind: "FAILURE", reason: "NODE_LOST" }, false);
    await starts.stateChanged(change(2, "STARTING", "CRASHED"));
    assert.equal(issue, null, "a crash of a running instance and a lost node say nothing of starts");
    void starts.record(ref(3), { kind: "FAILURE", reason: "UNKNOWN_PLATFORM: Unknown platform papr" });
    await starts.stateChanged(change(3, "PREPARING", "CRASHED"));
    const since = new Date(START_MS).toISOString();
    assert.deepEqual(issue, {
      code: "START_FAILED",
      message: "the last start failed: lobby-3 on node-a: START_FAILED: UNKNOWN_PLATFORM: Unknown platform papr",
      since,
    });
    clock.set(START_MS + 5_000);
    void starts.record(ref(4), { kind: "EXIT", exitCode: 1 });
    await starts.stateChanged(change(4, "STARTING", "CRASHED"));
    assert.deepEqual(issue, { code: "START_FAILED", message: "the last start failed: lobby-4 on node-a: ERROR_EXIT: exit 1 without printing anything", since });
    await starts.stateChanged(change(5, "STARTING", "RUNNING"));
    assert.equal(issue, null, "an instance runs");
    issue = { code: "CRASH_LOOP", message: "paused", since };
    void starts.record(ref(6), { kind: "EXIT", exitCode: 1 });
    await starts.stateChanged(change(6, "STARTING", "CRASHED"));
    await starts.stateChanged(change(7, "STARTING", "RUNNING"));
    assert.deepEqual(issue, { code: "CRASH_LOOP", message: "paused", since }, "the pause's issue is neither replaced nor cleared");
  });

  test("classification of failures without an exit", () => {
    assert.deepEqual(
      ["NODE_LOST", "TIMEOUT:prepareTimeout", "PREPARE_FAILED: hash mismatch", "SPAWN_FAILED: ENOENT", "UNKNOWN_PLATFORM: x"].map(classificationOfReason),
      ["NODE_LOST", "TIMEOUT", "PREPARE_FAILED", "SPAWN_FAILED", "START_FAILED"],
    );
  });
});
