// Start-to-running benchmark: N simulated game servers (default 500) on one instance runner, all
// started at once, ready on their `Done (` log line (no controller). Measures the time until every
// instance is RUNNING and, per instance, from the start command to RUNNING (p50/p99/max) and from
// the spawn to RUNNING (the server's own boot under this load). Then
// stops everything gracefully and checks that no process is left.
//
//   npx tsx scripts/bench/start-to-running.ts [--instances 500] [--deadline-ms 120000]
//
// Prints a summary and one machine-readable JSON line (prefix `BENCH_JSON `).
import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type Server } from "node:net";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { InstanceRunner } from "../../src/daemon/instance-runner.js";
import { builtInPlatforms } from "../../src/daemon/platforms.js";

function argValue(name: string, fallback: number): number {
  const i = process.argv.indexOf(name);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
}

const instancesCount = argValue("--instances", 500);
const deadlineMs = argValue("--deadline-ms", 120_000);
const fencingToken = 1;

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

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

const workDir = await mkdtemp(join(tmpdir(), "bench-start-to-running-"));
const runner = new InstanceRunner({ workDir, platforms: builtInPlatforms(), clock: { nowMs: () => performance.now() } });
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

const loadBefore = loadavg()[0];
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
      port: ports[i],
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
const stopAllMs = performance.now() - stopStartedMs;
const leftAlive = [...pids].filter(isAlive);
await rm(workDir, { recursive: true, force: true });

const result = {
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
  loadAverage1mAfter: Number(loadavg()[0].toFixed(1)),
  node: process.version,
};
console.log(`${result.running}/${instancesCount} RUNNING in ${result.allRunningMs} ms (target <= 20000); per instance p50 ${result.p50Ms} ms, p99 ${result.p99Ms} ms (target <= 5000), max ${result.maxMs} ms`);
console.log(`last spawn at ${result.lastSpawnMs} ms; spawn to RUNNING p50 ${result.spawnToRunningP50Ms} ms, p99 ${result.spawnToRunningP99Ms} ms`);
console.log(`crashed ${result.crashed}, graceful stop of all ${result.stopAllMs} ms, processes left ${result.processesLeft}`);
console.log(`BENCH_JSON ${JSON.stringify(result)}`);
if (leftAlive.length > 0) {
  for (const pid of leftAlive) process.kill(pid, "SIGKILL");
  process.exitCode = 1;
}
