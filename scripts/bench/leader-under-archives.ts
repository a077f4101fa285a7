// Archive work on the Raft leader of three production controllers, and whether leadership holds.
// Three controller processes on the production profile (their own PostgreSQL and Redis, one Raft
// cluster, the default Raft timing: 100 ms ticks, election after 10 to 20 ticks without the leader)
// are started (leader-watch.ts); this process writes a template archive (default 200,000,000 bytes
// in 20 files, 14 of them random bytes) and, on the leader, runs one phase after the other:
//   idle (3 s), import (POST /api/v1/templates/import), `--exports` exports (GET …/export read to
//   the end), a second import under another name (unless --no-reimport), idle (3 s).
// Throughout, it samples every `--sample-ms` (default 100) the leader id every controller names
// (GET /api/v1/cluster) and the leader's event-loop delay (prom-client's gauges on /metrics), and
// probes GET /api/v1/system/version on the leader every 50 ms. The Raft term of every controller is
// read before the first phase and after the last (from a copy of its Raft log: the REST API does not
// show the term). Figures: leader changes (expected 0), terms before and after, the time of every
// phase, the leader's loop delay (the largest delay of each sampling window: their p50, p99 and
// max) and the version probe's p50 / p99 / max. The archive work stays on the controller that led
// at the start, also if another one took over.
//
// Then, unless --no-control, a control shows that the watch sees a stalled leader: the leader
// process is stopped with SIGSTOP for `--control-pause-ms` (default 3000, longer than the largest
// election timeout of 2 s) and continued; the leader changes and terms seen then are printed too.
//
//   npx tsx scripts/bench/leader-under-archives.ts [--mb 200] [--files 20] [--exports 3]
//     [--sample-ms 100] [--no-reimport] [--no-control] [--control-pause-ms 3000]
//
// Prints a table and one machine-readable line (prefix `BENCH_JSON `); exits 1 when a phase failed
// or the leader changed during the archive phases. Every process started is stopped and every
// directory removed, also on failure or SIGINT.
import { mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { exportTemplateArchive, importTemplateArchive, probeVersion, writeTemplateArchive, type VersionProbe } from "./archive-support.js";
import {
  LeaderSampler,
  LoopDelayScraper,
  raftTerms,
  startProductionTrio,
  waitForAgreedLeader,
  type LeaderSummary,
  type LoopDelaySummary,
  type ProductionTrio,
} from "./leader-watch.js";
import { argNumber, mib, percentile, printTable, progress, uptimeLine } from "./system-bench-support.js";

const totalBytes = argNumber("--mb", 200) * 1000 * 1000;
const filesCount = argNumber("--files", 20);
const exportsCount = argNumber("--exports", 3);
const sampleMs = argNumber("--sample-ms", 100);
const reimport = !process.argv.includes("--no-reimport");
const control = !process.argv.includes("--no-control");
const controlPauseMs = argNumber("--control-pause-ms", 3000);
/** Interval of the version probe on the leader. */
const PROBE_INTERVAL_MS = 50;
/** Quiet time before the first and after the last archive phase. */
const IDLE_MS = 3000;

interface PhaseResult {
  phase: string;
  elapsedMs: number;
  detail: string;
  leader: LeaderSummary;
  loop: LoopDelaySummary | null;
  version: { samples: number; failures: number; p50Ms: number; p99Ms: number; maxMs: number };
}

const round = (v: number) => Math.round(v * 10) / 10;
const loopLine = (l: LoopDelaySummary) =>
  `loop delay per ${sampleMs} ms window p50/p99 ${round(l.windowMaxP50Ms)}/${round(l.windowMaxP99Ms)} ms, max ${round(l.maxMs)} ms (${l.scrapes} windows)`;

function versionFigures(probe: VersionProbe, fromMs: number, toMs: number): PhaseResult["version"] {
  const within = probe.samples.filter((s) => s.atMs >= fromMs && s.atMs <= toMs);
  const latencies = within.map((s) => s.latencyMs).sort((a, b) => a - b);
  return {
    samples: latencies.length,
    failures: within.filter((s) => !s.ok).length,
    p50Ms: round(percentile(latencies, 50)),
    p99Ms: round(percentile(latencies, 99)),
    maxMs: round(latencies[latencies.length - 1] ?? Number.NaN),
  };
}

let trio: ProductionTrio | null = null;
const dir = await mkdtemp(join(tmpdir(), "cloud-bench-leader-archives-"));
const cleanUp = async () => {
  await trio?.close();
  await rm(dir, { recursive: true, force: true });
};
process.once("SIGINT", () => {
  progress("SIGINT: stopping everything");
  void cleanUp().finally(() => process.exit(130));
});

let exitCode = 0;
try {
  const uptimeBefore = uptimeLine();
  const archivePath = join(dir, "template.tar.gz");
  progress(`writing a ${filesCount}-file template of ${mib(totalBytes)} MiB`);
  const fileBytes = await writeTemplateArchive(archivePath, totalBytes, filesCount);
  const archiveBytes = (await stat(archivePath)).size;

  progress("starting PostgreSQL, Redis and three production controllers");
  trio = await startProductionTrio(progress);
  const { members } = trio;
  const leaderId = await waitForAgreedLeader(members);
  const leader = trio.memberById(leaderId)!;
  const { url, adminToken: token } = leader.process!;
  progress(`leader: ${leader.name} (${leaderId})`);

  const termsBefore = await raftTerms(members);
  const leaders = new LeaderSampler(members, sampleMs);
  const loop = await LoopDelayScraper.start(url, sampleMs);
  if (loop === null) progress("the leader's /metrics has no nodejs_eventloop_lag gauges: loop delay not measured");
  const probe = probeVersion(url, PROBE_INTERVAL_MS);
  const results: PhaseResult[] = [];
  const phase = async (name: string, work: () => Promise<string>) => {
    progress(name);
    const fromMs = Date.now();
    // A phase that fails is reported, not fatal.
    const detail = await work().catch((err: Error) => {
      exitCode = 1;
      return `FAILED: ${err.message}${err.cause ? ` (${String((err.cause as Error).message ?? err.cause)})` : ""}`;
    });
    const toMs = Date.now();
    results.push({
      phase: name,
      elapsedMs: toMs - fromMs,
      detail,
      leader: leaders.summary(fromMs, toMs),
      loop: loop?.summary(fromMs, toMs) ?? null,
      version: versionFigures(probe, fromMs, toMs),
    });
  };

  const startedMs = Date.now();
  await phase("idle before", async () => {
    await sleep(IDLE_MS);
    return "";
  });
  let hash = "";
  await phase("import", async () => {
    hash = (await importTemplateArchive(url, token, "bench", archivePath, fileBytes)).hash;
    return `${mib(archiveBytes)} MiB tar.gz`;
  });
  for (let i = 1; i <= exportsCount; i++) {
    await phase(`export ${i}`, async () => {
      const { bytes } = await exportTemplateArchive(url, token, "bench", hash);
      return `${mib(bytes)} MiB tar.gz`;
    });
  }
  if (reimport) {
    await phase("import again", async () => {
      await importTemplateArchive(url, token, "bench-again", archivePath, fileBytes);
      return `${mib(archiveBytes)} MiB tar.gz, a second template of the same files`;
    });
  }
  await phase("idle after", async () => {
    await sleep(IDLE_MS);
    return "";
  });
  const endedMs = Date.now();
  await probe.stop();
  await loop?.stop();
  await leaders.stop();
  const termsAfter = await raftTerms(members);
  const overall = leaders.summary(startedMs, endedMs);
  const loopOverall = loop?.summary(startedMs, endedMs) ?? null;
  const versionOverall = versionFigures(probe, startedMs, endedMs);
  const termsKept = members.every((m) => termsBefore[m.name] === termsAfter[m.name]);
  if (overall.changes > 0 || !termsKept) exitCode = 1;

  let controlResult: {
    pauseMs: number;
    leader: LeaderSummary;
    termsBefore: Record<string, number>;
    termsAfter: Record<string, number>;
    newLeader: string;
  } | null = null;
  if (control) {
    progress(`control: SIGSTOP of the leader ${leader.name} for ${controlPauseMs} ms`);
    const before = await raftTerms(members);
    const watch = new LeaderSampler(members, sampleMs);
    await sleep(1000);
    process.kill(leader.process!.pid, "SIGSTOP");
    await sleep(controlPauseMs);
    process.kill(leader.process!.pid, "SIGCONT");
    const newLeader = await waitForAgreedLeader(members);
    await sleep(1000);
    await watch.stop();
    controlResult = { pauseMs: controlPauseMs, leader: watch.summary(), termsBefore: before, termsAfter: await raftTerms(members), newLeader };
  }

  const terms = (t: Record<string, number>) => members.map((m) => `${m.name} ${t[m.name]}`).join(", ");
  const rows: [string, string][] = [
    ["template", `${filesCount} files, ${mib(fileBytes)} MiB (${mib(archiveBytes)} MiB tar.gz)`],
    [
      "cluster",
      `3 production controllers (PostgreSQL + Redis), leader ${leader.name} (${leaderId}); sampled every ${sampleMs} ms, version probe every ${PROBE_INTERVAL_MS} ms`,
    ],
  ];
  for (const r of results) {
    const loopText = r.loop ? loopLine(r.loop) : "loop delay not measured";
    rows.push([
      r.phase,
      `${r.elapsedMs} ms${r.detail ? ` (${r.detail})` : ""}; leader changes ${r.leader.changes} (${r.leader.samples} samples${r.leader.failed ? `, ${r.leader.failed} unanswered` : ""}); ${loopText}; version p50/p99/max ${r.version.p50Ms}/${r.version.p99Ms}/${r.version.maxMs} ms (${r.version.samples} probes${r.version.failures ? `, ${r.version.failures} failed` : ""})`,
    ]);
  }
  rows.push([
    "all phases: leader",
    `changes ${overall.changes}, leaders named ${overall.leaders.join(", ") || "none"}, ${overall.samples} samples (${overall.failed} unanswered, ${overall.withoutLeader} without a leader)`,
  ]);
  rows.push(["all phases: Raft term", `before ${terms(termsBefore)}; after ${terms(termsAfter)}`]);
  if (loopOverall) rows.push(["all phases: leader's loop delay", loopLine(loopOverall)]);
  rows.push([
    "all phases: version probe",
    `p50/p99/max ${versionOverall.p50Ms}/${versionOverall.p99Ms}/${versionOverall.maxMs} ms (${versionOverall.samples} probes, ${versionOverall.failures} failed)`,
  ]);
  if (controlResult) {
    rows.push([
      `control: leader stopped ${controlResult.pauseMs} ms`,
      `leader changes ${controlResult.leader.changes}, new leader ${controlResult.newLeader}; term before ${terms(controlResult.termsBefore)}; after ${terms(controlResult.termsAfter)}`,
    ]);
  }
  rows.push(["machine before", uptimeBefore]);
  rows.push(["machine after", uptimeLine()]);
  printTable("archive work on the Raft leader of three production controllers", rows);
  console.log(`leadership held (no leader change, no term change): ${overall.changes === 0 && termsKept ? "yes" : "NO"}`);
  console.log(
    `BENCH_JSON ${JSON.stringify({ files: filesCount, fileBytes, archiveBytes, sampleMs, leaderId, termsBefore, termsAfter, leader: overall, loop: loopOverall, version: versionOverall, phases: results, control: controlResult, node: process.version })}`,
  );
} catch (err) {
  exitCode = 1;
  progress(`FAILED: ${(err as Error).stack ?? String(err)}`);
  for (const m of trio?.members ?? []) if (m.process) progress(`controller ${m.name} output (tail):\n${m.process.output().slice(-4_000)}`);
} finally {
  await cleanUp();
}
process.exit(exitCode);
