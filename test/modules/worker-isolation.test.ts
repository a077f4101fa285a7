// Each module runs in its own worker thread: a module that throws in a hook, loops forever or
// exhausts its heap is FAILED with no routes while the controller's thread and the other modules
// go on; a module that leaves nothing running ends its thread after unload, one that leaves a timer
// behind does not (a leaked loader).
import assert from "node:assert/strict";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { validateModuleManifest } from "../../src/modules/manifest/manifest.js";
import { ModuleRuntime, type ModuleRuntimeDeps } from "../../src/modules/host/module-runtime.js";
import type { ModuleWorker } from "../../src/modules/host/module-worker.js";
import { systemClock } from "../../src/shared/clock.js";
import { eventually } from "../support/wait.js";

const silentLogger = {
  trace() {},
  debug() {},
  info() {},
  warn() {},
  error() {},
  child() {
    return silentLogger;
  },
} as never;

describe("module worker isolation", () => {
  let dir: string;
  const retired: ModuleWorker[] = [];
  const failed: string[] = [];
  const runtimes: ModuleRuntime[] = [];
  const deps = (hangTimeoutMs = 500, heapMb = 64): ModuleRuntimeDeps => ({
    controllerId: "c1",
    tuning: { heapMb, hangTimeoutMs, hookTimeoutMs: 10_000, callTimeoutMs: 30_000, heartbeatIntervalMs: 50 },
    clock: systemClock,
    logger: silentLogger,
    rpc: async () => null,
    onFailed: (runtime) => failed.push(runtime.id),
    retire: (_runtime, worker) => retired.push(worker),
  });

  /** A module whose backend is `source` (an ES module exporting `default`). */
  const runtimeOf = async (id: string, source: string, hangTimeoutMs?: number, heapMb?: number) => {
    const directory = join(dir, id);
    await mkdir(directory, { recursive: true });
    await writeFile(join(directory, "index.mjs"), source);
    const manifest = validateModuleManifest({ id, version: "1.0.0", backend: { entrypoint: "index.mjs" } });
    const runtime = new ModuleRuntime({ manifest, directory, bundleSha256: "0".repeat(64), backendHash: "0".repeat(64) }, deps(hangTimeoutMs, heapMb));
    runtimes.push(runtime);
    return runtime;
  };
  const started = async (runtime: ModuleRuntime) => {
    assert.equal(await runtime.install(), true, runtime.failure?.reason);
    assert.equal(await runtime.start(), true, runtime.failure?.reason);
    assert.equal(runtime.state, "ACTIVE");
    return runtime;
  };
  const get = (runtime: ModuleRuntime, index = 0) => runtime.call(index, { method: "GET", path: "/x", pathParams: {}, query: {}, headers: {} });

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "module-isolation-"));
  });
  after(async () => {
    for (const runtime of runtimes) await runtime.worker?.terminate();
    for (const worker of retired) await worker.terminate();
    await rm(dir, { recursive: true, force: true });
  });

  const echo = `export default { registerRoutes(routes) { routes.get("ping", (req, res) => res.json({ pong: true, thread: "worker" })); } };`;

  it("runs the hooks in order and serves a route from the worker", async () => {
    const calls = await runtimeOf(
      "echo",
      `const seen = []; export default { load() { seen.push("load"); }, registerRoutes(routes) { seen.push("routes"); routes.get("hooks", (req, res) => res.json(seen)); }, start() { seen.push("start"); } };`,
    );
    await started(calls);
    assert.deepEqual(
      calls.routes.map((r) => `${r.method} ${r.template.text}`),
      ["GET hooks"],
    );
    const response = await get(calls);
    assert.deepEqual(JSON.parse(response.body), ["load", "routes", "start"]);
  });

  for (const hook of ["load", "registerRoutes", "start"] as const) {
    it(`marks a module whose ${hook} hook throws FAILED, with no routes`, async () => {
      const id = `throws-in-${hook.toLowerCase()}`;
      const runtime = await runtimeOf(
        id,
        `export default { registerRoutes(routes) { routes.get("a", () => {}); ${hook === "registerRoutes" ? "throw new Error('boom');" : ""} }, ${hook === "registerRoutes" ? "" : `${hook}() { throw new Error("boom in ${hook}"); }`} };`,
      );
      const installed = await runtime.install();
      if (installed) assert.equal(await runtime.start(), false);
      assert.equal(runtime.state, "FAILED");
      assert.deepEqual(runtime.routes, []);
      assert.equal(runtime.failure?.cause, "hook");
      assert.match(runtime.failure!.reason, new RegExp(`${hook} hook: .*boom`));
      assert.ok(failed.includes(id));
    });
  }

  it("ends a module stuck in an endless loop, FAILED with no routes, while the controller's thread and another module go on", async () => {
    const healthy = await started(await runtimeOf("healthy", echo));
    const looping = await started(
      await runtimeOf("looping", `export default { registerRoutes(routes) { routes.get("spin", () => { for (;;) {} }); } };`, 1_500),
    );
    const stuck = get(looping);
    stuck.catch(() => undefined);
    // While the looping worker still spins (before its hang timeout), this thread and the other worker answer.
    let ticks = 0;
    const ticker = setInterval(() => ticks++, 10);
    try {
      const answered = await get(healthy);
      assert.equal(answered.status, 200);
      assert.equal(looping.state, "ACTIVE", "the healthy module answered before the looping one was ended");
      await assert.rejects(stuck, /stopped responding/);
      assert.equal(looping.state, "FAILED");
      assert.equal(looping.failure?.cause, "hung");
      assert.deepEqual(looping.routes, []);
      assert.ok(ticks > 0, "the controller's event loop kept turning");
      assert.equal((await get(healthy)).status, 200);
    } finally {
      clearInterval(ticker);
    }
  });

  it("ends a module that exhausts its heap, FAILED, while the controller and another module go on", async () => {
    const healthy = await started(await runtimeOf("healthy-2", echo));
    const hog = await started(
      await runtimeOf(
        "hog",
        `const kept = []; export default { registerRoutes(routes) { routes.get("eat", () => { for (;;) kept.push(new Array(100000).fill(Math.random())); }); } };`,
        5_000,
        32,
      ),
    );
    const heapBefore = process.memoryUsage().heapUsed;
    await assert.rejects(get(hog));
    await eventually(() => hog.state === "FAILED", "the hog FAILED", { timeoutMs: 30_000 });
    assert.ok(["heap", "hung"].includes(hog.failure!.cause), hog.failure!.reason);
    assert.deepEqual(hog.routes, []);
    assert.equal((await get(healthy)).status, 200);
    assert.ok(process.memoryUsage().heapUsed - heapBefore < 64 * 1024 * 1024, "the controller's own heap did not take the module's allocations");
  });

  it("fails a route call whose module dies mid-call, and refuses calls once it is FAILED", async () => {
    const dying = await started(await runtimeOf("dying", `export default { registerRoutes(routes) { routes.get("die", () => { process.exit(3); }); } };`));
    await assert.rejects(get(dying));
    await eventually(() => dying.state === "FAILED", "the dying module FAILED");
    assert.equal(dying.failure?.cause, "crashed");
    await assert.rejects(get(dying), /is FAILED/);
  });

  it("lets a clean module's thread end after unload, and reports one that leaves a timer behind as still running", async () => {
    const clean = await started(await runtimeOf("clean", echo));
    await clean.remove();
    const cleanWorker = retired.at(-1)!;
    assert.equal(await cleanWorker.exited, 0);
    const leaky = await started(await runtimeOf("leaky", `export default { start() { setInterval(() => {}, 1000); } };`));
    await leaky.remove();
    const leakyWorker = retired.at(-1)!;
    const outcome = await Promise.race([leakyWorker.exited.then(() => "exited"), new Promise((resolve) => setTimeout(() => resolve("still running"), 1_000))]);
    assert.equal(outcome, "still running");
    await leakyWorker.terminate();
    assert.equal(await leakyWorker.exited, 1);
  });

  it("does not give a module the controller's environment", async () => {
    process.env.CLOUD_TEST_SECRET = "s3cret";
    const snoop = await started(
      await runtimeOf(
        "snoop",
        `export default { registerRoutes(routes) { routes.get("env", (req, res) => res.json({ secret: process.env.CLOUD_TEST_SECRET ?? null })); } };`,
      ),
    );
    assert.deepEqual(JSON.parse((await get(snoop)).body), { secret: null });
    delete process.env.CLOUD_TEST_SECRET;
  });
});
