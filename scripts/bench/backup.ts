// Backup and restore of a populated controller (in this process, embedded store, through the
// composition root): 1,000 groups, 10,000 instance records, users, roles, audit entries and
// templates with versions plus `--template-mb` MB of template files (random bytes, so they do not
// compress). Prints the time of a backup and of a restore of its bundle, the event-loop delay during
// each (goal p99 <= 50 ms: archive work must not block the loop, which also runs Raft), the peak RSS
// over the baseline, and checks the restore brought every collection and template version back.
// Then the restore's steps one at a time on the same bundle (verification alone, the datastores
// part alone, the filesystem part alone), so a delay can be put down to one of them. With
// `--cpu-prof DIR`, a CPU profile of the whole restore is written to DIR/restore.cpuprofile (open
// it in Chrome DevTools).
//
//   npx tsx scripts/bench/backup.ts [--groups 1000] [--instances 10000] [--template-mb 200] [--templates 10] [--cpu-prof DIR]
import assert from "node:assert/strict";
import { writeFile } from "node:fs/promises";
import { Session } from "node:inspector/promises";
import { join } from "node:path";
import { monitorEventLoopDelay, performance } from "node:perf_hooks";
import { verifyBundle } from "../../src/backup/bundle-validator.js";
import { applyBundle } from "../../src/backup/restore.js";
import { systemClock } from "../../src/shared/clock.js";
import { startTestApp } from "../../test/support/http-app.js";
import { dumpCollections, populate, templateVersionDigests } from "../../test/backup/backup-fixtures.js";
import { argNumber, argString, progress, uptimeLine } from "./system-bench-support.js";

const groups = argNumber("--groups", 1_000);
const instances = argNumber("--instances", 10_000);
const templateMb = argNumber("--template-mb", 200);
const templates = Math.max(1, argNumber("--templates", 10));
const cpuProfileDir = argString("--cpu-prof", "");

interface Phase {
  seconds: number;
  loopP50Ms: number;
  loopP99Ms: number;
  loopMaxMs: number;
  peakRssMb: number;
  peakRssOverBaselineMb: number;
}

async function measure(work: () => Promise<unknown>): Promise<Phase> {
  const baseline = process.memoryUsage().rss;
  let peak = baseline;
  const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 20);
  const loop = monitorEventLoopDelay({ resolution: 10 });
  loop.enable();
  const started = performance.now();
  await work();
  const seconds = (performance.now() - started) / 1000;
  loop.disable();
  clearInterval(sampler);
  const ms = (ns: number) => Math.round((ns / 1e6) * 10) / 10;
  return {
    seconds: Math.round(seconds * 100) / 100,
    loopP50Ms: ms(loop.percentile(50)),
    loopP99Ms: ms(loop.percentile(99)),
    loopMaxMs: ms(loop.max),
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

const row = (name: string, p: Phase) => [name, p.seconds, p.loopP50Ms, p.loopP99Ms, p.loopMaxMs, p.peakRssMb, p.peakRssOverBaselineMb];

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

    progress("backup");
    let record!: Awaited<ReturnType<typeof app.backups.create>>;
    const backup = await measure(async () => (record = await app.backups.create()));
    progress("restore");
    await app.groups.create({ name: "after-backup", platform: "simulated" });
    const restoreWork = () => app.backups.restore(record.id, { dryRun: false, filesystem: true, datastores: true });
    const restore = await measure(cpuProfileDir ? () => profiled(join(cpuProfileDir, "restore.cpuprofile"), restoreWork) : restoreWork);

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
    await app.groups.create({ name: "after-restore", platform: "simulated" });
    await app.templates.create({ name: "after-restore", description: "set aside by the restore", platform: "simulated" });
    const extraBytes = Math.round((templateMb * 1024 ** 2) / templates);
    await app.templates.upload("after-restore", undefined, [{ fileName: "extra.jar", data: Buffer.alloc(extraBytes, 7) }], false);
    const verify = await measure(async () => assert.ok((await verifyBundle(bundle, record.id)).report.valid, "the bundle verifies"));
    const datastores = await measure(() => applyBundle(bundle, record, { datastores: true, filesystem: false }, targets, rollbackRoot));
    const filesystem = await measure(() => applyBundle(bundle, record, { datastores: false, filesystem: true }, targets, rollbackRoot));
    assert.deepEqual(await templateVersionDigests(app.templates), expectedVersions, "the steps brought every template version back");

    const rows = [
      ["phase", "seconds", "loop p50 ms", "loop p99 ms", "loop max ms", "peak RSS MB", "peak RSS over baseline MB"],
      row("backup", backup),
      row("restore", restore),
      row("  verify alone", verify),
      row("  datastores alone", datastores),
      row("  filesystem alone", filesystem),
    ];
    for (const line of rows) console.log(line.map(String).join("\t"));
    console.log(
      `RESULT ${JSON.stringify({ groups, instances, templateMb, documents: record.mongoDocumentCount, blobs: record.blobs.count, bundleMb: Math.round(record.sizeBytes / 1024 ** 2), backup, restore, steps: { verify, datastores, filesystem } })}`,
    );
    progress(`load after: ${uptimeLine()}`);
  } finally {
    await app.close();
  }
}

await main();
