// The instance runner with real child processes (the simulated game server) in temporary
// directories on ephemeral loopback ports. Every test closes its harness, which kills anything
// left and checks that every pid the runner reported is gone.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import { connect } from "node:net";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { Hono } from "hono";
import { serve, type ServerType } from "@hono/node-server";
import type { CrashReport, RunnerEvent, TemplateUnpackRequest } from "../../src/daemon/instance-runner.js";
import { simulatedPlatform } from "../../src/daemon/platforms.js";
import { RunnerError, StaleEpochError } from "../../src/daemon/runner-errors.js";
import { SpawnerLauncher, type LaunchedProcess, type ProcessLauncher } from "../../src/daemon/process-launcher.js";
import { RunnerHarness, SIM_TEST_ENV, isAlive, simSpec } from "./runner-harness.js";
import { eventually } from "../support/wait.js";
import { FakeClock } from "../support/fake-clock.js";

const harnesses: RunnerHarness[] = [];
async function harness(options: Parameters<typeof RunnerHarness.create>[0] = {}): Promise<RunnerHarness> {
  const created = await RunnerHarness.create(options);
  harnesses.push(created);
  return created;
}
after(async () => {
  for (const created of harnesses) await created.close();
});

function crashOf(h: RunnerHarness, instanceId: string): CrashReport {
  const event = h.events.find((e): e is Extract<RunnerEvent, { type: "crash" }> => e.type === "crash" && e.report.instanceId === instanceId);
  assert.ok(event, `crash report for ${instanceId}`);
  return event.report;
}

async function statusLine(port: number): Promise<string> {
  return await new Promise((resolve, reject) => {
    const socket = connect({ host: "127.0.0.1", port });
    let text = "";
    socket.on("data", (chunk) => (text += chunk.toString()));
    socket.on("end", () => resolve(text));
    socket.on("error", reject);
  });
}

describe("instance runner", { timeout: 55_000 }, () => {
  it("starts to RUNNING on the log line, streams console, takes stdin and stops with the stop command", async () => {
    const h = await harness();
    const spec = await simSpec("lobby-1");
    const snapshot = h.runner.start(spec, 1);
    assert.equal(snapshot.state, "PREPARING");
    await h.waitForState("lobby-1", "RUNNING");
    assert.deepEqual(h.states("lobby-1"), ["PREPARING", "STARTING", "RUNNING"]);
    const running = h.runner.snapshot("lobby-1");
    assert.ok(running.pid !== null && isAlive(running.pid));
    assert.ok(existsSync(running.workDir));
    assert.match(await statusLine(spec.port), /^SIMULATED lobby-1 group=lobby players=0\/100/);

    const consoleEvent = h.events.find((e) => e.type === "console" && e.line.includes("Starting simulated game server"));
    assert.ok(consoleEvent && consoleEvent.type === "console" && consoleEvent.timestampMs > 0 && consoleEvent.stream === "stdout");
    await h.waitForLine("lobby-1", "[tick]");

    h.runner.writeStdin("lobby-1", "say hello", 1);
    await h.waitForLine("lobby-1", "[Server] hello");
    assert.ok(h.runner.consoleTail("lobby-1").some((entry) => entry.line.includes("[Server] hello")));

    const exit = await h.runner.stop("lobby-1", 1);
    assert.equal(exit.state, "STOPPED");
    assert.equal(exit.exitCode, 0);
    assert.ok(h.consoleLines("lobby-1").some((line) => line.includes("Stopping server (stop command)")));
    assert.deepEqual(h.states("lobby-1"), ["PREPARING", "STARTING", "RUNNING", "STOPPING", "STOPPED"]);
    assert.ok(!isAlive(running.pid));
    assert.ok(!existsSync(running.workDir), "dynamic working directory removed");
    assert.throws(
      () => h.runner.snapshot("lobby-1"),
      (error: RunnerError) => error.code === "UNKNOWN_INSTANCE",
    );
  });

  it("refuses a start whose port a live instance holds (PORT_IN_USE) or whose memory would pass maxMemoryMb (INSUFFICIENT_MEMORY); nothing starts", async () => {
    const h = await harness({ maxMemoryMb: 1000 });
    const first = await simSpec("cap-1", { memoryMb: 600 });
    h.runner.start(first, 1);
    await h.waitForState("cap-1", "RUNNING");
    assert.throws(
      () => h.runner.start({ ...first, instanceId: "cap-2", memoryMb: 100 }, 1),
      (error: RunnerError) => error.code === "PORT_IN_USE" && /Port \d+ is used by cap-1/.test(error.message),
    );
    const third = await simSpec("cap-3", { memoryMb: 401 });
    assert.throws(
      () => h.runner.start(third, 1),
      (error: RunnerError) =>
        error.code === "INSUFFICIENT_MEMORY" && error.message === "cap-3 needs 401 MB: 600 of 1000 MB are taken by live instances on this node",
    );
    assert.deepEqual(h.states("cap-2"), [], "a refused start reports nothing");
    assert.deepEqual(h.states("cap-3"), []);
    // Exactly the budget is allowed, and a port or memory freed by a stop is given again.
    h.runner.start(await simSpec("cap-4", { memoryMb: 400 }), 1);
    await h.runner.forceStop("cap-1", 1);
    h.runner.start({ ...first, instanceId: "cap-5" }, 1);
    await h.waitForState("cap-5", "RUNNING");
    await h.runner.forceStop("cap-4", 1);
    await h.runner.forceStop("cap-5", 1);
  });

  it("plugin readiness: the server calls /api/plugin/ready with its workload token; markReady makes it RUNNING", async () => {
    const received: { instanceId: string; authorization: string | undefined }[] = [];
    let h!: RunnerHarness;
    const app = new Hono();
    app.post("/api/plugin/ready", async (c) => {
      const authorization = c.req.header("authorization");
      const token = authorization?.replace(/^Bearer /, "") ?? "";
      const instanceId = token.replace(/^token-/, "");
      received.push({ instanceId, authorization });
      await c.req.json();
      h.runner.markReady(instanceId, 7);
      return c.json({ ok: true });
    });
    const server = await new Promise<ServerType>((resolve) => {
      const s = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, () => resolve(s));
    });
    try {
      const address = server.address();
      const port = typeof address === "object" && address !== null ? address.port : 0;
      h = await harness({ controllerUrl: `http://127.0.0.1:${port}` });
      h.runner.start(await simSpec("proxy-1", { group: "proxy", platform: "simulated", workloadToken: "token-proxy-1" }), 7);
      await h.waitForState("proxy-1", "RUNNING");
      assert.deepEqual(received, [{ instanceId: "proxy-1", authorization: "Bearer token-proxy-1" }]);
      assert.ok(h.consoleLines("proxy-1").some((line) => line.includes("Reported ready")) || received.length === 1);
      assert.ok(!h.consoleLines("proxy-1").some((line) => line.includes("token-proxy-1")), "the token is never printed");
      await h.runner.stop("proxy-1", 7);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it("plugin readiness that arrives before the launcher passed the pid over makes the instance RUNNING once it has", async () => {
    let h!: RunnerHarness;
    const refusedWhilePreparing: string[] = [];
    const app = new Hono();
    app.post("/api/plugin/ready", async (c) => {
      await c.req.json();
      // As the controller does: a daemon answering INVALID_STATE is not asked again.
      try {
        h.runner.markReady("early-1", 3);
      } catch (err) {
        if (!(err instanceof RunnerError) || err.code !== "INVALID_STATE") throw err;
        refusedWhilePreparing.push(err.message);
      }
      return c.json({ ok: true });
    });
    const server = await new Promise<ServerType>((resolve) => {
      const s = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, () => resolve(s));
    });
    try {
      const address = server.address();
      const port = typeof address === "object" && address !== null ? address.port : 0;
      const spawner = new SpawnerLauncher();
      // The pid (and the spawn event) reach the runner well after the process runs and calls.
      const lateSpawn: ProcessLauncher = {
        launch: (request) => {
          const child = spawner.launch(request);
          const late = Object.create(child) as LaunchedProcess;
          late.once = ((event: string, listener: (...args: unknown[]) => void) => {
            if (event === "spawn") child.once("spawn", () => setTimeout(listener, 2_000));
            else child.once(event as "exit", listener);
            return late;
          }) as LaunchedProcess["once"];
          return late;
        },
        close: () => spawner.close(),
      };
      h = await harness({ controllerUrl: `http://127.0.0.1:${port}`, launcher: lateSpawn });
      h.runner.start(await simSpec("early-1", { group: "proxy", platform: "simulated", workloadToken: "token-early-1" }), 3);
      await h.waitForState("early-1", "RUNNING");
      assert.deepEqual(refusedWhilePreparing, [], "the early readiness was kept, not refused");
      assert.deepEqual(h.states("early-1"), ["PREPARING", "STARTING", "RUNNING"]);
      await h.runner.stop("early-1", 3);
      await spawner.close();
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it("without a plugin call a plugin-readiness instance stays STARTING; port-open readiness probes the port", async () => {
    const h = await harness({ extraPlatforms: [simulatedPlatform({ id: "sim-port", readiness: { kind: "port-open" } })], portProbeIntervalMs: 50 });
    h.runner.start(await simSpec("plugin-wait", { platform: "simulated" }), 1);
    h.runner.start(await simSpec("port-1", { platform: "sim-port", env: { ...SIM_TEST_ENV, CLOUD_SIM_STARTUP_DELAY_MS: "300" } }), 1);
    await h.waitForState("port-1", "RUNNING");
    await h.waitForLine("plugin-wait", "Done (");
    assert.equal(h.runner.snapshot("plugin-wait").state, "STARTING");
    h.runner.markReady("port-1", 1); // already RUNNING: nothing to do
    assert.equal(h.runner.snapshot("port-1").state, "RUNNING");
    await Promise.all([h.runner.stop("plugin-wait", 1), h.runner.stop("port-1", 1)]);
  });

  it("a process ignoring stop gets SIGTERM after stopTimeoutMs, then SIGKILL after termTimeoutMs", async () => {
    const h = await harness();
    h.runner.start(await simSpec("stubborn", { platform: "sim-fast-stop", env: { ...SIM_TEST_ENV, CLOUD_SIM_IGNORE_STOP: "true" } }), 1);
    await h.waitForState("stubborn", "RUNNING");
    const startedMs = Date.now();
    const exit = await h.runner.stop("stubborn", 1);
    const elapsedMs = Date.now() - startedMs;
    assert.equal(exit.state, "STOPPED");
    assert.equal(exit.signal, "SIGKILL");
    assert.ok(elapsedMs >= 550, `escalation waited both bounds (${elapsedMs} ms)`);
    assert.ok(elapsedMs < 5_000, `escalation bounded (${elapsedMs} ms)`);
    const lines = h.consoleLines("stubborn");
    assert.ok(lines.some((line) => line.includes("Ignoring stop")));
    assert.ok(lines.some((line) => line.includes("Ignoring SIGTERM")));
  });

  it("the escalation runs on the injected timers: nothing happens until they fire, and they are cleared on exit", async () => {
    const clock = new FakeClock(Date.now());
    const h = await harness({
      clock,
      extraPlatforms: [
        simulatedPlatform({ id: "sim-slow-stop", readiness: { kind: "log-line", pattern: "Done (" }, stopTimeoutMs: 60_000, termTimeoutMs: 30_000 }),
      ],
    });
    h.runner.start(await simSpec("manual", { platform: "sim-slow-stop", env: { ...SIM_TEST_ENV, CLOUD_SIM_IGNORE_STOP: "true" } }), 1);
    await h.waitForState("manual", "RUNNING");
    const exit = h.runner.stop("manual", 1);
    await h.waitForLine("manual", "Ignoring stop");
    assert.deepEqual(clock.pendingDelaysMs(), [60_000]);
    assert.ok(!h.consoleLines("manual").some((line) => line.includes("SIGTERM")), "no SIGTERM before the stop timeout fires");
    clock.advance(60_000);
    await h.waitForLine("manual", "Ignoring SIGTERM");
    assert.deepEqual(clock.pendingDelaysMs(), [30_000]);
    clock.advance(30_000);
    const result = await exit;
    assert.equal(result.signal, "SIGKILL");
    assert.deepEqual(clock.pendingDelaysMs(), [], "every timer cleared or fired");
  });

  it("force-stop kills at once", async () => {
    const h = await harness();
    h.runner.start(await simSpec("victim"), 1);
    await h.waitForState("victim", "RUNNING");
    const startedMs = Date.now();
    const exit = await h.runner.forceStop("victim", 1);
    assert.ok(Date.now() - startedMs < 2_000);
    assert.equal(exit.state, "STOPPED");
    assert.equal(exit.signal, "SIGKILL");
    assert.equal(exit.crash, null);
    assert.ok(!h.consoleLines("victim").some((line) => line.includes("Stopping server")), "no graceful stop");
  });

  it("a process killed from outside is CRASHED with a crash report and its log tail", async () => {
    const h = await harness();
    h.runner.start(await simSpec("killed"), 1);
    h.runner.start(await simSpec("terminated"), 1);
    await h.waitForState("killed", "RUNNING");
    await h.waitForState("terminated", "RUNNING");
    process.kill(h.runner.snapshot("killed").pid!, "SIGKILL");
    process.kill(h.runner.snapshot("terminated").pid!, "SIGTERM");
    await h.waitForState("killed", "CRASHED");
    await h.waitForState("terminated", "CRASHED");

    const killed = crashOf(h, "killed");
    assert.equal(killed.signal, "SIGKILL");
    assert.equal(killed.exitCode, null);
    assert.equal(killed.classification, "OUT_OF_MEMORY", "an unrequested SIGKILL looks like the OOM killer");
    assert.ok(killed.logTail.some((line) => line.includes("Done (")));
    assert.ok(killed.uptimeMs > 0);
    assert.equal(killed.group, "lobby");

    const terminated = crashOf(h, "terminated");
    assert.equal(terminated.exitCode, 0);
    assert.equal(terminated.classification, "NORMAL_EXIT_UNEXPECTED");
    assert.ok(terminated.logTail.some((line) => line.includes("Stopping server (SIGTERM)")));
  });

  it("crash 3 exits with code 3; oom is classified OUT_OF_MEMORY", async () => {
    const h = await harness({ crashLogTailLines: 5 });
    h.runner.start(await simSpec("crasher"), 1);
    h.runner.start(await simSpec("oomer"), 1);
    await h.waitForState("crasher", "RUNNING");
    await h.waitForState("oomer", "RUNNING");
    h.runner.writeStdin("crasher", "crash 3", 1);
    h.runner.writeStdin("oomer", "oom", 1);
    await h.waitForState("crasher", "CRASHED");
    await h.waitForState("oomer", "CRASHED");

    const crash = crashOf(h, "crasher");
    assert.equal(crash.exitCode, 3);
    assert.equal(crash.classification, "ERROR_EXIT");
    assert.ok(crash.logTail.length <= 5);
    assert.ok(crash.logTail.at(-1)?.includes("Simulated crash, exiting with code 3"));

    const oom = crashOf(h, "oomer");
    assert.equal(oom.classification, "OUT_OF_MEMORY");
    assert.equal(oom.signal, "SIGKILL");
    assert.ok(oom.logTail.some((line) => line.includes("java.lang.OutOfMemoryError")));
    const crashedEvent = h.events.find((e) => e.type === "state" && e.instanceId === "oomer" && e.state === "CRASHED");
    assert.ok(crashedEvent && crashedEvent.type === "state" && crashedEvent.signal === "SIGKILL");
  });

  it("refuses a fencing token lower than the highest seen for the group with STALE_EPOCH", async () => {
    const h = await harness();
    h.runner.start(await simSpec("fenced-1"), 5);
    await h.waitForState("fenced-1", "RUNNING");
    const isStale = (error: unknown) => error instanceof StaleEpochError && error.code === "STALE_EPOCH" && error.highestFencingToken === 5;
    assert.throws(() => h.runner.stop("fenced-1", 4), isStale);
    assert.throws(() => h.runner.forceStop("fenced-1", 4), isStale);
    assert.throws(() => h.runner.writeStdin("fenced-1", "say stale", 4), isStale);
    assert.throws(() => h.runner.markReady("fenced-1", 4), isStale);
    const spec2 = await simSpec("fenced-2");
    assert.throws(() => h.runner.start(spec2, 3), isStale);
    assert.equal(h.runner.list().length, 1, "the refused start left nothing behind");
    assert.equal(h.runner.snapshot("fenced-1").state, "RUNNING", "refused commands had no effect");

    h.runner.writeStdin("fenced-1", "say epoch 6", 6);
    await h.waitForLine("fenced-1", "[Server] epoch 6");
    assert.equal(h.runner.highestFencingToken("lobby"), 6);
    assert.throws(
      () => h.runner.writeStdin("fenced-1", "say old", 5),
      (error: unknown) => error instanceof StaleEpochError,
    );
    // Other groups keep their own epochs.
    h.runner.observeFencingToken("other", 1);
    assert.throws(
      () => h.runner.observeFencingToken("lobby", -1),
      (error: RunnerError) => error.code === "INVALID_COMMAND",
    );
    await h.runner.stop("fenced-1", 6);
  });

  it("a static working directory persists across starts; the unpacker gets the layers in order", async () => {
    const requests: Omit<TemplateUnpackRequest, "signal">[] = [];
    const h = await harness({
      unpackTemplates: async ({ signal: _signal, ...request }) => {
        requests.push(request);
        if (request.freshDirectory) await writeFile(join(request.workDir, "world.dat"), "seed=1\n");
      },
    });
    const templates = [
      { name: "base", hash: "aaa" },
      { name: "survival", hash: "bbb" },
    ];
    const spec = await simSpec("survival-1", { group: "survival", static: true, templates, variables: { motd: "Survival" } });
    h.runner.start(spec, 1);
    await h.waitForState("survival-1", "RUNNING");
    const workDir = h.runner.snapshot("survival-1").workDir;
    assert.equal(workDir, join(h.workDir, "static", "survival", "survival-1"));
    await writeFile(join(workDir, "world.dat"), "seed=1\nplayed=yes\n");
    await h.runner.stop("survival-1", 1);
    assert.equal(await readFile(join(workDir, "world.dat"), "utf8"), "seed=1\nplayed=yes\n");

    const secondPort = (await simSpec("x")).port;
    h.runner.start({ ...spec, port: secondPort }, 1);
    await eventually(() => h.states("survival-1").filter((state) => state === "RUNNING").length === 2, "the second start to be RUNNING", 15_000);
    assert.deepEqual(
      requests.map((r) => [r.instanceId, r.freshDirectory, r.templates.map((t) => t.name)]),
      [
        ["survival-1", true, ["base", "survival"]],
        ["survival-1", false, ["base", "survival"]],
      ],
    );
    // The template's variables plus the instance's own facts (README: {{instanceId}}, {{group}},
    // {{port}}, {{memoryMb}}, {{platform}}), the port of each start.
    const facts = { instanceId: "survival-1", group: "survival", memoryMb: String(spec.memoryMb), platform: spec.platform };
    assert.deepEqual(requests[0].variables, { motd: "Survival", ...facts, port: String(spec.port) });
    assert.deepEqual(requests[1].variables, { motd: "Survival", ...facts, port: String(secondPort) });
    assert.equal(await readFile(join(workDir, "world.dat"), "utf8"), "seed=1\nplayed=yes\n", "data survives a restart");
    await h.runner.stop("survival-1", 1);
    assert.ok(existsSync(workDir));
  });

  it("file port passing patches the properties file the templates left, after unpacking", async () => {
    const h = await harness({
      extraPlatforms: [
        simulatedPlatform({
          id: "sim-file-port",
          portPassing: "file",
          portFile: { path: "server.properties", key: "server-port" },
          readiness: { kind: "log-line", pattern: "Done (" },
        }),
      ],
      unpackTemplates: async ({ workDir }) => writeFile(join(workDir, "server.properties"), "motd=Welcome\nserver-port=25565\n"),
    });
    const spec = await simSpec("props-1", { platform: "sim-file-port", static: true });
    h.runner.start(spec, 1);
    await h.waitForState("props-1", "RUNNING");
    const workDir = h.runner.snapshot("props-1").workDir;
    assert.equal(await readFile(join(workDir, "server.properties"), "utf8"), `motd=Welcome\nserver-port=${spec.port}\n`);
    await h.runner.stop("props-1", 1);
  });

  it("a failing unpacker or a missing binary is CRASHED with PREPARE_FAILED / SPAWN_FAILED; a stop while preparing is STOPPED", async () => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const h = await harness({
      extraPlatforms: [{ ...simulatedPlatform({ id: "missing-binary" }), command: ["/nonexistent/definitely-not-here"] }],
      unpackTemplates: async ({ instanceId, signal }) => {
        if (instanceId === "bad-template") throw new Error("template base@abc not found");
        if (instanceId === "slow-template") {
          await Promise.race([held, new Promise((_, reject) => signal.addEventListener("abort", () => reject(new Error("aborted"))))]);
        }
      },
    });
    h.runner.start(await simSpec("bad-template"), 1);
    h.runner.start(await simSpec("no-binary", { platform: "missing-binary" }), 1);
    h.runner.start(await simSpec("slow-template"), 1);
    await h.waitForState("bad-template", "CRASHED");
    await h.waitForState("no-binary", "CRASHED");
    assert.equal(crashOf(h, "bad-template").classification, "PREPARE_FAILED");
    assert.match(crashOf(h, "bad-template").reason ?? "", /template base@abc not found/);
    assert.equal(crashOf(h, "no-binary").classification, "SPAWN_FAILED");
    assert.deepEqual(h.states("no-binary"), ["PREPARING", "CRASHED"]);

    const exit = await h.runner.stop("slow-template", 1);
    release();
    assert.equal(exit.state, "STOPPED");
    assert.deepEqual(h.states("slow-template"), ["PREPARING", "STOPPING", "STOPPED"]);
  });

  it("refuses bad input with typed errors and stops everything on shutdown", async () => {
    const h = await harness();
    const codeOf = (fn: () => unknown) => {
      try {
        fn();
      } catch (error) {
        return (error as RunnerError).code;
      }
      return "none";
    };
    const awaitedSpec = await simSpec("shutdown-1");
    assert.equal(
      codeOf(() => h.runner.start({ ...awaitedSpec, instanceId: "../escape" }, 1)),
      "INVALID_SPEC",
    );
    assert.equal(
      codeOf(() => h.runner.start({ ...awaitedSpec, platform: "bedrock" }, 1)),
      "UNKNOWN_PLATFORM",
    );
    assert.equal(
      codeOf(() => h.runner.stop("nobody", 1)),
      "UNKNOWN_INSTANCE",
    );

    h.runner.start(awaitedSpec, 1);
    h.runner.start(await simSpec("shutdown-2"), 1);
    assert.equal(
      codeOf(() => h.runner.start(awaitedSpec, 1)),
      "INSTANCE_EXISTS",
    );
    await h.waitForState("shutdown-1", "RUNNING");
    assert.equal(
      codeOf(() => h.runner.writeStdin("shutdown-1", "say a\nstop", 1)),
      "INVALID_COMMAND",
    );
    const pids = h.runner
      .list()
      .map((s) => s.pid)
      .filter((pid): pid is number => pid !== null);
    await h.runner.shutdown();
    assert.equal(h.runner.list().length, 0);
    assert.ok(pids.every((pid) => !isAlive(pid)));
    assert.equal(
      codeOf(() => h.runner.start(awaitedSpec, 1)),
      "RUNNER_SHUT_DOWN",
    );
  });
});
