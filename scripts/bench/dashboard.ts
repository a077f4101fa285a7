// Dashboard benchmark: the built dashboard (built first when stale, before the controller reads it)
// in headless Chromium (Debian's, through playwright-core) against the real HTTP app on the embedded
// store, seeded with 1,000 groups, 10,000 instance documents and 20 nodes (the REST benchmark's
// seed). Every time is taken in the page on its own clock (see dashboard-page.ts). Measures:
//
// - the initial load: bytes on the wire (gzip, with headers) of what the sign-in page loads;
// - first load to interactive on the loopback (the sign-in form on screen), cold (the browser's
//   first page: empty HTTP and code caches) and warm;
// - with 1,000 groups and 10,000 instances, signed in (the token handed over in the fragment, as a
//   failover does): the overview with its counts, the group list (its first row and its count of
//   1,000) and the instance list (its first row and its total of 10,000) on screen;
// - a state change on screen after the REST write that caused it (a group put in and out of
//   maintenance, sent by the page, seen on the group list) while N events a second flow through the
//   event stream, with the page's frame times and long tasks. The noise (`--noise`): `network`
//   (default) is what a busy network publishes: instance state changes of other groups' instances,
//   their groups' aggregates, node status and player joins and leaves, in equal shares; `refetch`
//   adds GROUP_UPDATED of other groups as a fifth share, which makes the page fetch the whole group
//   list again (at most once a second), the worst case for the page and the controller.
//
//   npx tsx scripts/bench/dashboard.ts [--events-per-second 200] [--writes 10] [--runs 5]
//                                       [--noise network|refetch] [--profile-dir DIR]
//
// --profile-dir writes CPU profiles (V8 .cpuprofile, read them with cpu-profile-summary.ts or
// Chromium's DevTools) of the page and of this process (the controller runs in it) over one extra
// overview load and over the state-change phase, and prints the overview's resource waterfall.
//
// Prints a table and one machine-readable JSON line (prefix `BENCH_JSON `).
import { mkdirSync, writeFileSync } from "node:fs";
import { Session } from "node:inspector/promises";
import { availableParallelism, loadavg } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { ensureDashboardBuilt } from "../dashboard.js";
import { loadTimed, startFrameWatch, stateChange, stopFrameWatch, type LoadTiming, type Target } from "./dashboard-page.js";

const groupsCount = 1_000;
const instancesPerGroup = 10;
const nodesCount = 20;
const seedParallelism = 64;
const rateLimitPerMinuteBench = 1_000_000_000;
/** The group whose maintenance flips: first in name order, so it is the list's first row. */
const targetGroup = "group-0000";
/** Bound of one page load and of one state change. */
const stepTimeoutMs = 20_000;

function argValue(name: string, fallback: number): number {
  const at = process.argv.indexOf(name);
  if (at < 0) return fallback;
  const value = Number(process.argv[at + 1]);
  if (!Number.isFinite(value) || value <= 0) throw new Error(`${name} needs a positive number`);
  return value;
}
const argText = (name: string): string | undefined => {
  const at = process.argv.indexOf(name);
  return at < 0 ? undefined : process.argv[at + 1];
};

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

function waterfall(what: string, timing: LoadTiming, base: string): string {
  const lines = [
    `${what}: shown at ${round(timing.shownMs)} ms (document ${round(timing.responseEndMs)} ms, DOMContentLoaded ${round(timing.domContentLoadedMs)} ms)`,
  ];
  for (const r of timing.resources)
    lines.push(
      `  ${round(r.startMs).toString().padStart(6)} → ${round(r.responseStartMs).toString().padStart(6)} → ${round(r.endMs).toString().padStart(6)} ms  ${r.name.replace(base, "")}`,
    );
  return lines.join("\n");
}

async function main(): Promise<void> {
  const eventsPerSecond = argValue("--events-per-second", 200);
  const writes = argValue("--writes", 10);
  const runs = argValue("--runs", 5);
  const noiseMode = argText("--noise") ?? "network";
  if (noiseMode !== "network" && noiseMode !== "refetch") throw new Error("--noise: network or refetch");
  const profileDir = argText("--profile-dir");
  if (profileDir) mkdirSync(profileDir, { recursive: true });

  // The controller reads the built dashboard when it starts: build it first.
  await ensureDashboardBuilt();
  const { startTestApp } = await import("../../test/support/http-app.js");
  const { launchBrowser } = await import("../../test/e2e/dashboard/browser.js");
  const app = await startTestApp({
    config: { rateLimit: { perIpPerMinute: rateLimitPerMinuteBench, perUserPerMinute: rateLimitPerMinuteBench }, logging: { level: "WARN" } },
  });
  const browser = await launchBrowser();
  const loadAtStart = loadavg()[0];
  const inspector = new Session();
  inspector.connect();
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
    const originUrl = `${ui}favicon.svg`;
    const handoff = (route: string) => `${ui}#${route}?handoff=${encodeURIComponent(JSON.stringify({ token, lastSequence: null }))}`;
    const load = async (url: string, target: Target, profile = false) => {
      const result = await loadTimed(browser.context, url, target, { timeoutMs: stepTimeoutMs, originUrl, profile });
      await result.page.close();
      return result;
    };
    const signInForm: Target = { selector: "form.sign-in input[name=username]" };

    // Cold: the browser's first page. The bytes: what it received for the page and its assets.
    const cold = await load(ui, signInForm);
    const assets = cold.timing.resources.filter((r) => !r.name.includes("/api/"));
    const documentBytes = cold.timing.documentTransferBytes;
    const initialLoadBytes = documentBytes + assets.reduce((sum, r) => sum + r.transferBytes, 0);
    const warm: number[] = [];
    for (let i = 0; i < runs; i++) warm.push((await load(`${ui}?run=${i}`, signInForm)).timing.shownMs);
    progress(`initial load measured (${initialLoadBytes} bytes)`);

    const overviewTarget: Target = { selector: '[data-stat="groups"] .value', text: String(groupsCount) };
    const groupsTarget: Target = { selector: `p[data-count="${groupsCount}"] + .table-wrap tr[data-key="${targetGroup}"]` };
    const instancesTarget: Target = { selector: `[data-total="${docs.length}"]` };
    const overview: number[] = [];
    const groupList: number[] = [];
    const instanceList: number[] = [];
    let overviewTiming: LoadTiming | null = null;
    let groupTiming: LoadTiming | null = null;
    for (let i = 0; i < runs; i++) {
      const o = await load(handoff("/overview"), overviewTarget);
      overview.push(o.timing.shownMs);
      overviewTiming ??= o.timing;
      const g = await load(handoff("/groups"), groupsTarget);
      groupList.push(g.timing.shownMs);
      groupTiming ??= g.timing;
      instanceList.push((await load(handoff("/instances"), { selector: `${instancesTarget.selector}` })).timing.shownMs);
    }
    progress("page loads measured");
    if (profileDir) {
      await inspector.post("Profiler.enable");
      await inspector.post("Profiler.start");
      const profiled = await load(handoff("/overview"), overviewTarget, true);
      const { profile } = await inspector.post("Profiler.stop");
      writeFileSync(join(profileDir, "page-overview.cpuprofile"), JSON.stringify(profiled.profile));
      writeFileSync(join(profileDir, "controller-overview.cpuprofile"), JSON.stringify(profile));
      process.stdout.write(`${waterfall("overview (profiled run)", profiled.timing, app.baseUrl)}\n`);
    }

    // A state change on screen at N events/s.
    const live = await browser.context.newPage();
    await live.goto(handoff("/groups"));
    await live.locator(".stream[data-status='live']").waitFor();
    await live.locator(`tr[data-key="${targetGroup}"]`).waitFor();
    const others = instanceIds.filter((id) => !id.startsWith(`${targetGroup}-`));
    const otherGroups = groupNames.filter((g) => g !== targetGroup);
    const shares = noiseMode === "refetch" ? 5 : 4;
    let published = 0;
    const publishNoise = (n: number) => {
      const pick = (list: string[]) => list[(n * 7919) % list.length];
      switch (n % shares) {
        case 0: {
          const id = pick(others);
          const up = n % 2 === 0;
          app.events.publish("INSTANCE_STATE_CHANGED", {
            instanceId: id,
            group: id.slice(0, 10),
            nodeId: "node-0",
            oldState: up ? "DRAINING" : "RUNNING",
            newState: up ? "RUNNING" : "DRAINING",
          });
          break;
        }
        case 1:
          app.events.publish("GROUP_AGGREGATES_UPDATED", { groupName: pick(otherGroups), runningInstances: n % 11, totalPlayers: n % 97 });
          break;
        case 2:
          app.events.publish("NODE_STATUS", {
            nodeId: `node-${n % nodesCount}`,
            cpuUsage: (n % 100) / 100,
            usedMemoryMb: n % 65536,
            totalMemoryMb: 65536,
            lastHeartbeatAt: new Date().toISOString(),
          });
          break;
        case 3:
          app.events.publish(n % 2 ? "PLAYER_CONNECTED" : "PLAYER_DISCONNECTED", {
            uuid: `00000000-0000-4000-8000-${String(n % 1000).padStart(12, "0")}`,
            name: `player${n % 1000}`,
            instanceId: pick(others),
          });
          break;
        default:
          app.events.publish("GROUP_UPDATED", { groupName: pick(otherGroups) });
      }
    };
    const noiseStarted = performance.now();
    // Events are published in small bursts every 20 ms so the rate holds on a busy machine.
    const noise = setInterval(() => {
      const due = Math.floor(((performance.now() - noiseStarted) / 1000) * eventsPerSecond) - published;
      for (let k = 0; k < due; k++, published++) publishNoise(published);
    }, 20);
    const latencies: number[] = [];
    const failures: string[] = [];
    let controllerLiveProfile: unknown = null;
    let pageLiveProfile: unknown = null;
    const pageCdp = profileDir ? await browser.context.newCDPSession(live) : null;
    try {
      await new Promise((r) => setTimeout(r, 2_000));
      await startFrameWatch(live);
      if (profileDir) {
        await inspector.post("Profiler.start");
        await pageCdp!.send("Profiler.enable");
        await pageCdp!.send("Profiler.start");
      }
      for (let i = 0; i < writes; i++) {
        const maintenance = i % 2 === 0;
        const result = await stateChange(live, {
          rowKey: targetGroup,
          from: maintenance ? "UP" : "DRAIN",
          to: maintenance ? "DRAIN" : "UP",
          method: "PATCH",
          url: `${app.baseUrl}/api/v1/groups/${targetGroup}`,
          token,
          body: { maintenance },
          timeoutMs: stepTimeoutMs,
        });
        if ("ms" in result) latencies.push(result.ms);
        else failures.push(result.failed);
        await new Promise((r) => setTimeout(r, 500));
      }
      if (profileDir) {
        pageLiveProfile = (await pageCdp!.send("Profiler.stop")).profile;
        controllerLiveProfile = (await inspector.post("Profiler.stop")).profile;
      }
    } finally {
      clearInterval(noise);
    }
    const seconds = (performance.now() - noiseStarted) / 1000;
    const { frames, longTasks } = await stopFrameWatch(live);
    if (profileDir) {
      writeFileSync(join(profileDir, "page-live.cpuprofile"), JSON.stringify(pageLiveProfile));
      writeFileSync(join(profileDir, "controller-live.cpuprofile"), JSON.stringify(controllerLiveProfile));
      progress(`profiles written to ${profileDir}`);
    }
    const framesMeasured = frames.slice(5);

    const result = {
      machine: { cores: availableParallelism(), loadAtStart: round(loadAtStart, 2), loadAtEnd: round(loadavg()[0], 2) },
      noise: noiseMode,
      initialLoadBytes,
      initialLoadAssets: [{ url: "index.html", bytes: documentBytes }, ...assets.map((a) => ({ url: a.name.replace(ui, ""), bytes: a.transferBytes }))],
      firstLoadColdMs: round(cold.timing.shownMs),
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
      stateChangeFailures: failures,
      frames: framesMeasured.length,
      frameP50Ms: round(percentile(framesMeasured, 50), 1),
      frameP99Ms: round(percentile(framesMeasured, 99), 1),
      frameMaxMs: round(Math.max(...framesMeasured), 1),
      longTasks: longTasks.length,
      longTaskMaxMs: round(Math.max(0, ...longTasks)),
    };
    if (overviewTiming && groupTiming && !profileDir) {
      process.stdout.write(
        `${waterfall("overview (first run)", overviewTiming, app.baseUrl)}\n${waterfall("group list (first run)", groupTiming, app.baseUrl)}\n`,
      );
    }
    const rows: [string, string, string][] = [
      ["initial load (gzip, on the wire)", `${(initialLoadBytes / 1024).toFixed(1)} KB`, "≤ 150 KB"],
      ["first load to interactive, cold", `${result.firstLoadColdMs} ms`, "≤ 1000 ms"],
      ["first load to interactive, warm (median / max)", `${result.firstLoadWarmMedianMs} / ${result.firstLoadWarmMaxMs} ms`, "≤ 1000 ms"],
      ["overview with its counts (median / max)", `${result.overviewMedianMs} / ${result.overviewMaxMs} ms`, "≤ 1500 ms"],
      ["group list, first row and count of 1,000 (median / max)", `${result.groupListMedianMs} / ${result.groupListMaxMs} ms`, "≤ 1500 ms"],
      ["instance list, first page and total of 10,000 (median / max)", `${result.instanceListMedianMs} / ${result.instanceListMaxMs} ms`, "≤ 1500 ms"],
      [
        `state change on screen at ${result.eventsPerSecond} events/s, ${noiseMode} (median / max)`,
        `${result.stateChangeMedianMs} / ${result.stateChangeMaxMs} ms`,
        "≤ 1000 ms",
      ],
      ["frame time (p50 / p99 / max)", `${result.frameP50Ms} / ${result.frameP99Ms} / ${result.frameMaxMs} ms`, "p99 ≤ 50 ms"],
      ["long tasks (count / longest)", `${result.longTasks} / ${result.longTaskMaxMs} ms`, ""],
    ];
    for (const [what, value, goal] of rows) process.stdout.write(`${what.padEnd(66)} ${value.padStart(20)}   ${goal ? `(${goal})` : ""}\n`);
    if (failures.length > 0) process.stdout.write(`state change samples that failed: ${failures.join("; ")}\n`);
    process.stdout.write(`load average ${result.machine.loadAtStart} at start, ${result.machine.loadAtEnd} at end, ${result.machine.cores} cores\n`);
    process.stdout.write(`BENCH_JSON ${JSON.stringify(result)}\n`);
  } finally {
    inspector.disconnect();
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
