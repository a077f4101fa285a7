// Dashboard benchmark: the built dashboard in headless Chromium (Debian's, through playwright-core)
// against the real HTTP app on the embedded store, seeded with 1,000 groups and 10,000 instance
// documents (the REST benchmark's seed). Measures:
//
// - the initial load: bytes on the wire (gzip) of the page, its script and its stylesheet;
// - first load to interactive on the loopback: the sign-in form usable, cold cache and warm;
//   and, signed in, the overview showing its counts;
// - with 1,000 groups and 10,000 instances: the overview, the group list and the instance list
//   interactive (their data on screen);
// - a state change on screen after the REST write that caused it (a group put in and out of
//   maintenance, seen on the group list) while 200 events a second flow through the event stream,
//   with the page's frame times. The noise is half GROUP_AGGREGATES_UPDATED of other groups (each
//   makes the list fetch its 1,000 groups again, at most every 400 ms) and half NODE_STATUS: types
//   the page handles and the controller itself does not act on, so what is measured is the page.
//
//   npx tsx scripts/bench/dashboard.ts [--events-per-second 200] [--writes 10] [--runs 5]
//
// Prints a table and one machine-readable JSON line (prefix `BENCH_JSON `).
import { availableParallelism, loadavg } from "node:os";
import { performance } from "node:perf_hooks";
import type { Page } from "playwright-core";

const groupsCount = 1_000;
const instancesPerGroup = 10;
const nodesCount = 20;
const seedParallelism = 64;
const rateLimitPerMinuteBench = 1_000_000_000;
/** The group whose maintenance flips: first in name order, so it is on the list's first page. */
const targetGroup = "group-0000";

function argValue(name: string, fallback: number): number {
  const at = process.argv.indexOf(name);
  if (at < 0) return fallback;
  const value = Number(process.argv[at + 1]);
  if (!Number.isFinite(value) || value <= 0) throw new Error(`${name} needs a positive number`);
  return value;
}

const progress = (message: string) => process.stderr.write(`bench: ${message}\n`);
const round = (n: number, digits = 0) => Math.round(n * 10 ** digits) / 10 ** digits;
const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
};
const median = (values: number[]) => percentile(values, 50);

async function inBatches<T>(items: T[], fn: (item: T) => Promise<unknown>): Promise<void> {
  for (let i = 0; i < items.length; i += seedParallelism) await Promise.all(items.slice(i, i + seedParallelism).map(fn));
}

/** Milliseconds from `start()` until `ready` resolves, measured in this process. */
async function timed(start: () => Promise<unknown>, ready: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await start();
  await ready();
  return performance.now() - t0;
}

async function main(): Promise<void> {
  const eventsPerSecond = argValue("--events-per-second", 200);
  const writes = argValue("--writes", 10);
  const runs = argValue("--runs", 5);
  const { startTestApp } = await import("../../test/support/http-app.js");
  const { launchBrowser } = await import("../../test/e2e/dashboard/browser.js");
  const app = await startTestApp({
    config: { rateLimit: { perIpPerMinute: rateLimitPerMinuteBench, perUserPerMinute: rateLimitPerMinuteBench }, logging: { level: "WARN" } },
  });
  const browser = await launchBrowser();
  const loadAtStart = loadavg()[0];
  try {
    const groupNames = Array.from({ length: groupsCount }, (_, i) => `group-${String(i).padStart(4, "0")}`);
    await inBatches(groupNames, (name) => app.groups.create({ name, platform: "paper", maxInstances: 20 }));
    for (let n = 0; n < nodesCount; n++) await app.nodes.upsert(`node-${n}`, { host: `10.0.0.${n + 1}`, totalMemoryMb: 65536 });
    const startedAt = new Date(Date.now() - 3600_000).toISOString();
    const instanceIds: string[] = [];
    const docs = groupNames.flatMap((group, g) =>
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
    await inBatches(docs, (doc) => app.instances.save(doc));
    progress(`seeded ${groupsCount} groups and ${docs.length} instances`);
    const token = await app.tokenFor("ADMIN");
    const ui = `${app.baseUrl}/ui/`;
    const handoff = (route: string) => `${ui}#${route}?handoff=${encodeURIComponent(JSON.stringify({ token, lastSequence: null }))}`;

    // Initial load: what the browser received for the page, its script and its stylesheet.
    const page = await browser.newPage();
    const assetBytes: { url: string; bytes: number }[] = [];
    page.on("requestfinished", (request) => {
      const url = request.url();
      if (!url.startsWith(ui) || url.includes("/api/")) return;
      void request.sizes().then((s) => assetBytes.push({ url: url.slice(ui.length) || "index.html", bytes: s.responseBodySize + s.responseHeadersSize }));
    });
    const usable = (p: Page) => p.getByLabel("Username").waitFor({ state: "visible" });
    const coldMs = await timed(
      () => page.goto(ui),
      () => usable(page),
    );
    await page.waitForTimeout(200);
    const initialLoadBytes = assetBytes.reduce((sum, a) => sum + a.bytes, 0);
    const warm: number[] = [];
    for (let i = 0; i < runs; i++)
      warm.push(
        await timed(
          () => page.goto(`${ui}?run=${i}`),
          () => usable(page),
        ),
      );

    progress(`initial load measured (${initialLoadBytes} bytes)`);
    // Signed in (the token handed over in the fragment, as a failover does): overview, groups, instances with their data.
    const overview: number[] = [];
    const groupList: number[] = [];
    const instanceList: number[] = [];
    for (let i = 0; i < runs; i++) {
      const tab = await browser.newPage();
      overview.push(
        await timed(
          () => tab.goto(handoff("/overview")),
          () => tab.locator('[data-stat="groups"] .value', { hasText: String(groupsCount) }).waitFor(),
        ),
      );
      await tab.close();
      const g = await browser.newPage();
      groupList.push(
        await timed(
          () => g.goto(handoff("/groups")),
          () => g.locator('table[aria-label="Groups"] tbody tr').nth(99).waitFor(),
        ),
      );
      await g.close();
      const n = await browser.newPage();
      instanceList.push(
        await timed(
          () => n.goto(handoff("/instances")),
          () => n.locator('table[aria-label="Instances"] tbody tr').nth(49).waitFor(),
        ),
      );
      await n.close();
    }

    progress("page loads measured");
    // A state change on screen at N events/s.
    const live = await browser.newPage();
    await live.goto(handoff("/groups"));
    await live.locator(".stream[data-status='live']").waitFor();
    await live.locator(`tr[data-key="${targetGroup}"]`).waitFor();
    await live.evaluate(() => {
      const w = globalThis as any;
      w.__frames = [] as number[];
      let last = w.performance.now();
      const loop = (t: number) => {
        w.__frames.push(t - last);
        last = t;
        if (!w.__stopFrames) w.requestAnimationFrame(loop);
      };
      w.requestAnimationFrame(loop);
    });
    const others = instanceIds.filter((id) => !id.startsWith(`${targetGroup}-`));
    let published = 0;
    const noiseStarted = performance.now();
    // Events are published in small bursts every 20 ms so the rate holds on a busy machine.
    const noise = setInterval(() => {
      const due = Math.floor(((performance.now() - noiseStarted) / 1000) * eventsPerSecond) - published;
      for (let k = 0; k < due; k++, published++) {
        const id = others[(published * 7919) % others.length];
        app.events.publish("INSTANCE_STATE_CHANGED", {
          instanceId: id,
          group: id.slice(0, 10),
          nodeId: "node-0",
          oldState: "RUNNING",
          newState: published % 2 ? "RUNNING" : "DRAINING",
        });
      }
    }, 20);
    const latencies: number[] = [];
    try {
      await new Promise((r) => setTimeout(r, 2_000));
      for (let i = 0; i < writes; i++) {
        const maintenance = i % 2 === 0;
        const want = maintenance ? "DRAIN" : "UP";
        const seen = live.evaluate(
          ({ key, text }) =>
            new Promise<number>((resolve) => {
              const w = globalThis as any;
              const check = () => {
                const row = w.document.querySelector(`tr[data-key="${key}"]`);
                if (row && row.textContent.includes(text)) {
                  observer.disconnect();
                  resolve(w.performance.timeOrigin + w.performance.now());
                }
              };
              const observer = new w.MutationObserver(check);
              observer.observe(w.document.body, { subtree: true, childList: true, characterData: true });
              check();
            }),
          { key: targetGroup, text: want },
        );
        await new Promise((r) => setTimeout(r, 300));
        const writtenAt = Date.now();
        const res = await app.request("PATCH", `/api/v1/groups/${targetGroup}`, { token, body: { maintenance } });
        if (res.status !== 200) throw new Error(`PATCH: ${res.status} ${res.text}`);
        // Bounded: a change not seen within 10 s counts as 10 s.
        const seenAt = await Promise.race([seen, new Promise<number>((r) => setTimeout(() => r(Date.now()), 10_000))]);
        latencies.push(seenAt - writtenAt);
        await new Promise((r) => setTimeout(r, 500));
      }
    } finally {
      clearInterval(noise);
    }
    const seconds = (performance.now() - noiseStarted) / 1000;
    const frames = (await live.evaluate(() => {
      const w = globalThis as any;
      w.__stopFrames = true;
      return w.__frames as number[];
    })) as number[];
    const framesMeasured = frames.slice(5);

    const result = {
      machine: { cores: availableParallelism(), loadAtStart: round(loadAtStart, 2), loadAtEnd: round(loadavg()[0], 2) },
      initialLoadBytes,
      initialLoadAssets: assetBytes,
      firstLoadColdMs: round(coldMs),
      firstLoadWarmMedianMs: round(median(warm)),
      firstLoadWarmMaxMs: round(Math.max(...warm)),
      overviewMedianMs: round(median(overview)),
      overviewMaxMs: round(Math.max(...overview)),
      groupListMedianMs: round(median(groupList)),
      groupListMaxMs: round(Math.max(...groupList)),
      instanceListMedianMs: round(median(instanceList)),
      instanceListMaxMs: round(Math.max(...instanceList)),
      eventsPerSecond: round(published / seconds),
      stateChangeMedianMs: round(median(latencies)),
      stateChangeMaxMs: round(Math.max(...latencies)),
      stateChangeLatenciesMs: latencies.map((l) => round(l)),
      frames: framesMeasured.length,
      frameP50Ms: round(percentile(framesMeasured, 50), 1),
      frameP99Ms: round(percentile(framesMeasured, 99), 1),
      frameMaxMs: round(Math.max(...framesMeasured), 1),
    };
    const rows: [string, string, string][] = [
      ["initial load (gzip, on the wire)", `${(initialLoadBytes / 1024).toFixed(1)} KB`, "≤ 150 KB"],
      ["first load to interactive, cold", `${result.firstLoadColdMs} ms`, "≤ 1000 ms"],
      ["first load to interactive, warm (median / max)", `${result.firstLoadWarmMedianMs} / ${result.firstLoadWarmMaxMs} ms`, "≤ 1000 ms"],
      ["overview with its counts (median / max)", `${result.overviewMedianMs} / ${result.overviewMaxMs} ms`, "≤ 1500 ms"],
      ["group list, 100 of 1,000 rows (median / max)", `${result.groupListMedianMs} / ${result.groupListMaxMs} ms`, "≤ 1500 ms"],
      ["instance list, 50 of 10,000 (median / max)", `${result.instanceListMedianMs} / ${result.instanceListMaxMs} ms`, "≤ 1500 ms"],
      [
        `state change on screen at ${result.eventsPerSecond} events/s (median / max)`,
        `${result.stateChangeMedianMs} / ${result.stateChangeMaxMs} ms`,
        "≤ 1000 ms",
      ],
      ["frame time (p50 / p99 / max)", `${result.frameP50Ms} / ${result.frameP99Ms} / ${result.frameMaxMs} ms`, "p99 ≤ 50 ms"],
    ];
    for (const [what, value, goal] of rows) process.stdout.write(`${what.padEnd(58)} ${value.padStart(18)}   (${goal})\n`);
    process.stdout.write(`load average ${result.machine.loadAtStart} at start, ${result.machine.loadAtEnd} at end, ${result.machine.cores} cores\n`);
    process.stdout.write(`BENCH_JSON ${JSON.stringify(result)}\n`);
  } finally {
    await browser.close();
    await app.close();
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
