// Backup and restore of a populated controller (in this process, embedded store, through the
// composition root): 1,000 groups, 10,000 instance records, users, roles, audit entries and
// templates with versions plus `--template-mb` MB of template files (random bytes, so they do not
// compress). Prints the time of a backup and of a restore of its bundle, the event-loop delay during
// each (goal p99 <= 50 ms: archive work must not block the loop, which also runs Raft), the peak RSS
// over the baseline, and checks the restore brought every collection and template version back.
// The restore runs `--restores` times (each after a change: a group and a template file more), and
// the run with the median p99 is reported, next to the loop delay of the idle process (the share of
// every figure that is the machine's load, not the work). Then the restore's steps one at a time
// on the same bundle (verification alone, the datastores part alone, the filesystem part alone),
// so a delay can be put down to one of them. With `--cpu-prof DIR`, a CPU profile of the first
// restore is written to DIR/restore.cpuprofile (open it in Chrome DevTools).
//
//   npx tsx scripts/bench/backup.ts [--groups 1000] [--instances 10000] [--template-mb 200] [--templates 10] [--restores 3] [--cpu-prof DIR]
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { Session } from "node:inspector/promises";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { monitorEventLoopDelay, performance } from "node:perf_hooks";
import { verifyBundle } from "../../src/backup/bundle-validator.js";
import { applyBundle } from "../../src/backup/restore.js";
import { systemClock } from "../../src/shared/clock.js";
import { startTestApp } from "../../test/support/http-app.js";
import { dumpCollections, populate, templateVersionDigests } from "../../test/backup/backup-fixtures.js";
import { argNumber, argString, percentile, progress, uptimeLine } from "./system-bench-support.js";

const groups = argNumber("--groups", 1_000);
const instances = argNumber("--instances", 10_000);
const templateMb = argNumber("--template-mb", 200);
const templates = Math.max(1, argNumber("--templates", 10));
const cpuProfileDir = argString("--cpu-prof", "");
const restoreRuns = Math.max(1, argNumber("--restores", 3));

interface Phase {
  seconds: number;
  loopP50Ms: number;
  loopP99Ms: number;
  loopMaxMs: number;
  /** Main-thread CPU time between two 10 ms ticks, p99 and max (null where Linux schedstat is missing). */
  busyP99Ms: number | null;
  busyMaxMs: number | null;
  peakRssMb: number;
  peakRssOverBaselineMb: number;
}

/**
 * CPU time the main thread has run, in ns (Linux: /proc/thread-self/schedstat), or null. The loop
 * delay counts the time a thread waits for a core on a loaded machine too; the main thread's own
 * CPU time between two ticks is the part the work causes, the delay it would have on an idle one.
 */
function mainThreadCpuNs(): number | null {
  try {
    return Number(readFileSync("/proc/thread-self/schedstat", "utf8").split(" ")[0]);
  } catch {
    return null;
  }
}

async function measure(work: () => Promise<unknown>): Promise<Phase> {
  const baseline = process.memoryUsage().rss;
  let peak = baseline;
  const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 20);
  const busyMs: number[] = [];
  let lastCpuNs = mainThreadCpuNs();
  const busySampler =
    lastCpuNs === null
      ? undefined
      : setInterval(() => {
          const now = mainThreadCpuNs()!;
          busyMs.push((now - lastCpuNs!) / 1e6);
          lastCpuNs = now;
        }, 10);
  const loop = monitorEventLoopDelay({ resolution: 10 });
  loop.enable();
  const started = performance.now();
  await work();
  const seconds = (performance.now() - started) / 1000;
  loop.disable();
  clearInterval(sampler);
  clearInterval(busySampler);
  const ms = (ns: number) => Math.round((ns / 1e6) * 10) / 10;
  const busy = busyMs.sort((a, b) => a - b);
  const tenth = (value: number) => Math.round(value * 10) / 10;
  return {
    seconds: Math.round(seconds * 100) / 100,
    loopP50Ms: ms(loop.percentile(50)),
    loopP99Ms: ms(loop.percentile(99)),
    loopMaxMs: ms(loop.max),
    busyP99Ms: busy.length > 0 ? tenth(percentile(busy, 99)) : null,
    busyMaxMs: busy.length > 0 ? tenth(busy[busy.length - 1]!) : null,
    peakRssMb: Math.round(peak / 1024 ** 2),
    peakRssOverBaselineMb: Math.round((peak - baseline) / 1024 ** 2),
  };
}

/** Runs `work` under the V8 profiler and writes the profile to `path`. */
async function profiled<T>(path: string, work: () => Promise<T>): Promise<T> {
  const session = new Session();
  session.connect();
  await session.post("Profiler.enable");
  await session.post("Profiler.setSamplingInterval", { interval: 1000 });
  await session.post("Profiler.start");
  try {
    return await work();
  } finally {
    const { profile } = await session.post("Profiler.stop");
    session.disconnect();
    await writeFile(path, JSON.stringify(profile));
    progress(`CPU profile of the restore written to ${path}`);
  }
}

const row = (name: string, p: Phase) => [
  name,
  p.seconds,
  p.loopP50Ms,
  p.loopP99Ms,
  p.loopMaxMs,
  p.busyP99Ms ?? "-",
  p.busyMaxMs ?? "-",
  p.peakRssMb,
  p.peakRssOverBaselineMb,
];

async function main(): Promise<void> {
  progress(`load before: ${uptimeLine()}`);
  const app = await startTestApp();
  try {
    progress(`populating: ${groups} groups, ${instances} instances, ${templates} templates, ${templateMb} MB of template files`);
    await populate(
      app,
      {
        groups,
        instances,
        users: 50,
        auditEntries: 2_000,
        templates,
        versionsPerTemplate: 5,
        templateFileBytes: Math.round((templateMb * 1024 ** 2) / templates),
      },
      "bench",
    );
    const expected = await dumpCollections(app.documents, { ignoreTokenVersions: true });
    const expectedVersions = await templateVersionDigests(app.templates);
    global.gc?.();

    // The loop delay of an idle process: what the machine's load alone adds to every figure below.
    progress("idle");
    const idle = await measure(() => sleep(3_000));
    progress("backup");
    let record!: Awaited<ReturnType<typeof app.backups.create>>;
    const backup = await measure(async () => (record = await app.backups.create()));
    const extraBytes = Math.round((templateMb * 1024 ** 2) / templates);
    /** A change after the backup (a group, a template file), so a restore has something to undo. */
    const change = async (name: string) => {
      await app.groups.create({ name, platform: "simulated" });
      await app.templates.create({ name, description: "set aside by the restore", platform: "simulated" });
      await app.templates.upload(name, undefined, [{ fileName: "extra.jar", data: Buffer.alloc(extraBytes, name.length) }], false);
    };
    const restores: Phase[] = [];
    for (let n = 0; n < restoreRuns; n++) {
      progress(`restore ${n + 1} of ${restoreRuns}`);
      await change(`after-backup-${n}`);
      const restoreWork = () => app.backups.restore(record.id, { dryRun: false, filesystem: true, datastores: true });
      restores.push(await measure(cpuProfileDir && n === 0 ? () => profiled(join(cpuProfileDir, "restore.cpuprofile"), restoreWork) : restoreWork));
    }
    const restore = [...restores].sort((a, b) => a.loopP99Ms - b.loopP99Ms)[Math.floor((restores.length - 1) / 2)]!;

    const actual = await dumpCollections(app.documents, { ignoreTokenVersions: true });
    expected.audit_log = expected.audit_log ?? [];
    // The controller samples its metrics history on its own timer, so a slow run adds samples.
    delete actual.metrics_history;
    delete expected.metrics_history;
    assert.deepEqual(actual, expected, "the restore brought every collection back");
    assert.deepEqual(await templateVersionDigests(app.templates), expectedVersions, "and every template version");

    // The restore's steps alone, on the same bundle: after a change, so each one has work to do.
    progress("restore steps one at a time");
    const bundle = join(app.dir, "backups", `${record.id}.tar.gz`);
    const targets = { documents: app.documents, kv: app.kv, blobs: app.blobs, clock: systemClock };
    const rollbackRoot = join(app.dir, "backups", "rollback", "bench");
    await change("after-restore");
    const verify = await measure(async () => assert.ok((await verifyBundle(bundle, record.id)).report.valid, "the bundle verifies"));
    const datastores = await measure(() => applyBundle(bundle, record, { datastores: true, filesystem: false }, targets, rollbackRoot));
    const filesystem = await measure(() => applyBundle(bundle, record, { datastores: false, filesystem: true }, targets, rollbackRoot));
    assert.deepEqual(await templateVersionDigests(app.templates), expectedVersions, "the steps brought every template version back");

    const rows = [
      ["phase", "seconds", "loop p50 ms", "loop p99 ms", "loop max ms", "busy p99 ms", "busy max ms", "peak RSS MB", "peak RSS over baseline MB"],
      row("idle", idle),
      row("backup", backup),
      row(`restore (median of ${restores.length} by p99)`, restore),
      row("  verify alone", verify),
      row("  datastores alone", datastores),
      row("  filesystem alone", filesystem),
    ];
    for (const line of rows) console.log(line.map(String).join("\t"));
    console.log(`restores, loop p99 / max ms: ${restores.map((r) => `${r.loopP99Ms} / ${r.loopMaxMs}`).join(", ")}`);
    console.log(`restores, busy p99 / max ms: ${restores.map((r) => `${r.busyP99Ms} / ${r.busyMaxMs}`).join(", ")}`);
    console.log(
      `RESULT ${JSON.stringify({ groups, instances, templateMb, documents: record.mongoDocumentCount, blobs: record.blobs.count, bundleMb: Math.round(record.sizeBytes / 1024 ** 2), idle, backup, restore, restores, steps: { verify, datastores, filesystem } })}`,
    );
    progress(`load after: ${uptimeLine()}`);
  } finally {
    await app.close();
  }
}

await main();
