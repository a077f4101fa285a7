// A platform module stuck in its own code and the controller's event loop. A development controller
// runs in a child process (archive-event-loop-controller.ts: its event-loop delay measured inside it
// by monitorEventLoopDelay, 10 ms resolution) with the default module worker limits
// (modules.worker.hangTimeoutMs 500, heapMb 128). This process installs, signed with the development
// key, a healthy module (`echo`) and per round a module whose route loops forever (`spin-<n>`) and
// one whose route allocates without bound (`hog-<n>`). Then, one phase at a time:
//   - idle:     nothing (the baseline)
//   - loop-n:   GET /api/v1/modules/spin-<n>/spin
//   - alloc-n:  GET /api/v1/modules/hog-<n>/grow
// During each phase this process calls GET /api/v1/system/version and the healthy module's route
// every 10 ms and lists the modules every 20 ms. For each phase it prints the controller's loop
// delay (p50 / p99 / max), the time from the call to the stuck module's answer and to its FAILED
// state in the list, and the healthy module's calls (count, failures, p99). Goal: loop delay p99 at
// most 50 ms, the stuck worker ended (FAILED) within 1 s of the call, no failed healthy call.
//
//   npx tsx scripts/bench/module-isolation.ts [--rounds 3]
//
// Prints a table and one machine-readable line (prefix `BENCH_JSON `).
import { spawn } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { createInterface } from "node:readline";
import { setTimeout as sleep } from "node:timers/promises";
import { signBundleDigest } from "../../src/modules/bundle/signature.js";
import { login, TEST_ADMIN_PASSWORD } from "../../test/support/controller.js";
import { buildBundle, DEVELOPMENT_KEY_PATH, manifestOf, sha256Of } from "../../test/modules/support/bundles.js";
import { uploadModule } from "../../test/modules/support/module-api.js";
import { argNumber, percentile, printTable, progress, uptimeLine } from "./system-bench-support.js";

const rounds = argNumber("--rounds", 3);
const START_TIMEOUT_MS = 60_000;
const PROBE_INTERVAL_MS = 10;
const LIST_INTERVAL_MS = 20;
/** How long a phase waits for the stuck module to be FAILED before it is reported as not ended. */
const PHASE_TIMEOUT_MS = 15_000;

const SOURCES = {
  echo: `export default { registerRoutes(routes) { routes.get("ping", (_req, res) => res.json({ ok: true })); } };`,
  spin: `export default { registerRoutes(routes) { routes.get("spin", () => { for (;;) {} }); } };`,
  // Yields now and then, so its heartbeat goes on and the heap limit (not the hang watchdog) ends it.
  hog: `export default { registerRoutes(routes) { routes.get("grow", async () => { const kept = []; for (;;) { kept.push(new Array(1e5).fill(kept.length)); if (kept.length % 8 === 0) await new Promise((r) => setImmediate(r)); } }); } };`,
};

interface LoopReport {
  phase: string;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  samples: number;
}

async function startControllerProcess(dataDir: string): Promise<{ url: string; mark(phase: string): Promise<LoopReport>; stop(): Promise<void> }> {
  const child = spawn(process.execPath, ["--import", "tsx", join(import.meta.dirname, "archive-event-loop-controller.ts"), dataDir], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  const waiting: ((line: string) => void)[] = [];
  createInterface({ input: child.stdout! }).on("line", (line) => waiting.shift()?.(line));
  const nextLine = (prefix: string, timeoutMs: number) =>
    new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no ${prefix} line from the controller within ${timeoutMs} ms`)), timeoutMs);
      const take = (line: string) => {
        if (!line.startsWith(prefix)) return void waiting.unshift(take);
        clearTimeout(timer);
        resolve(line.slice(prefix.length));
      };
      waiting.push(take);
    });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const { url } = JSON.parse(await nextLine("READY ", START_TIMEOUT_MS)) as { url: string };
  return {
    url,
    mark: async (phase) => {
      const answer = nextLine("LOOP ", 10_000);
      child.stdin!.write(`mark ${phase}\n`);
      return JSON.parse(await answer) as LoopReport;
    },
    stop: async () => {
      child.kill("SIGTERM");
      await exited;
    },
  };
}

/** Calls `url` every `intervalMs` until stopped: the latencies (sorted) and the failed calls. */
function probe(url: string, token: string, intervalMs: number): { stop(): Promise<{ latencies: number[]; failures: number }> } {
  const latencies: number[] = [];
  let failures = 0;
  let running = true;
  const loop = (async () => {
    while (running) {
      const started = performance.now();
      try {
        const res = await fetch(url, { headers: { authorization: `Bearer ${token}` }, signal: AbortSignal.timeout(5_000) });
        await res.arrayBuffer();
        if (res.status === 200) latencies.push(performance.now() - started);
        else failures++;
      } catch {
        failures++;
      }
      await sleep(intervalMs);
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      return { latencies: latencies.sort((a, b) => a - b), failures };
    },
  };
}

interface PhaseResult {
  phase: string;
  loop: LoopReport;
  /** The stuck call's answer: status and ms after the call. */
  stuckAnswer: { status: number | string; ms: number } | null;
  /** Ms from the call until the list showed the module FAILED (null: not within the phase's limit). */
  failedAfterMs: number | null;
  failureCause: string | null;
  healthy: { calls: number; failures: number; p99Ms: number };
  version: { calls: number; failures: number; p99Ms: number };
}

async function main(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), "cloud-bench-module-isolation-"));
  const controller = await startControllerProcess(join(dir, "controller"));
  try {
    const token = await login(controller.url, "admin", TEST_ADMIN_PASSWORD);
    const key = await readFile(DEVELOPMENT_KEY_PATH, "utf8");
    const install = async (id: string, source: string) => {
      const bundle = await buildBundle(join(dir, "src", id), join(dir, `${id}.tgz`), {
        "META-INF/cloud/module.yaml": manifestOf(id),
        "backend/index.js": source,
      });
      const answer = await uploadModule(controller.url, token, bundle, signBundleDigest(await sha256Of(bundle), key));
      if (answer.status !== 201) throw new Error(`installing ${id}: ${answer.status} ${answer.text}`);
    };
    progress("installing the modules");
    await install("echo", SOURCES.echo);
    for (let n = 1; n <= rounds; n++) {
      await install(`spin-${n}`, SOURCES.spin);
      await install(`hog-${n}`, SOURCES.hog);
    }

    const results: PhaseResult[] = [];
    const round1 = (v: number) => Math.round(v * 10) / 10;
    const phase = async (name: string, stuck: { id: string; route: string } | null) => {
      progress(name);
      await controller.mark(`before-${name}`);
      const healthy = probe(`${controller.url}/api/v1/modules/echo/ping`, token, PROBE_INTERVAL_MS);
      const version = probe(`${controller.url}/api/v1/system/version`, token, PROBE_INTERVAL_MS);
      const started = performance.now();
      let stuckAnswer: PhaseResult["stuckAnswer"] = null;
      let failedAfterMs: number | null = null;
      let failureCause: string | null = null;
      if (stuck) {
        const call = fetch(`${controller.url}/api/v1/modules/${stuck.id}/${stuck.route}`, {
          headers: { authorization: `Bearer ${token}` },
          signal: AbortSignal.timeout(PHASE_TIMEOUT_MS),
        })
          .then(async (res) => {
            await res.arrayBuffer();
            stuckAnswer = { status: res.status, ms: Math.round(performance.now() - started) };
          })
          .catch((err: Error) => void (stuckAnswer = { status: err.name, ms: Math.round(performance.now() - started) }));
        while (failedAfterMs === null && performance.now() - started < PHASE_TIMEOUT_MS) {
          const res = await fetch(`${controller.url}/api/v1/modules`, { headers: { authorization: `Bearer ${token}` } });
          const views = (await res.json()) as { id: string; state: string; failure?: { cause?: string } | null }[];
          const view = views.find((v) => v.id === stuck.id);
          if (view?.state === "FAILED") {
            failedAfterMs = Math.round(performance.now() - started);
            failureCause = view.failure?.cause ?? null;
          } else await sleep(LIST_INTERVAL_MS);
        }
        await call;
        await sleep(500); // the loop after the worker is gone belongs to the phase too
      } else await sleep(2_000);
      const h = await healthy.stop();
      const v = await version.stop();
      const loop = await controller.mark(name);
      results.push({
        phase: name,
        loop,
        stuckAnswer,
        failedAfterMs,
        failureCause,
        healthy: { calls: h.latencies.length + h.failures, failures: h.failures, p99Ms: round1(percentile(h.latencies, 99)) },
        version: { calls: v.latencies.length + v.failures, failures: v.failures, p99Ms: round1(percentile(v.latencies, 99)) },
      });
    };

    await phase("idle", null);
    for (let n = 1; n <= rounds; n++) {
      await phase(`loop-${n}`, { id: `spin-${n}`, route: "spin" });
      await phase(`alloc-${n}`, { id: `hog-${n}`, route: "grow" });
    }

    const rows: [string, string][] = results.map((r) => {
      const answer = r.stuckAnswer as PhaseResult["stuckAnswer"];
      const stuck =
        r.phase === "idle"
          ? ""
          : `; answered ${answer ? `${answer.status} after ${answer.ms} ms` : "never"}, FAILED (${r.failureCause ?? "?"}) after ${r.failedAfterMs ?? "> limit"} ms`;
      return [
        r.phase,
        `loop delay p50/p99/max ${r.loop.p50Ms}/${r.loop.p99Ms}/${r.loop.maxMs} ms${stuck}; echo ${r.healthy.calls} calls, ${r.healthy.failures} failed, p99 ${r.healthy.p99Ms} ms; version p99 ${r.version.p99Ms} ms (${r.version.failures} failed)`,
      ];
    });
    rows.push(["machine", uptimeLine()]);
    printTable("a stuck module and the controller's event loop", rows);
    const stuckPhases = results.filter((r) => r.phase !== "idle");
    const goalMet = stuckPhases.every((r) => r.loop.p99Ms <= 50 && r.failedAfterMs !== null && r.failedAfterMs <= 1_000 && r.healthy.failures === 0);
    console.log(`goal (loop delay p99 <= 50 ms, stuck worker FAILED within 1 s, no failed call to the healthy module): ${goalMet ? "met" : "NOT met"}`);
    console.log(`BENCH_JSON ${JSON.stringify({ rounds, phases: results, goalMet, node: process.version })}`);
  } finally {
    await controller.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
