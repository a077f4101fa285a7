// The reporter without processes: runner events in (from a scripted runner), stream messages out
// (to a sink the test connects and disconnects), time and timers from the fake clock.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { DaemonMessage, DaemonPayloads } from "../../src/wire/daemon-proto.js";
import { FakeClock } from "../support/fake-clock.js";
import { cacheStatusIntervalMs, finalReportsQueuedMax, InstanceReporter } from "../../src/daemon/instance-reports.js";
import type { CrashReport, InstanceSnapshot, RunnerEvent } from "../../src/daemon/instance-runner.js";
import type { SendOptions } from "../../src/daemon/gateway-client.js";
import type { TemplateCacheStatus } from "../../src/daemon/template-cache.js";

class ScriptedRunner {
  listener: ((event: RunnerEvent) => void) | null = null;
  live: InstanceSnapshot[] = [];
  tokens = new Map<string, number>();
  subscribe(listener: (event: RunnerEvent) => void): () => void {
    this.listener = listener;
    return () => (this.listener = null);
  }
  list(): InstanceSnapshot[] {
    return this.live;
  }
  highestFencingToken(group: string): number | undefined {
    return this.tokens.get(group);
  }
  emit(event: RunnerEvent): void {
    this.listener?.(event);
  }
}

class RecordingSink {
  connected = true;
  /** The stream buffer is full: droppable messages are refused. */
  busy = false;
  sent: DaemonMessage[] = [];
  options: (SendOptions | undefined)[] = [];
  send(message: DaemonMessage, options?: SendOptions): boolean {
    if (!this.connected || (this.busy && options?.droppable)) return false;
    this.sent.push(message);
    this.options.push(options);
    return true;
  }
  kinds(): string[] {
    return this.sent.map((m) => m.payload ?? "");
  }
  of<K extends keyof DaemonPayloads>(kind: K): DaemonPayloads[K][] {
    return this.sent.filter((m) => m.payload === kind).map((m) => (m as unknown as Record<K, DaemonPayloads[K]>)[kind]);
  }
}

function setup(cacheStatus?: () => TemplateCacheStatus) {
  const runner = new ScriptedRunner();
  const sink = new RecordingSink();
  const clock = new FakeClock(1_000_000);
  const dropped: number[] = [];
  const reporter = new InstanceReporter({ runner, sink, clock, cacheStatus, onFinalReportsDropped: (n) => void dropped.push(n) });
  return { runner, sink, clock, reporter, dropped };
}

const state = (instanceId: string, s: string, extra: Partial<Extract<RunnerEvent, { type: "state" }>> = {}): RunnerEvent =>
  ({ type: "state", instanceId, group: "lobby", state: s, previousState: null, timestampMs: 42, port: 25_565, ...extra }) as RunnerEvent;
const line = (instanceId: string, text: string): RunnerEvent => ({
  type: "console",
  instanceId,
  group: "lobby",
  line: text,
  stream: "stdout",
  timestampMs: 43,
});
const crash = (instanceId: string, extra: Partial<CrashReport> = {}): RunnerEvent => ({
  type: "crash",
  report: {
    instanceId,
    group: "lobby",
    exitCode: 3,
    signal: null,
    classification: "ERROR_EXIT",
    logTail: ["a", "b"],
    uptimeMs: 900,
    timestampMs: 44,
    ...extra,
  },
});

describe("instance reporter", () => {
  it("maps state events with the group's highest fencing token, port, pid and exit code", () => {
    const { runner, sink } = setup();
    runner.tokens.set("lobby", 7);
    runner.emit(state("i-1", "STARTING", { pid: 123 }));
    runner.emit(state("i-1", "STOPPED", { pid: 123, exitCode: 0 }));
    runner.emit(state("i-2", "STOPPED", { exitCode: null, signal: "SIGKILL" }));
    assert.deepEqual(sink.of("instance_state"), [
      { instance_id: "i-1", group: "lobby", state: "STARTING", fencing_token: 7, port: 25_565, pid: 123, exit_code: 0, message: "", timestamp_ms: 42 },
      { instance_id: "i-1", group: "lobby", state: "STOPPED", fencing_token: 7, port: 25_565, pid: 123, exit_code: 0, message: "", timestamp_ms: 42 },
      { instance_id: "i-2", group: "lobby", state: "STOPPED", fencing_token: 7, port: 25_565, pid: 0, exit_code: -1, message: "", timestamp_ms: 42 },
    ]);
  });

  it("sends crash_report before CRASHED, whose message is the classification and reason", () => {
    const { runner, sink } = setup();
    runner.tokens.set("lobby", 2);
    runner.emit(crash("i-1", { exitCode: null, signal: null, classification: "PREPARE_FAILED", reason: "GET /x failed: 404", uptimeMs: 0 }));
    runner.emit(state("i-1", "CRASHED", { exitCode: null }));
    assert.deepEqual(sink.kinds(), ["crash_report", "instance_state"]);
    assert.deepEqual(sink.of("crash_report")[0], {
      instance_id: "i-1",
      group: "lobby",
      exit_code: -1,
      signal: "",
      classification: "PREPARE_FAILED",
      last_lines: ["a", "b"],
      uptime_ms: 0,
      fencing_token: 2,
      timestamp_ms: 44,
    });
    assert.equal(sink.of("instance_state")[0]!.message, "PREPARE_FAILED: GET /x failed: 404");
    runner.emit(crash("i-2"));
    runner.emit(state("i-2", "CRASHED", { exitCode: 3 }));
    assert.equal(sink.of("instance_state")[1]!.message, "ERROR_EXIT");
  });

  it("numbers console lines per daemon, drops them while disconnected or when the stream is full, gaps showing it", () => {
    const { runner, sink, reporter } = setup();
    runner.emit(line("i-1", "one"));
    sink.connected = false;
    runner.emit(line("i-1", "lost"));
    sink.connected = true;
    sink.busy = true;
    runner.emit(line("i-2", "also lost"));
    sink.busy = false;
    runner.emit(line("i-2", "two"));
    assert.deepEqual(
      sink.of("console_line").map((l) => [l.instance_id, l.line, l.sequence]),
      [
        ["i-1", "one", 1],
        ["i-2", "two", 4],
      ],
    );
    assert.ok(sink.options.every((o) => o?.droppable === true));
    assert.equal(reporter.droppedConsoleLines, 2);
  });

  it("after a hello_ack: the inventory first, then the final reports kept while disconnected, in order", () => {
    const { runner, sink, reporter, clock } = setup();
    runner.tokens.set("lobby", 4);
    sink.connected = false;
    runner.emit(state("i-1", "RUNNING", { pid: 10 }));
    runner.emit(crash("i-2"));
    runner.emit(state("i-2", "CRASHED", { exitCode: 3 }));
    runner.emit(state("i-3", "STOPPED", { exitCode: 0 }));
    assert.equal(reporter.queuedFinalReports, 3);
    runner.live = [
      {
        instanceId: "i-1",
        group: "lobby",
        platform: "simulated",
        state: "RUNNING",
        port: 30_000,
        pid: 10,
        workDir: "/w",
        static: false,
        spawnedAtMs: 1,
        readyAtMs: 2,
      },
    ];
    sink.connected = true;
    reporter.sessionOpened();
    assert.deepEqual(sink.kinds(), ["inventory", "crash_report", "instance_state", "instance_state"]);
    assert.deepEqual(sink.of("inventory")[0]!.instances, [
      { instance_id: "i-1", group: "lobby", state: "RUNNING", fencing_token: 4, port: 30_000, pid: 10, exit_code: 0, message: "", timestamp_ms: clock.nowMs() },
    ]);
    assert.deepEqual(
      sink.of("instance_state").map((s) => [s.instance_id, s.state]),
      [
        ["i-2", "CRASHED"],
        ["i-3", "STOPPED"],
      ],
    );
    assert.equal(reporter.queuedFinalReports, 0);
  });

  it("keeps the queue when the session breaks before the inventory went out", () => {
    const { runner, sink, reporter } = setup();
    sink.connected = false;
    runner.emit(state("i-1", "STOPPED", { exitCode: 0 }));
    reporter.sessionOpened();
    assert.equal(reporter.queuedFinalReports, 1);
    sink.connected = true;
    runner.emit(state("i-2", "STOPPED", { exitCode: 0 }));
    assert.deepEqual(sink.sent, [], "a final report waits behind the queued ones");
    reporter.sessionOpened();
    assert.deepEqual(
      sink.of("instance_state").map((s) => s.instance_id),
      ["i-1", "i-2"],
    );
  });

  it(`keeps at most ${finalReportsQueuedMax} final reports, dropping the oldest`, () => {
    const { runner, sink, reporter, dropped } = setup();
    sink.connected = false;
    for (let i = 0; i < finalReportsQueuedMax + 5; i++) runner.emit(state(`i-${i}`, "STOPPED", { exitCode: 0 }));
    assert.equal(reporter.queuedFinalReports, finalReportsQueuedMax);
    assert.equal(reporter.droppedFinalReports, 5);
    assert.equal(
      dropped.reduce((a, b) => a + b, 0),
      5,
    );
    sink.connected = true;
    reporter.sessionOpened();
    const ids = sink.of("instance_state").map((s) => s.instance_id);
    assert.equal(ids.length, finalReportsQueuedMax);
    assert.equal(ids[0], "i-5");
    assert.equal(ids.at(-1), `i-${finalReportsQueuedMax + 4}`);
  });

  it(`sends cache_status when the size changed, at most once per ${cacheStatusIntervalMs} ms`, () => {
    let status: TemplateCacheStatus = { blobCount: 0, sizeBytes: 0, sizeBytesMax: 100 };
    const { sink, reporter, clock } = setup(() => status);
    reporter.sessionOpened();
    assert.deepEqual(sink.of("cache_status"), [{ total_size_bytes: 0, entry_count: 0 }], "one with every session");
    clock.advance(cacheStatusIntervalMs);
    reporter.cacheChanged();
    assert.equal(sink.of("cache_status").length, 1, "unchanged: nothing sent");
    status = { blobCount: 1, sizeBytes: 10, sizeBytesMax: 100 };
    reporter.cacheChanged();
    assert.equal(sink.of("cache_status").length, 2);
    status = { blobCount: 2, sizeBytes: 20, sizeBytesMax: 100 };
    reporter.cacheChanged();
    status = { blobCount: 3, sizeBytes: 30, sizeBytesMax: 100 };
    reporter.cacheChanged();
    assert.equal(sink.of("cache_status").length, 2, "within the interval: deferred");
    assert.equal(clock.pendingTimers(), 1);
    clock.advance(cacheStatusIntervalMs - 1);
    assert.equal(sink.of("cache_status").length, 2);
    clock.advance(1);
    assert.deepEqual(sink.of("cache_status").at(-1), { total_size_bytes: 30, entry_count: 3 }, "the latest status once the interval passed");
    assert.equal(sink.of("cache_status").length, 3);
    reporter.close();
    assert.equal(clock.pendingTimers(), 0);
  });
});
