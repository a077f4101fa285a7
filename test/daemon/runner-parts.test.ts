// The instance runner's parts on their own: spec checks, fencing tokens, directory names, the
// instance environment, the stop sequence driven by hand-fired timers, crash reports, readiness
// lines, bounds and listeners. No processes; the runner with real processes is
// instance-runner.test.ts.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { PassThrough } from "node:stream";
import { instanceEnvironment } from "../../src/daemon/instance-environment.js";
import { exitCrashReport, failureCrashReport } from "../../src/daemon/instance-output.js";
import { FencingTokens, validateInstanceSpec, workDirectoryOf } from "../../src/daemon/instance-spec.js";
import { simulatedPlatform } from "../../src/daemon/platforms.js";
import { isReadyLine } from "../../src/daemon/readiness.js";
import { RunnerError, StaleEpochError } from "../../src/daemon/runner-errors.js";
import { RunnerListeners } from "../../src/daemon/runner-listeners.js";
import { resolveRunnerBounds } from "../../src/daemon/runner-options.js";
import type { InstanceSpec, RunnerEvent } from "../../src/daemon/runner-types.js";
import { FakeClock } from "../support/fake-clock.js";
import { InstanceTimers, runStopSequence } from "../../src/daemon/stop-sequence.js";

const spec: InstanceSpec = { instanceId: "lobby-1", group: "lobby", platform: "simulated", port: 25_565, memoryMb: 512, static: false, templates: [] };

function runnerErrorCode(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof RunnerError, `a RunnerError, got ${String(err)}`);
    return err.code;
  }
  assert.fail("expected a RunnerError");
}

/** Timers fired by hand on the fake clock, soonest first. */
function manualTimers() {
  const clock = new FakeClock();
  return { clock, fireNext: () => clock.advanceToNext() };
}

describe("runner parts: spec, fencing and directories", () => {
  it("accepts a valid spec and refuses unsafe names, ports and memory with INVALID_SPEC", () => {
    validateInstanceSpec(spec);
    for (const bad of [
      { instanceId: "../etc" },
      { instanceId: "a..b" },
      { instanceId: "-lead" },
      { group: "lob/by" },
      { group: "x".repeat(129) },
      { port: 0 },
      { port: 65_536 },
      { port: 1.5 },
      { memoryMb: 0 },
    ]) {
      assert.equal(
        runnerErrorCode(() => validateInstanceSpec({ ...spec, ...bad })),
        "INVALID_SPEC",
        JSON.stringify(bad),
      );
    }
  });

  it("places dynamic instances under dynamic/<id> and static ones under static/<group>/<id>", () => {
    assert.equal(workDirectoryOf("/srv/work", spec), "/srv/work/dynamic/lobby-1");
    assert.equal(workDirectoryOf("/srv/work", { ...spec, static: true }), "/srv/work/static/lobby/lobby-1");
  });

  it("fencing tokens: a lower token is STALE_EPOCH, equal and higher pass, per group", () => {
    const tokens = new FencingTokens();
    assert.equal(tokens.highestOf("lobby"), undefined);
    tokens.observe("lobby", 3);
    tokens.observe("lobby", 3);
    assert.throws(
      () => tokens.observe("lobby", 2),
      (err) => err instanceof StaleEpochError && err.highestFencingToken === 3,
    );
    tokens.observe("lobby", 7);
    assert.equal(tokens.highestOf("lobby"), 7);
    tokens.observe("game", 1);
    assert.equal(tokens.highestOf("game"), 1, "groups are independent");
    assert.equal(
      runnerErrorCode(() => tokens.observe("lobby", -1)),
      "INVALID_COMMAND",
    );
    assert.equal(
      runnerErrorCode(() => tokens.observe("lobby", 1.5)),
      "INVALID_COMMAND",
    );
    assert.equal(tokens.highestOf("lobby"), 7, "a refused token changes nothing");
  });
});

describe("runner parts: environment", () => {
  it("passes only the inherited names, then platform, spec and the runner's own variables", () => {
    const platform = { ...simulatedPlatform(), env: { JAVA_OPTS: "-Xss1m", CLOUD_PORT: "1" } };
    const env = instanceEnvironment({
      spec: { ...spec, env: { JAVA_OPTS: "-Xss2m" }, workloadToken: "wt-secret" },
      platform,
      daemonEnv: { PATH: "/usr/bin", SECRET: "daemon-only", HOME: "/home/d" },
      inheritEnvNames: ["PATH", "LANG"],
      controllerUrl: "http://127.0.0.1:8080",
    });
    assert.equal(env.PATH, "/usr/bin");
    assert.equal(env.SECRET, undefined, "the daemon's other variables stay behind");
    assert.equal(env.HOME, undefined);
    assert.equal(env.JAVA_OPTS, "-Xss2m", "the spec wins over the platform");
    assert.equal(env.CLOUD_PORT, "25565", "the runner's variables win over the platform's");
    assert.equal(env.CLOUD_INSTANCE_ID, "lobby-1");
    assert.equal(env.CLOUD_GROUP, "lobby");
    assert.equal(env.CLOUD_MEMORY_MB, "512");
    assert.equal(env.CLOUD_CONTROLLER_URL, "http://127.0.0.1:8080");
    assert.equal(env.CLOUD_WORKLOAD_TOKEN, "wt-secret");
  });

  it("the spec's controller URL wins; without any, no URL and no token are set", () => {
    const base = { platform: simulatedPlatform(), daemonEnv: {}, inheritEnvNames: [] };
    assert.equal(
      instanceEnvironment({ ...base, spec: { ...spec, controllerUrl: "http://10.0.0.2:8080" }, controllerUrl: "http://x" }).CLOUD_CONTROLLER_URL,
      "http://10.0.0.2:8080",
    );
    const bare = instanceEnvironment({ ...base, spec, controllerUrl: null });
    assert.equal("CLOUD_CONTROLLER_URL" in bare, false);
    assert.equal("CLOUD_WORKLOAD_TOKEN" in bare, false);
  });
});

describe("runner parts: stop sequence", () => {
  const platform = { stopCommand: "stop", stopTimeoutMs: 10_000, termTimeoutMs: 5_000 };

  it("graceful: stop command on stdin, SIGTERM after stopTimeoutMs, SIGKILL after termTimeoutMs more", () => {
    const t = manualTimers();
    const timers = new InstanceTimers(t.clock);
    const stdin = new PassThrough();
    const signals: string[] = [];
    runStopSequence({ mode: "graceful", platform, stdin, signalGroup: (s) => void signals.push(s), schedule: (ms, cb) => timers.schedule(ms, cb) });
    assert.equal(String(stdin.read()), "stop\n");
    assert.deepEqual(signals, [], "nothing is signalled before the stop timeout");
    assert.equal(t.fireNext(), 10_000);
    assert.deepEqual(signals, ["SIGTERM"]);
    assert.equal(t.fireNext(), 5_000);
    assert.deepEqual(signals, ["SIGTERM", "SIGKILL"]);
    assert.equal(timers.size, 0, "fired timers forget themselves");
  });

  it("without a stop command or an open stdin, SIGTERM at once; force is SIGKILL at once", () => {
    for (const variant of [
      { platform: { ...platform, stopCommand: null }, stdin: new PassThrough() },
      { platform, stdin: null },
    ]) {
      const t = manualTimers();
      const signals: string[] = [];
      runStopSequence({ mode: "graceful", ...variant, signalGroup: (s) => void signals.push(s), schedule: (ms, cb) => void t.clock.setTimeout(cb, ms) });
      assert.deepEqual(signals, ["SIGTERM"]);
      assert.equal(t.fireNext(), 5_000);
      assert.deepEqual(signals, ["SIGTERM", "SIGKILL"]);
    }
    const t = manualTimers();
    const signals: string[] = [];
    const stdin = new PassThrough();
    runStopSequence({ mode: "force", platform, stdin, signalGroup: (s) => void signals.push(s), schedule: (ms, cb) => void t.clock.setTimeout(cb, ms) });
    assert.deepEqual(signals, ["SIGKILL"]);
    assert.equal(stdin.read(), null, "no stop command on a forced stop");
    assert.equal(t.clock.pendingTimers(), 0);
  });

  it("InstanceTimers.clear cancels every armed timer", () => {
    const t = manualTimers();
    const timers = new InstanceTimers(t.clock);
    let fired = 0;
    timers.schedule(100, () => void (fired += 1));
    timers.schedule(200, () => void (fired += 1));
    assert.equal(timers.size, 2);
    timers.clear();
    assert.equal(timers.size, 0);
    assert.equal(t.clock.pendingTimers(), 0);
    assert.equal(fired, 0);
  });
});

describe("runner parts: crash reports, readiness, bounds, listeners", () => {
  it("an unexpected exit is classified from its facts; uptime runs from the spawn", () => {
    const oom = exitCrashReport({ spec, exitCode: null, signal: "SIGKILL", logTail: ["tick"], killSentByDaemon: false, spawnedAtMs: 1_000, nowMs: 4_500 });
    assert.deepEqual(oom, {
      instanceId: "lobby-1",
      group: "lobby",
      exitCode: null,
      signal: "SIGKILL",
      classification: "OUT_OF_MEMORY",
      logTail: ["tick"],
      uptimeMs: 3_500,
      timestampMs: 4_500,
    });
    const error = exitCrashReport({ spec, exitCode: 1, signal: null, logTail: [], killSentByDaemon: false, spawnedAtMs: null, nowMs: 10 });
    assert.equal(error.classification, "ERROR_EXIT");
    assert.equal(error.uptimeMs, 0, "never spawned: no uptime");
  });

  it("a failure before the process ran carries its reason and no exit status", () => {
    const report = failureCrashReport(spec, "PREPARE_FAILED", new Error("template lobby not found"), ["a"], 99);
    assert.deepEqual(report, {
      instanceId: "lobby-1",
      group: "lobby",
      exitCode: null,
      signal: null,
      classification: "PREPARE_FAILED",
      logTail: ["a"],
      uptimeMs: 0,
      timestampMs: 99,
      reason: "template lobby not found",
    });
    assert.equal(failureCrashReport(spec, "SPAWN_FAILED", "ENOENT", [], 1).reason, "ENOENT");
  });

  it("a log-line rule matches its substring literally; other rules match no line", () => {
    assert.equal(isReadyLine({ kind: "log-line", pattern: "Done (" }, "[12:00] Done (1.2s)! For help"), true);
    assert.equal(isReadyLine({ kind: "log-line", pattern: "Done (" }, "Done 1.2s"), false, "not a regular expression");
    assert.equal(isReadyLine({ kind: "plugin" }, "Done ("), false);
    assert.equal(isReadyLine({ kind: "port-open" }, "Done ("), false);
  });

  it("bounds: the documented defaults, each replaced by a given value", () => {
    const defaults = resolveRunnerBounds({ workDir: "/w", platforms: new Map() });
    assert.deepEqual(defaults, {
      consoleBufferLines: 500,
      crashLogTailLines: 50,
      consoleLineMaxChars: 8_192,
      stdinLineMaxChars: 4_096,
      portProbeIntervalMs: 250,
      stdioDrainTimeoutMs: 500,
      instancesMax: 2_000,
      listenersMax: 64,
      inheritEnvNames: ["PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "JAVA_HOME"],
    });
    assert.equal(resolveRunnerBounds({ workDir: "/w", platforms: new Map(), instancesMax: 3, inheritEnvNames: [] }).instancesMax, 3);
  });

  it("listeners: bounded, in order, a throwing one does not stop the others", () => {
    const listeners = new RunnerListeners(2);
    const seen: string[] = [];
    listeners.subscribe(() => {
      throw new Error("boom");
    });
    const off = listeners.subscribe((e) => void seen.push(e.type));
    assert.equal(
      runnerErrorCode(() => listeners.subscribe(() => undefined)),
      "INVALID_COMMAND",
    );
    const event: RunnerEvent = { type: "crash", report: failureCrashReport(spec, "SPAWN_FAILED", "x", [], 0) };
    listeners.emit(event);
    assert.deepEqual(seen, ["crash"]);
    off();
    listeners.subscribe(() => undefined);
    listeners.emit(event);
    assert.deepEqual(seen, ["crash"], "an unsubscribed listener receives nothing more");
  });
});
