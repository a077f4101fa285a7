// Start-to-running benchmark, two modes.
//
// --mode system (default): the whole system. A controller in this process (HTTP and gRPC on
// 127.0.0.1) and ONE real `cloud-daemon` child process joined with a node token; a DYNAMIC group of
// the `simulated` platform with min = max = N (default 500) is created over the REST API, and the
// scheduler places, records and dispatches every instance; the daemon spawns the simulated game
// servers, which report ready through /api/plugin/ready. Measured from the group's creation: the
// time until all N are RUNNING (as recorded: INSTANCE_STATE_CHANGED on the controller's event bus)
// and per instance SCHEDULED → RUNNING (p50/p99/max), with the phases in between. Then the daemon
// is stopped with SIGTERM (graceful stop of every server) and no server process may be left.
//
// --mode runner: the daemon's instance runner alone (no controller, no daemon stream): N instances
// of `simulated-standalone` (ready on the `Done (` console line) started at once.
//
//   npx tsx scripts/bench/start-to-running.ts [--mode system|runner] [--instances 500] [--deadline-ms 120000]
//     system only: [--memory-mb 32] [--port-start 24000] [--daemon-heap-mb 2048]
//                  [--controller-cpu-prof <dir>] [--daemon-cpu-prof <dir>]
//
// Prints a table and one machine-readable line (prefix `RESULT `).
import { spawn, type ChildProcess } from "node:child_process";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { mkdtemp, mkdir, rm } from "node:fs/promises";
import { createServer, type Server } from "node:net";
import { loadavg, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { performance } from "node:perf_hooks";
import { stringify as toYaml } from "yaml";
import { InstanceRunner } from "../../src/daemon/instance-runner.js";
import { SpawnerLauncher } from "../../src/daemon/process-launcher.js";
import { systemClock } from "../../src/shared/clock.js";
import { defaultSchedulerTuning } from "../../src/scheduler/scheduler-host.js";
import { builtInPlatforms } from "../../src/daemon/platforms.js";
import {
  argNumber,
  argString,
  createNodeToken,
  InstanceTracker,
  mib,
  monitorLoopDelay,
  nodesConnected,
  ownCpuSeconds,
  percentile,
  printTable,
  processCpuSeconds,
  progress,
  processPssMib,
  processRssMib,
  spread,
  startBenchController,
  startCpuProfile,
  statesOfInstances,
  uptimeLine,
} from "./system-bench-support.js";

const ROOT_DIR = join(import.meta.dirname, "..", "..");
const mode = argString("--mode", "system");
const instancesCount = argNumber("--instances", 500);
const deadlineMs = argNumber("--deadline-ms", 120_000);
/** scheduler.maxStartingPerNode for the benchmark's controller; absent: the controller's default. */
const maxStartingPerNode = process.argv.includes("--max-starting-per-node") ? argNumber("--max-starting-per-node", 0) : undefined;
/** How long the daemon gets to stop every server after SIGTERM before it is killed. */
const daemonStopTimeoutMs = 60_000;

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

// ---------------------------------------------------------------------------------------------
// --mode runner

/** Distinct free loopback ports: hold them all open at once, then release them. */
async function freePorts(count: number): Promise<number[]> {
  const servers: Server[] = [];
  const ports: number[] = [];
  for (let i = 0; i < count; i += 1) {
    const server = createServer();
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, "127.0.0.1", () => resolve());
    });
    const address = server.address();
    ports.push(typeof address === "object" && address !== null ? address.port : 0);
    servers.push(server);
  }
  await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
  return ports;
}

async function runRunnerMode(): Promise<void> {
  const fencingToken = 1;
  const workDir = await mkdtemp(join(tmpdir(), "bench-start-to-running-"));
  // As the daemon does: processes are started through the spawner helpers.
  const launcher = new SpawnerLauncher();
  const runner = new InstanceRunner({ workDir, platforms: builtInPlatforms(), clock: { ...systemClock, nowMs: () => performance.now() }, launcher });
  const onSignal = () => {
    runner.killAllNow();
    process.exit(130);
  };
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);

  const startCommandMs = new Map<string, number>();
  const runningMs = new Map<string, number>();
  const spawnedMs = new Map<string, number>();
  const crashed: string[] = [];
  const pids = new Set<number>();
  let allRunning!: () => void;
  const allRunningPromise = new Promise<void>((resolve) => (allRunning = resolve));
  runner.subscribe((event) => {
    if (event.type !== "state") return;
    if (event.pid !== undefined) pids.add(event.pid);
    if (event.state === "STARTING") spawnedMs.set(event.instanceId, event.timestampMs);
    if (event.state === "RUNNING") {
      runningMs.set(event.instanceId, event.timestampMs);
      if (runningMs.size === instancesCount) allRunning();
    }
    if (event.state === "CRASHED") crashed.push(event.instanceId);
  });

  const uptimeBefore = uptimeLine();
  const loadBefore = loadavg()[0]!;
  const ports = await freePorts(instancesCount);
  const startedMs = performance.now();
  for (let i = 0; i < instancesCount; i += 1) {
    const instanceId = `bench-${String(i).padStart(4, "0")}`;
    startCommandMs.set(instanceId, performance.now());
    runner.start(
      {
        instanceId,
        group: "bench",
        platform: "simulated-standalone",
        port: ports[i]!,
        memoryMb: 64,
        static: false,
        templates: [],
        env: { CLOUD_SIM_BIND_HOST: "127.0.0.1" },
      },
      fencingToken,
    );
  }
  const startCallsMs = performance.now() - startedMs;

  let timedOut = false;
  const deadline = setTimeout(() => {
    timedOut = true;
    allRunning();
  }, deadlineMs);
  await allRunningPromise;
  clearTimeout(deadline);
  const allRunningMs = performance.now() - startedMs;

  const perInstanceMs = [...runningMs.entries()].map(([id, at]) => at - (startCommandMs.get(id) ?? at)).sort((a, b) => a - b);
  const bootMs = [...runningMs.entries()].map(([id, at]) => at - (spawnedMs.get(id) ?? at)).sort((a, b) => a - b);
  const lastSpawnMs = Math.max(...spawnedMs.values()) - startedMs;
  const liveBeforeStop = runner.list().length;
  const stopStartedMs = performance.now();
  await runner.shutdown("graceful");
  await launcher.close();
  const stopAllMs = performance.now() - stopStartedMs;
  const leftAlive = [...pids].filter(isAlive);
  await rm(workDir, { recursive: true, force: true });

  const result = {
    mode: "runner",
    instances: instancesCount,
    running: runningMs.size,
    crashed: crashed.length,
    timedOut,
    startCallsMs: Math.round(startCallsMs),
    allRunningMs: Math.round(allRunningMs),
    p50Ms: Math.round(percentile(perInstanceMs, 50)),
    p99Ms: Math.round(percentile(perInstanceMs, 99)),
    maxMs: Math.round(perInstanceMs.at(-1) ?? Number.NaN),
    lastSpawnMs: Math.round(lastSpawnMs),
    spawnToRunningP50Ms: Math.round(percentile(bootMs, 50)),
    spawnToRunningP99Ms: Math.round(percentile(bootMs, 99)),
    liveBeforeStop,
    stopAllMs: Math.round(stopAllMs),
    processesLeft: leftAlive.length,
    loadAverage1mBefore: Number(loadBefore.toFixed(1)),
    loadAverage1mAfter: Number(loadavg()[0]!.toFixed(1)),
    uptimeBefore,
    uptimeAfter: uptimeLine(),
    node: process.version,
  };
  printTable(`start to RUNNING, runner only (${instancesCount} simulated-standalone instances, one InstanceRunner)`, [
    ["RUNNING / crashed", `${result.running} / ${result.crashed}${timedOut ? " (deadline reached)" : ""}`],
    ["all RUNNING (target <= 20000 ms)", `${result.allRunningMs} ms`],
    ["per instance p50 / p99 / max (target p99 <= 5000 ms)", `${result.p50Ms} / ${result.p99Ms} / ${result.maxMs} ms`],
    ["last spawn after", `${result.lastSpawnMs} ms`],
    ["spawn -> RUNNING p50 / p99", `${result.spawnToRunningP50Ms} / ${result.spawnToRunningP99Ms} ms`],
    ["graceful stop of all", `${result.stopAllMs} ms`],
    ["processes left", result.processesLeft],
    ["uptime before", result.uptimeBefore],
    ["uptime after", result.uptimeAfter],
  ]);
  console.log(`RESULT ${JSON.stringify(result)}`);
  if (leftAlive.length > 0) {
    for (const pid of leftAlive) process.kill(pid, "SIGKILL");
    process.exitCode = 1;
  }
}

// ---------------------------------------------------------------------------------------------
// --mode system

/** Whether `pid` runs the simulated game server. */
function isSimulatedServer(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("simulated-server");
  } catch {
    return false;
  }
}

/** Every descendant of `root` (children, their children, …) from /proc; empty when it is gone. */
function descendantPids(root: number): number[] {
  const found: number[] = [];
  const queue = [root];
  while (queue.length > 0) {
    const pid = queue.shift()!;
    try {
      for (const tid of readdirSync(`/proc/${pid}/task`)) {
        const text = readFileSync(`/proc/${pid}/task/${tid}/children`, "utf8").trim();
        if (!text) continue;
        for (const childPid of text.split(/\s+/).map(Number)) {
          found.push(childPid);
          queue.push(childPid);
        }
      }
    } catch {
      // Gone meanwhile.
    }
  }
  return found;
}

/** A `cloud-daemon` child process. */
interface DaemonChild {
  child: ChildProcess;
  output(): string;
  /** Pids of the daemon's game servers right now (its other descendants, such as tsx's esbuild service and the spawner helpers, are left out). */
  childPids(): number[];
  /** SIGTERM (graceful stop of every instance), SIGKILL after `timeoutMs`; resolves with the time it took. */
  stop(timeoutMs: number): Promise<number>;
}

function spawnDaemon(opts: { dir: string; grpcAddress: string; token: string; maxMemoryMb: number; heapMb: number; cpuProfDir: string | null }): DaemonChild {
  const configPath = join(opts.dir, "daemon.yml");
  writeFileSync(
    configPath,
    toYaml({
      controllers: [opts.grpcAddress],
      token: opts.token,
      hostname: "bench-node",
      workDir: join(opts.dir, "work"),
      dataDir: join(opts.dir, "data"),
      maxMemoryMb: opts.maxMemoryMb,
    }),
  );
  const nodeArgs = [`--max-old-space-size=${opts.heapMb}`, ...(opts.cpuProfDir ? ["--cpu-prof", "--cpu-prof-dir", opts.cpuProfDir] : [])];
  const child = spawn(process.execPath, [...nodeArgs, "--import", "tsx", "src/daemon/main.ts", "--config", configPath], {
    cwd: ROOT_DIR,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  const append = (chunk: Buffer) => void (output = (output + chunk.toString()).slice(-100_000));
  child.stdout!.on("data", append);
  child.stderr!.on("data", append);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const alive = () => child.exitCode === null && child.signalCode === null;
  const killOnExit = () => child.kill("SIGKILL");
  process.once("exit", killOnExit);
  return {
    child,
    output: () => output,
    // The servers are children of the daemon's spawner helpers: every descendant is looked at.
    childPids: () => descendantPids(child.pid ?? -1).filter(isSimulatedServer),
    stop: async (timeoutMs) => {
      const startedMs = performance.now();
      if (alive()) {
        child.kill("SIGTERM");
        const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
        await exited;
        clearTimeout(timer);
      }
      process.off("exit", killOnExit);
      return performance.now() - startedMs;
    },
  };
}

async function runSystemMode(): Promise<void> {
  const memoryMb = argNumber("--memory-mb", 32);
  const portStart = argNumber("--port-start", 24_000);
  const daemonHeapMb = argNumber("--daemon-heap-mb", 2_048);
  const controllerProfDir = process.argv.includes("--controller-cpu-prof") ? resolve(argString("--controller-cpu-prof", ".")) : null;
  const daemonProfDir = process.argv.includes("--daemon-cpu-prof") ? resolve(argString("--daemon-cpu-prof", ".")) : null;
  const groupName = "bench";
  const workDir = await mkdtemp(join(tmpdir(), "bench-start-to-running-system-"));
  let daemon: DaemonChild | null = null;
  let serverPids: number[] = [];
  let stopController: (() => Promise<void>) | null = null;
  let failed = false;
  const onSignal = () => {
    daemon?.child.kill("SIGKILL");
    for (const pid of serverPids) if (isAlive(pid)) process.kill(pid, "SIGKILL");
    process.exit(130);
  };
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  try {
    await mkdir(join(workDir, "daemon"));
    if (daemonProfDir) await mkdir(daemonProfDir, { recursive: true });
    progress("starting the controller");
    const c = await startBenchController({
      dataDir: join(workDir, "controller"),
      scheduler: maxStartingPerNode === undefined ? undefined : { startingPerNodeMax: maxStartingPerNode },
    });
    stopController = () => c.stop();
    const connected = nodesConnected(c, 1, 60_000);
    daemon = spawnDaemon({
      dir: join(workDir, "daemon"),
      grpcAddress: c.grpcAddress,
      token: await createNodeToken(c),
      // Room for every instance's reservation, whatever the host reports in use.
      maxMemoryMb: Math.max(65_536, instancesCount * memoryMb * 2),
      heapMb: daemonHeapMb,
      cpuProfDir: daemonProfDir,
    });
    progress(`daemon started (pid ${daemon.child.pid}); waiting for its session`);
    await connected.catch((err: unknown) => {
      throw new Error(`${(err as Error).message}\n--- daemon output ---\n${daemon?.output()}`);
    });
    const tracker = new InstanceTracker(c.controller);
    const daemonPid = daemon.child.pid!;
    // Transport delay of the daemon's state reports: its timestamp (same machine, same clock) to
    // the moment the controller's gateway hands the report on.
    const reportDelaysMs: number[] = [];
    const stopWatchingReports = c.controller.gateway.onReport((report) => {
      if (report.message.payload === "instance_state") reportDelaysMs.push(Date.now() - Number(report.message.instance_state.timestamp_ms));
    });

    const uptimeBefore = uptimeLine();
    const loadBefore = loadavg()[0]!;
    const controllerCpuBefore = ownCpuSeconds();
    const daemonCpuBefore = processCpuSeconds(daemonPid);
    const profile = controllerProfDir ? await startCpuProfile() : null;
    const loopDelay = monitorLoopDelay();
    const createdMs = performance.now();
    await c.api(
      "POST",
      "/api/v1/groups",
      {
        name: groupName,
        platform: "simulated",
        scalingMode: "DYNAMIC",
        minInstances: instancesCount,
        maxInstances: instancesCount,
        maxPlayers: 0,
        memoryMb,
        portRange: { start: portStart, end: portStart + instancesCount * 2 - 1 },
      },
      201,
    );
    progress(`group ${groupName} created: ${instancesCount} instances`);
    let peakRssMib = 0;
    // rss() alone: memoryUsage() also walks the heap, which the controller's CPU figure would include.
    const sampler = setInterval(() => (peakRssMib = Math.max(peakRssMib, mib(process.memoryUsage.rss()))), 250);
    const allRunning = await tracker.waitFor("RUNNING", instancesCount, deadlineMs);
    const allRunningMs = performance.now() - createdMs;
    clearInterval(sampler);
    const controllerLoopDelay = loopDelay.stop();
    if (profile) await profile.stop(join(controllerProfDir!, `controller-start-to-running-${Date.now()}.cpuprofile`));
    const controllerCpuS = ownCpuSeconds() - controllerCpuBefore;
    const daemonCpuS = processCpuSeconds(daemonPid) - daemonCpuBefore;
    const daemonRssMib = processRssMib(daemonPid);
    const controllerRssMib = mib(process.memoryUsage().rss);
    const uptimeAtRunning = uptimeLine();
    serverPids = daemon.childPids();
    const serversPssMib = Math.round(serverPids.reduce((sum, pid) => sum + processPssMib(pid), 0));

    const recordedStates = await statesOfInstances(c, `?group=${groupName}`);
    progress(`${allRunning ? "all RUNNING" : "deadline reached"}: records ${JSON.stringify(recordedStates)}`);
    // The figures end here: no replacement is scheduled for the servers the shutdown stops.
    tracker.close();
    stopWatchingReports();
    await c.api("PATCH", `/api/v1/groups/${groupName}`, { maintenance: true });
    progress("stopping the daemon (SIGTERM)");
    const daemonStopMs = await daemon.stop(daemonStopTimeoutMs);
    const leftAlive = serverPids.filter(isAlive);
    for (const pid of leftAlive) process.kill(pid, "SIGKILL");

    const scheduledToRunning = tracker.durations("SCHEDULED", "RUNNING");
    const createdToScheduled = [...tracker.at.get("SCHEDULED")!.values()].map((at) => at - createdMs).sort((a, b) => a - b);
    // With start pacing an instance is placed (SCHEDULED) only when its node has a start slot: the
    // time since the group's creation shows the wait before that too.
    const createdToRunning = [...(tracker.at.get("RUNNING")?.values() ?? [])].map((at) => at - createdMs).sort((a, b) => a - b);
    const result = {
      mode: "system",
      instances: instancesCount,
      running: tracker.count("RUNNING"),
      crashed: tracker.count("CRASHED"),
      timedOut: !allRunning,
      allRunningMs: Math.round(allRunningMs),
      scheduledToRunning: spread(scheduledToRunning),
      createdToRunning: spread(createdToRunning),
      maxStartingPerNode: maxStartingPerNode ?? `${defaultSchedulerTuning.startingPerNodeMax} (default)`,
      lastScheduledMs: Math.round(percentile(createdToScheduled, 100)),
      phases: {
        scheduledToPreparing: spread(tracker.durations("SCHEDULED", "PREPARING")),
        preparingToStarting: spread(tracker.durations("PREPARING", "STARTING")),
        startingToRunning: spread(tracker.durations("STARTING", "RUNNING")),
      },
      lastStartingMs: Math.round(tracker.lastAt("STARTING", createdMs)),
      recordedStates,
      stateReportDelay: spread(reportDelaysMs.sort((a, b) => a - b)),
      daemonDisconnects: (daemon.output().match(/Disconnected \(/g) ?? []).length,
      controllerLoopDelay,
      controllerCpuS: Math.round(controllerCpuS * 10) / 10,
      daemonCpuS: Math.round(daemonCpuS * 10) / 10,
      controllerRssMib,
      controllerPeakRssMib: peakRssMib,
      daemonRssMib,
      serversPssMib,
      serverProcesses: serverPids.length,
      daemonStopMs: Math.round(daemonStopMs),
      processesLeft: leftAlive.length,
      memoryMb,
      loadAverage1mBefore: Number(loadBefore.toFixed(1)),
      loadAverage1mAfter: Number(loadavg()[0]!.toFixed(1)),
      uptimeBefore,
      uptimeAtRunning,
      uptimeAfter: uptimeLine(),
      node: process.version,
    };
    printTable(`start to RUNNING, whole system (controller in-process, one cloud-daemon, ${instancesCount} simulated instances, plugin readiness)`, [
      ["RUNNING / crashed", `${result.running} / ${result.crashed}${result.timedOut ? " (deadline reached)" : ""}`],
      ["all RUNNING after group creation (target <= 20000 ms)", `${result.allRunningMs} ms`],
      [
        "SCHEDULED -> RUNNING p50 / p99 / max (target p99 <= 5000 ms)",
        `${result.scheduledToRunning.p50Ms} / ${result.scheduledToRunning.p99Ms} / ${result.scheduledToRunning.maxMs} ms`,
      ],
      ["group creation -> RUNNING per instance p50 / p99", `${result.createdToRunning.p50Ms} / ${result.createdToRunning.p99Ms} ms`],
      ["scheduler.maxStartingPerNode", String(result.maxStartingPerNode)],
      ["last SCHEDULED after creation", `${result.lastScheduledMs} ms`],
      ["SCHEDULED -> PREPARING p50 / p99", `${result.phases.scheduledToPreparing.p50Ms} / ${result.phases.scheduledToPreparing.p99Ms} ms`],
      ["PREPARING -> STARTING (spawn queue) p50 / p99", `${result.phases.preparingToStarting.p50Ms} / ${result.phases.preparingToStarting.p99Ms} ms`],
      ["STARTING -> RUNNING (boot + ready call) p50 / p99", `${result.phases.startingToRunning.p50Ms} / ${result.phases.startingToRunning.p99Ms} ms`],
      ["last STARTING after creation", `${result.lastStartingMs} ms`],
      ["instance records by state at the end", JSON.stringify(result.recordedStates)],
      [
        "state report delay, daemon -> controller p50 / p99 / max",
        `${result.stateReportDelay.p50Ms} / ${result.stateReportDelay.p99Ms} / ${result.stateReportDelay.maxMs} ms`,
      ],
      ["daemon disconnects (its log)", result.daemonDisconnects],
      [
        "controller event-loop delay p50 / p99 / max",
        `${result.controllerLoopDelay.p50Ms} / ${result.controllerLoopDelay.p99Ms} / ${result.controllerLoopDelay.maxMs} ms`,
      ],
      ["CPU: controller process / daemon", `${result.controllerCpuS} s / ${result.daemonCpuS} s`],
      [
        "RSS: controller (peak) / daemon; PSS of all servers",
        `${result.controllerRssMib} (${result.controllerPeakRssMib}) / ${result.daemonRssMib}; ${result.serversPssMib} MiB`,
      ],
      ["daemon SIGTERM -> exit (graceful stop of all)", `${result.daemonStopMs} ms`],
      ["server processes found at all RUNNING / left after the daemon's stop", `${result.serverProcesses} / ${result.processesLeft}`],
      ["uptime before", result.uptimeBefore],
      ["uptime at all RUNNING", result.uptimeAtRunning],
      ["uptime after", result.uptimeAfter],
    ]);
    console.log(`RESULT ${JSON.stringify(result)}`);
    if (leftAlive.length > 0 || result.timedOut) {
      failed = true;
      if (result.timedOut)
        console.error(`--- daemon output (tail) ---\n${daemon.output().slice(-5_000)}\n--- controller log (tail) ---\n${c.logTail().slice(-5_000)}`);
    }
  } catch (err) {
    failed = true;
    console.error(err);
  } finally {
    if (daemon) {
      if (serverPids.length === 0) serverPids = daemon.childPids();
      await daemon.stop(daemonStopTimeoutMs);
      for (const pid of serverPids) if (isAlive(pid)) process.kill(pid, "SIGKILL");
    }
    progress("stopping the controller");
    await stopController?.().catch((err: unknown) => {
      failed = true;
      console.error(err);
    });
    await rm(workDir, { recursive: true, force: true });
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
  }
  progress("done");
  // Whatever a failed stop left behind in this process ends with it.
  process.exit(failed ? 1 : 0);
}

if (mode === "runner") await runRunnerMode();
else if (mode === "system") await runSystemMode();
else throw new Error(`--mode must be runner or system, not ${mode}`);
