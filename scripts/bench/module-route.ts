// What the worker boundary costs a module route, and how long an install takes. A development
// controller runs as a child process (test/support/controller.ts, default module worker limits);
// this process installs a trivial module (`GET /api/v1/modules/echo/ping` answers {"ok":true} from
// its worker), then calls, one at a time and interleaved so both see the same machine:
//   - the module route (authentication, permissions, the dispatcher, the worker round trip),
//   - GET /api/v1/auth/me (a built-in route behind the same authentication),
//   - GET /api/v1/system/version (a built-in public route: the HTTP floor).
// It prints p50/p99/max of each and the module/built-in ratio (goal at p50: at most 2). Then it
// removes and installs the module `--installs` times (upload of the signed bundle until 201, and
// until its route answers), then installs and removes the example module (examples/motd-module,
// esbuild-bundled with the SDK) as many times, and prints those times.
//
//   npx tsx scripts/bench/module-route.ts [--calls 2000] [--warmup 200] [--installs 10]
//
// Prints tables and one machine-readable line (prefix `BENCH_JSON `).
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { buildMotdModule } from "../../examples/motd-module/build.js";
import { signBundleDigest } from "../../src/modules/bundle/signature.js";
import { startTestController } from "../../test/support/controller.js";
import { buildBundle, DEVELOPMENT_KEY_PATH, manifestOf, sha256Of } from "../../test/modules/support/bundles.js";
import { uploadModule } from "../../test/modules/support/module-api.js";
import { argNumber, printTable, progress, spread, uptimeLine } from "./system-bench-support.js";

const calls = argNumber("--calls", 2000);
const warmup = argNumber("--warmup", 200);
const installs = argNumber("--installs", 10);
const CALL_TIMEOUT_MS = 10_000;

const ECHO = `export default { registerRoutes(routes) { routes.get("ping", (_req, res) => res.json({ ok: true })); } };`;

async function timedGet(url: string, token: string | null): Promise<number> {
  const started = performance.now();
  const res = await fetch(url, { headers: token ? { authorization: `Bearer ${token}` } : {}, signal: AbortSignal.timeout(CALL_TIMEOUT_MS) });
  await res.arrayBuffer();
  const ms = performance.now() - started;
  if (res.status !== 200) throw new Error(`GET ${url}: ${res.status}`);
  return ms;
}

async function main(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), "cloud-bench-module-route-"));
  // The calls go far beyond the per-user and per-IP request limits, which are not what is measured.
  const controller = await startTestController({ rateLimit: { perIpPerMinute: 1_000_000, perUserPerMinute: 1_000_000 } });
  try {
    const token = controller.adminToken;
    const key = await readFile(DEVELOPMENT_KEY_PATH, "utf8");
    const bundle = await buildBundle(join(dir, "echo"), join(dir, "echo-1.0.0.tgz"), {
      "META-INF/cloud/module.yaml": manifestOf("echo"),
      "backend/index.js": ECHO,
    });
    const signature = signBundleDigest(await sha256Of(bundle), key);
    const install = async () => {
      const started = performance.now();
      const answer = await uploadModule(controller.url, token, bundle, signature);
      const uploadMs = performance.now() - started;
      if (answer.status !== 201) throw new Error(`installing echo: ${answer.status} ${answer.text}`);
      await timedGet(`${controller.url}/api/v1/modules/echo/ping`, token);
      return { uploadMs, routeMs: performance.now() - started };
    };
    await install();
    const targets = {
      module: `${controller.url}/api/v1/modules/echo/ping`,
      authMe: `${controller.url}/api/v1/auth/me`,
      version: `${controller.url}/api/v1/system/version`,
    };
    progress(`warming up (${warmup} calls each)`);
    for (let i = 0; i < warmup; i++) {
      await timedGet(targets.module, token);
      await timedGet(targets.authMe, token);
      await timedGet(targets.version, null);
    }
    progress(`measuring (${calls} calls each, interleaved)`);
    const samples = { module: [] as number[], authMe: [] as number[], version: [] as number[] };
    for (let i = 0; i < calls; i++) {
      samples.module.push(await timedGet(targets.module, token));
      samples.authMe.push(await timedGet(targets.authMe, token));
      samples.version.push(await timedGet(targets.version, null));
    }
    for (const list of Object.values(samples)) list.sort((a, b) => a - b);
    const precise = (sorted: number[], p: number) => Math.round(sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] * 100) / 100;
    const row = (name: string, sorted: number[]): [string, string] => [
      name,
      `p50 ${precise(sorted, 50)} ms  p99 ${precise(sorted, 99)} ms  max ${spread(sorted).maxMs} ms`,
    ];

    progress(`installing ${installs} times (delete, then upload)`);
    const installTimes: { uploadMs: number; routeMs: number }[] = [];
    for (let i = 0; i < installs; i++) {
      const removed = await fetch(`${controller.url}/api/v1/modules/platform/echo`, { method: "DELETE", headers: { authorization: `Bearer ${token}` } });
      if (removed.status !== 204) throw new Error(`removing echo: ${removed.status}`);
      installTimes.push(await install());
    }
    progress(`installing the example module (motd) ${installs} times`);
    const motd = await buildMotdModule({ outDir: join(dir, "motd") });
    const motdSignature = await readFile(motd.signature, "utf8");
    const motdTimes: number[] = [];
    for (let i = 0; i < installs; i++) {
      const started = performance.now();
      const answer = await uploadModule(controller.url, token, motd.bundle, motdSignature);
      if (answer.status !== 201) throw new Error(`installing motd: ${answer.status} ${answer.text}`);
      await timedGet(`${controller.url}/api/v1/modules/motd/message`, token);
      motdTimes.push(performance.now() - started);
      const removed = await fetch(`${controller.url}/api/v1/modules/platform/motd`, { method: "DELETE", headers: { authorization: `Bearer ${token}` } });
      if (removed.status !== 204) throw new Error(`removing motd: ${removed.status}`);
    }
    motdTimes.sort((a, b) => a - b);
    const motdKiB = Math.round((await readFile(motd.bundle)).byteLength / 102.4) / 10;
    const uploads = installTimes.map((t) => t.uploadMs).sort((a, b) => a - b);
    const routes = installTimes.map((t) => t.routeMs).sort((a, b) => a - b);

    const ratioP50 = precise(samples.module, 50) / precise(samples.authMe, 50);
    const ratioP99 = precise(samples.module, 99) / precise(samples.authMe, 99);
    printTable(`Route calls (sequential, ${calls} each), ${uptimeLine()}`, [
      row("module route (worker)", samples.module),
      row("GET /api/v1/auth/me", samples.authMe),
      row("GET /api/v1/system/version", samples.version),
      ["module / auth/me at p50", ratioP50.toFixed(2)],
      ["module / auth/me at p99", ratioP99.toFixed(2)],
    ]);
    printTable(`Install (${installs} times, bundle ${Math.round((await readFile(bundle)).byteLength / 102.4) / 10} KiB)`, [
      ["upload until 201", `p50 ${Math.round(uploads[Math.floor(uploads.length / 2)])} ms  max ${Math.round(uploads.at(-1)!)} ms`],
      ["upload until the route answers", `p50 ${Math.round(routes[Math.floor(routes.length / 2)])} ms  max ${Math.round(routes.at(-1)!)} ms`],
      [
        `motd (${motdKiB} KiB) until its route answers`,
        `p50 ${Math.round(motdTimes[Math.floor(motdTimes.length / 2)])} ms  max ${Math.round(motdTimes.at(-1)!)} ms`,
      ],
    ]);
    console.log(
      `BENCH_JSON ${JSON.stringify({
        calls,
        module: { p50Ms: precise(samples.module, 50), p99Ms: precise(samples.module, 99) },
        authMe: { p50Ms: precise(samples.authMe, 50), p99Ms: precise(samples.authMe, 99) },
        version: { p50Ms: precise(samples.version, 50), p99Ms: precise(samples.version, 99) },
        ratioP50,
        ratioP99,
        install: {
          uploadP50Ms: Math.round(uploads[Math.floor(uploads.length / 2)]),
          routeP50Ms: Math.round(routes[Math.floor(routes.length / 2)]),
          motdP50Ms: Math.round(motdTimes[Math.floor(motdTimes.length / 2)]),
        },
        load: uptimeLine(),
      })}`,
    );
  } finally {
    await controller.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
