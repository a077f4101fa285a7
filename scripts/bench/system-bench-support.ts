// Shared parts of the whole-system benchmarks (start-to-running.ts --mode system, fleet.ts): a
// controller in this process on 127.0.0.1 (ephemeral HTTP and gRPC ports, a temporary data
// directory), the admin API, a tracker of instance states from the controller's event bus, load
// average and CPU readings, and the printing of a table and the `RESULT {...}` line.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { loadavg } from "node:os";
import { monitorEventLoopDelay, performance } from "node:perf_hooks";
import { parseControllerConfig } from "../../src/config/load.js";
import { startController, type RunningController } from "../../src/controller/controller.js";
import { EventTypes } from "../../src/events/event-types.js";
import type { GatewayTuning } from "../../src/gateway/daemon-gateway.js";
import type { SchedulerTuning } from "../../src/scheduler/scheduler-host.js";
import { login, TEST_ADMIN_PASSWORD, testConfig } from "../../test/support/controller.js";

/** Log chunks (lines) of the controller kept for a failure report. */
const LOG_TAIL_CHUNKS_MAX = 5_000;
/** How long one admin API request may take before the benchmark gives up. */
const API_TIMEOUT_MS = 60_000;
/** How long the controller gets to stop before the benchmark reports it and exits anyway. */
export const CONTROLLER_STOP_TIMEOUT_MS = 30_000;

/** A progress line on standard error (the figures go to standard output). */
export function progress(message: string): void {
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
}

/** Waits for `work` at most `timeoutMs`; false when it did not finish in time. */
export async function within(work: Promise<unknown>, timeoutMs: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const finished = await Promise.race([work.then(() => true), new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs)))]);
  clearTimeout(timer);
  return finished;
}

/** The value after `--name`, or `fallback`. */
export function argString(name: string, fallback: string): string {
  const at = process.argv.indexOf(name);
  return at >= 0 && process.argv[at + 1] !== undefined ? process.argv[at + 1]! : fallback;
}

/** A positive number after `--name`, or `fallback`. */
export function argNumber(name: string, fallback: number): number {
  const at = process.argv.indexOf(name);
  if (at < 0) return fallback;
  const value = Number(process.argv[at + 1]);
  if (!Number.isFinite(value) || value < 0) throw new Error(`${name} needs a non-negative number`);
  return value;
}

export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

/** `uptime`'s line (load averages over 1, 5 and 15 minutes); os.loadavg() where `uptime` is missing. */
export function uptimeLine(): string {
  try {
    return execFileSync("uptime", { encoding: "utf8" }).trim();
  } catch {
    return `load average: ${loadavg()
      .map((l) => l.toFixed(2))
      .join(", ")}`;
  }
}

/** User + system CPU seconds of a process from /proc (0 when it is gone). */
export function processCpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const ticksPerSecond = 100;
    return (Number(fields[11]) + Number(fields[12])) / ticksPerSecond;
  } catch {
    return 0;
  }
}

/** This process's user + system CPU seconds. */
export function ownCpuSeconds(): number {
  const usage = process.cpuUsage();
  return (usage.user + usage.system) / 1e6;
}

/** A controller in this process, logged in as admin. */
export interface BenchController {
  controller: RunningController;
  url: string;
  grpcAddress: string;
  /** JSON request with the admin token; throws on a status other than `expected`. */
  api(method: string, path: string, body?: unknown, expected?: number): Promise<any>;
  /** The last controller log lines (for a failure report). */
  logTail(): string;
  /** Stops the controller; throws when it takes longer than {@link CONTROLLER_STOP_TIMEOUT_MS}. */
  stop(): Promise<void>;
}

export async function startBenchController(opts: {
  dataDir: string;
  scheduler?: Partial<SchedulerTuning>;
  gateway?: Partial<GatewayTuning>;
}): Promise<BenchController> {
  const config = parseControllerConfig(testConfig(opts.dataDir, { logging: { level: "WARN" } }), { env: {}, source: "benchmark configuration" });
  const log: string[] = [];
  const controller = await startController(config, {
    env: {},
    logOut: {
      write: (chunk: string) => {
        log.push(chunk);
        if (log.length > LOG_TAIL_CHUNKS_MAX) log.shift();
      },
    },
    gatewayTuning: opts.gateway,
    schedulerTuning: opts.scheduler,
  });
  const url = controller.httpUrl;
  const token = await login(url, "admin", TEST_ADMIN_PASSWORD);
  const api = async (method: string, path: string, body?: unknown, expected = 200) => {
    const res = await fetch(`${url}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(API_TIMEOUT_MS),
    });
    const text = await res.text();
    if (res.status !== expected) throw new Error(`${method} ${path}: ${res.status} ${text.slice(0, 500)}`);
    return text ? JSON.parse(text) : null;
  };
  const stop = async () => {
    if (!(await within(controller.stop(), CONTROLLER_STOP_TIMEOUT_MS))) {
      const lines = log.join("").split("\n");
      const stopping = lines.filter((line) => /Stopping|stopped|took \d+ ms/.test(line)).slice(-20);
      throw new Error(
        `the controller did not stop within ${CONTROLLER_STOP_TIMEOUT_MS} ms; its log about stopping:\n${stopping.join("\n")}\nits last lines:\n${lines.slice(-5).join("\n")}`,
      );
    }
  };
  return { controller, url, grpcAddress: `127.0.0.1:${controller.grpcPort}`, api, logTail: () => log.join(""), stop };
}

/** A single-use node join token. */
export async function createNodeToken(c: BenchController): Promise<string> {
  const created = (await c.api("POST", "/api/v1/admin/tokens", {}, 201)) as { token: string };
  return created.token;
}

/** Resolves once `nodeCount` distinct nodes have connected (NODE_CONNECTED on the event bus). */
export function nodesConnected(c: BenchController, nodeCount: number, timeoutMs: number): Promise<string[]> {
  const nodes = new Set<string>();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      subscription.unsubscribe();
      reject(new Error(`only ${nodes.size} of ${nodeCount} nodes connected within ${timeoutMs} ms`));
    }, timeoutMs);
    const subscription = c.controller.events.subscribe(EventTypes.NODE_CONNECTED, (event) => {
      nodes.add(String(event.data.nodeId));
      if (nodes.size < nodeCount) return;
      clearTimeout(timer);
      subscription.unsubscribe();
      resolve([...nodes]);
    });
  });
}

/** Instance states the tracker times. */
const TIMED_STATES = ["SCHEDULED", "PREPARING", "STARTING", "RUNNING", "STOPPING", "STOPPED", "CRASHED"] as const;
type TimedState = (typeof TIMED_STATES)[number];

/**
 * When each instance reached each state, in ms of `performance.now()`. RUNNING and the others come
 * from INSTANCE_STATE_CHANGED on the controller's event bus (published once the record is written).
 * SCHEDULED is not published (the record is written before the instance actor starts), so the
 * tracker notes it when the scheduler files the new instance in its live view, right after the
 * SCHEDULED record is saved.
 */
export class InstanceTracker {
  readonly at = new Map<TimedState, Map<string, number>>(TIMED_STATES.map((s) => [s, new Map()]));
  private waiters: { state: TimedState; count: number; resolve: () => void }[] = [];
  private readonly unsubscribe: () => void;

  constructor(controller: RunningController) {
    const live = controller.scheduler.live;
    const put = live.put.bind(live);
    live.put = (instance) => {
      if (instance.state === "SCHEDULED") this.note("SCHEDULED", instance.id);
      put(instance);
    };
    const subscription = controller.events.subscribe(EventTypes.INSTANCE_STATE_CHANGED, (event) => {
      const state = String(event.data.newState);
      if ((TIMED_STATES as readonly string[]).includes(state)) this.note(state as TimedState, String(event.data.instanceId));
    });
    this.unsubscribe = () => {
      subscription.unsubscribe();
      live.put = put;
    };
  }

  count(state: TimedState): number {
    return this.at.get(state)!.size;
  }

  /** Resolves true once `count` instances reached `state`, false after `timeoutMs`. */
  waitFor(state: TimedState, count: number, timeoutMs: number): Promise<boolean> {
    if (this.count(state) >= count) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== waiter);
        resolve(false);
      }, timeoutMs);
      const waiter = {
        state,
        count,
        resolve: () => {
          clearTimeout(timer);
          resolve(true);
        },
      };
      this.waiters.push(waiter);
    });
  }

  /** Sorted durations `from` → `to` over the instances that reached both. */
  durations(from: TimedState, to: TimedState): number[] {
    const start = this.at.get(from)!;
    const out: number[] = [];
    for (const [id, atMs] of this.at.get(to)!) {
      const fromMs = start.get(id);
      if (fromMs !== undefined) out.push(atMs - fromMs);
    }
    return out.sort((a, b) => a - b);
  }

  /** Time of the last instance reaching `state`, relative to `originMs`. */
  lastAt(state: TimedState, originMs: number): number {
    const times = [...this.at.get(state)!.values()];
    return times.length === 0 ? Number.NaN : Math.max(...times) - originMs;
  }

  close(): void {
    this.unsubscribe();
  }

  private note(state: TimedState, id: string): void {
    const times = this.at.get(state)!;
    if (times.has(id)) return;
    times.set(id, performance.now());
    const size = times.size;
    const done = this.waiters.filter((w) => w.state === state && size >= w.count);
    if (done.length === 0) return;
    this.waiters = this.waiters.filter((w) => !done.includes(w));
    for (const w of done) w.resolve();
  }
}

/** p50 / p99 / max of sorted milliseconds, rounded. */
export function spread(sorted: readonly number[]): { p50Ms: number; p99Ms: number; maxMs: number } {
  return { p50Ms: Math.round(percentile(sorted, 50)), p99Ms: Math.round(percentile(sorted, 99)), maxMs: Math.round(sorted.at(-1) ?? Number.NaN) };
}

/** Prints `rows` as a two-column table. */
export function printTable(title: string, rows: readonly [string, string | number][]): void {
  const width = Math.max(...rows.map(([name]) => name.length));
  console.log(title);
  for (const [name, value] of rows) console.log(`  ${name.padEnd(width)}  ${value}`);
}

/** How many instances of the list are in each state (GET /api/v1/services). */
export async function statesOfInstances(c: BenchController, query = ""): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const instance of (await c.api("GET", `/api/v1/services${query}`)) as { state: string }[]) counts[instance.state] = (counts[instance.state] ?? 0) + 1;
  return counts;
}

/** MiB, one decimal. */
export const mib = (bytes: number) => Math.round((bytes / (1024 * 1024)) * 10) / 10;

/**
 * A CPU profile of this process (the in-process controller) over a window, through the inspector;
 * `stop()` writes it as a `.cpuprofile` file (Chrome DevTools, or cpu-profile-summary.ts).
 */
export async function startCpuProfile(): Promise<{ stop(path: string): Promise<void> }> {
  const { Session } = await import("node:inspector/promises");
  const { mkdir, writeFile } = await import("node:fs/promises");
  const { dirname } = await import("node:path");
  const session = new Session();
  session.connect();
  await session.post("Profiler.enable");
  await session.post("Profiler.setSamplingInterval", { interval: 500 });
  await session.post("Profiler.start");
  return {
    stop: async (path: string) => {
      const { profile } = await session.post("Profiler.stop");
      await mkdir(dirname(path), { recursive: true });
      await writeFile(path, JSON.stringify(profile));
      session.disconnect();
    },
  };
}

/**
 * Proportional set size of a process from /proc (MiB; 0 when it is gone): its private memory plus
 * its share of pages it shares (the Node binary of 500 servers counts once, not 500 times).
 */
export function processPssMib(pid: number): number {
  try {
    const match = /Pss:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/smaps_rollup`, "utf8"));
    return match ? Math.round((Number(match[1]) / 1024) * 10) / 10 : 0;
  } catch {
    return 0;
  }
}

/** Resident memory of a process from /proc (MiB; 0 when it is gone). */
export function processRssMib(pid: number): number {
  try {
    const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return match ? Math.round((Number(match[1]) / 1024) * 10) / 10 : 0;
  } catch {
    return 0;
  }
}

/** Event-loop delay of this process (the controller's loop) while the measured work runs. */
export function monitorLoopDelay(): { stop(): { p50Ms: number; p99Ms: number; maxMs: number } } {
  const histogram = monitorEventLoopDelay({ resolution: 10 });
  histogram.enable();
  const ms = (ns: number) => Math.round(ns / 1e5) / 10;
  return {
    stop: () => {
      histogram.disable();
      return { p50Ms: ms(histogram.percentile(50)), p99Ms: ms(histogram.percentile(99)), maxMs: ms(histogram.max) };
    },
  };
}
