// REST benchmark: the real HTTP app on the embedded store, seeded with 1,000 groups and 10,000
// instance documents, driven at concurrency 32 from a child process (its own event loop, so the
// client does not steal the server's) over keep-alive connections.
//
//   npx tsx scripts/bench/rest.ts [--duration-ms 10000] [--concurrency 32] [--phases one,filtered,full]
//
// Prints a table and one machine-readable JSON line (prefix `BENCH_JSON `).
import { Agent, request } from "node:http";
import { availableParallelism, loadavg } from "node:os";
import { performance } from "node:perf_hooks";
import { fork } from "node:child_process";
import { fileURLToPath } from "node:url";

const groupsCount = 1_000;
const instancesPerGroup = 10;
const nodesCount = 20;
/** Seed writes in flight at once (the store serializes per collection; this only overlaps I/O). */
const seedParallelism = 64;
/** Rate limits far above any load this script can produce: the benchmark measures the routes. */
const rateLimitPerMinuteBench = 1_000_000_000;

interface Phase {
  /** Short key used by --phases. */
  key: string;
  name: string;
  /** Path of each request; `i` is the request sequence number. */
  paths: string[];
  durationMs: number;
  warmupMs: number;
}

interface PhaseResult {
  name: string;
  requests: number;
  errors: number;
  seconds: number;
  reqPerSec: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  meanBytes: number;
  /** Server process CPU time (user + system) per request: the load-independent cost. */
  serverCpuMsPerRequest?: number;
}

/** Messages from the driver: marks around each measured window, then the results. */
type DriverMessage = { type: "mark"; phase: string; at: "start" | "end" } | { type: "results"; results: PhaseResult[] };

interface DriverInput {
  baseUrl: string;
  token: string;
  concurrency: number;
  phases: Phase[];
}

function argValue(name: string, fallback: number): number {
  const at = process.argv.indexOf(name);
  if (at < 0) return fallback;
  const value = Number(process.argv[at + 1]);
  if (!Number.isFinite(value) || value <= 0) throw new Error(`${name} needs a positive number`);
  return value;
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

const round = (n: number, digits = 1) => Math.round(n * 10 ** digits) / 10 ** digits;

// ---------------------------------------------------------------------------------------------
// Driver (child process)

function get(agent: Agent, baseUrl: string, token: string, path: string): Promise<{ status: number; bytes: number }> {
  return new Promise((resolve, reject) => {
    const req = request(baseUrl + path, { agent, headers: { authorization: `Bearer ${token}` } }, (res) => {
      let bytes = 0;
      res.on("data", (chunk: Buffer) => (bytes += chunk.length));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, bytes }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end();
  });
}

async function runPhase(input: DriverInput, phase: Phase): Promise<PhaseResult> {
  const agent = new Agent({ keepAlive: true, maxSockets: input.concurrency });
  let seq = 0;
  const nextPath = () => phase.paths[seq++ % phase.paths.length];
  const loop = async (untilMs: number, record: ((ms: number, ok: boolean, bytes: number) => void) | null) => {
    while (performance.now() < untilMs) {
      const started = performance.now();
      let ok: boolean;
      let bytes = 0;
      try {
        const res = await get(agent, input.baseUrl, input.token, nextPath());
        ok = res.status === 200;
        bytes = res.bytes;
      } catch {
        ok = false;
      }
      record?.(performance.now() - started, ok, bytes);
    }
  };
  const workers = (untilMs: number, record: Parameters<typeof loop>[1]) => Promise.all(Array.from({ length: input.concurrency }, () => loop(untilMs, record)));

  await workers(performance.now() + phase.warmupMs, null);
  process.send?.({ type: "mark", phase: phase.name, at: "start" } satisfies DriverMessage);
  const latencies: number[] = [];
  let errors = 0;
  let totalBytes = 0;
  const startedMs = performance.now();
  await workers(startedMs + phase.durationMs, (ms, ok, bytes) => {
    latencies.push(ms);
    totalBytes += bytes;
    if (!ok) errors += 1;
  });
  const seconds = (performance.now() - startedMs) / 1000;
  process.send?.({ type: "mark", phase: phase.name, at: "end" } satisfies DriverMessage);
  agent.destroy();
  latencies.sort((a, b) => a - b);
  return {
    name: phase.name,
    requests: latencies.length,
    errors,
    seconds: round(seconds, 2),
    reqPerSec: round(latencies.length / seconds),
    p50Ms: round(percentile(latencies, 50), 2),
    p99Ms: round(percentile(latencies, 99), 2),
    maxMs: round(latencies[latencies.length - 1] ?? 0, 2),
    meanBytes: Math.round(totalBytes / Math.max(1, latencies.length)),
  };
}

async function drive(input: DriverInput): Promise<PhaseResult[]> {
  const results: PhaseResult[] = [];
  for (const phase of input.phases) results.push(await runPhase(input, phase));
  return results;
}

// ---------------------------------------------------------------------------------------------
// Server side (main thread)

async function inBatches<T>(items: T[], fn: (item: T) => Promise<unknown>): Promise<void> {
  for (let i = 0; i < items.length; i += seedParallelism) await Promise.all(items.slice(i, i + seedParallelism).map(fn));
}

interface ServiceLayerResult {
  name: string;
  calls: number;
  cpuMsPerCall: number;
  wallMsPerCall: number;
}

/** The domain layer alone (no HTTP): what the routes' service calls cost, one at a time. */
async function measureServiceLayer(
  instances: { get(id: string): Promise<unknown>; list(filter?: { group?: string }): Promise<unknown> },
  instanceIds: string[],
  groupNames: string[],
): Promise<ServiceLayerResult[]> {
  const measure = async (name: string, calls: number, fn: (i: number) => Promise<unknown>): Promise<ServiceLayerResult> => {
    for (let i = 0; i < Math.min(calls, 50); i++) await fn(i);
    const cpu = process.cpuUsage();
    const started = performance.now();
    for (let i = 0; i < calls; i++) await fn(i);
    const used = process.cpuUsage(cpu);
    return { name, calls, cpuMsPerCall: round((used.user + used.system) / 1000 / calls, 3), wallMsPerCall: round((performance.now() - started) / calls, 3) };
  };
  return [
    await measure("InstanceService.get", 5000, (i) => instances.get(instanceIds[(i * 7919) % instanceIds.length])),
    await measure("InstanceService.list({group})", 1000, (i) => instances.list({ group: groupNames[(i * 613) % groupNames.length] })),
    await measure("InstanceService.list() + JSON (10,000)", 20, async () => JSON.stringify(await instances.list())),
  ];
}

async function main(): Promise<void> {
  const durationMs = argValue("--duration-ms", 10_000);
  const concurrency = argValue("--concurrency", 32);
  const phasesAt = process.argv.indexOf("--phases");
  const phaseKeys = phasesAt >= 0 ? (process.argv[phasesAt + 1] ?? "").split(",") : ["one", "filtered", "full"];
  // Imported here so the driver process does not load the application.
  const { startTestApp } = await import("../../test/support/http-app.js");
  const app = await startTestApp({
    config: {
      rateLimit: { perIpPerMinute: rateLimitPerMinuteBench, perUserPerMinute: rateLimitPerMinuteBench },
      logging: { level: "WARN" },
    },
  });
  try {
    const loadAtStart = loadavg()[0];
    const seedStarted = performance.now();
    const groupNames = Array.from({ length: groupsCount }, (_, i) => `group-${String(i).padStart(4, "0")}`);
    await inBatches(groupNames, (name) => app.groups.create({ name, platform: "paper", maxInstances: 20 }));
    for (let n = 0; n < nodesCount; n++) await app.nodes.upsert(`node-${n}`, { host: `10.0.0.${n + 1}`, totalMemoryMb: 65536 });
    const startedAt = new Date(Date.now() - 3600_000).toISOString();
    const instanceIds: string[] = [];
    const instances = groupNames.flatMap((group, g) =>
      Array.from({ length: instancesPerGroup }, (_, k) => {
        const id = `${group}-${k}`;
        instanceIds.push(id);
        return {
          id,
          group,
          node: `node-${(g * instancesPerGroup + k) % nodesCount}`,
          state: "RUNNING" as const,
          port: 30000 + k,
          playerCount: (g + k) % 50,
          memoryMb: 1024,
          startedAt,
          deploymentRevision: 1,
        };
      }),
    );
    await inBatches(instances, (instance) => app.instances.save(instance));
    const seedSeconds = round((performance.now() - seedStarted) / 1000, 1);
    const token = await app.tokenFor("ADMIN");
    const serviceLayer = await measureServiceLayer(app.instances, instanceIds, groupNames);

    // Deterministic spread of ids and groups (a fixed stride walks all of them).
    const stride = (n: number, count: number, step: number) => Array.from({ length: count }, (_, i) => (i * step) % n);
    const phases: Phase[] = [
      {
        key: "one",
        name: "GET /api/v1/services/{id}",
        paths: stride(instanceIds.length, instanceIds.length, 7919).map((i) => `/api/v1/services/${instanceIds[i]}`),
        durationMs,
        warmupMs: 1000,
      },
      {
        key: "filtered",
        name: "GET /api/v1/services?group=x",
        paths: stride(groupNames.length, groupNames.length, 613).map((i) => `/api/v1/services?group=${groupNames[i]}`),
        durationMs,
        warmupMs: 1000,
      },
      { key: "full", name: "GET /api/v1/services (10,000)", paths: ["/api/v1/services"], durationMs: durationMs * 1.5, warmupMs: 2000 },
    ];

    const selected = phases.filter((phase) => phaseKeys.includes(phase.key));
    const driver = fork(fileURLToPath(import.meta.url), ["--driver"], { execArgv: ["--import", "tsx"] });
    const cpuMs = new Map<string, number>();
    let cpuAtStart = process.cpuUsage();
    const results: PhaseResult[] = await new Promise((resolve, reject) => {
      driver.on("message", (raw) => {
        const message = raw as DriverMessage;
        if (message.type === "results") return resolve(message.results);
        if (message.at === "start") cpuAtStart = process.cpuUsage();
        else {
          const used = process.cpuUsage(cpuAtStart);
          cpuMs.set(message.phase, (used.user + used.system) / 1000);
        }
      });
      driver.once("error", reject);
      driver.once("exit", (code) => code !== 0 && reject(new Error(`driver exited with ${code}`)));
      driver.send({ baseUrl: app.baseUrl, token, concurrency, phases: selected } satisfies DriverInput);
    });
    driver.disconnect();
    for (const result of results) result.serverCpuMsPerRequest = round((cpuMs.get(result.name) ?? 0) / Math.max(1, result.requests), 3);

    const byKey = new Map(selected.map((phase, i) => [phase.key, results[i]]));
    const one = byKey.get("one");
    const full = byKey.get("full");
    const targets = {
      singleGet: one ? one.p99Ms <= 50 && one.reqPerSec >= 2000 : null,
      fullList: full ? full.p99Ms <= 1000 : null,
    };
    const verdict = (ok: boolean | null) => (ok === null ? "not run" : ok ? "met" : "MISSED");
    console.table(
      results.map((r) => ({
        route: r.name,
        "req/s": r.reqPerSec,
        "p50 ms": r.p50Ms,
        "p99 ms": r.p99Ms,
        "max ms": r.maxMs,
        requests: r.requests,
        errors: r.errors,
        "bytes/resp": r.meanBytes,
        "server cpu ms/req": r.serverCpuMsPerRequest,
      })),
    );
    console.table(
      serviceLayer.map((r) => ({
        "service call (in process, sequential)": r.name,
        calls: r.calls,
        "cpu ms/call": r.cpuMsPerCall,
        "wall ms/call": r.wallMsPerCall,
      })),
    );
    console.log(`targets: single GET p99 <= 50 ms at >= 2,000 req/s: ${verdict(targets.singleGet)}; full list p99 <= 1 s: ${verdict(targets.fullList)}`);
    console.log(
      "BENCH_JSON " +
        JSON.stringify({
          bench: "rest",
          node: process.version,
          cpus: availableParallelism(),
          // One-minute load averages: how contended the machine was.
          loadAverage: { start: round(loadAtStart, 2), end: round(loadavg()[0], 2) },
          groups: groupsCount,
          instances: instances.length,
          concurrency,
          seedSeconds,
          results,
          serviceLayer,
          targets,
        }),
    );
  } finally {
    await app.close();
  }
}

if (process.argv.includes("--driver")) {
  process.once("message", (input) => {
    drive(input as DriverInput).then((results) => process.send?.({ type: "results", results } satisfies DriverMessage));
  });
} else {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
