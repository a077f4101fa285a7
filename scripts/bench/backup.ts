// Backup and restore of a populated controller (in this process, embedded store, through the
// composition root): 1,000 groups, 10,000 instance records, users, roles, audit entries and
// templates with versions plus `--template-mb` MB of template files (random bytes, so they do not
// compress). Prints the time of a backup and of a restore of its bundle, the event-loop delay during
// each (goal p99 <= 50 ms: archive work must not block the loop, which also runs Raft), the peak RSS
// over the baseline, and checks the restore brought every collection and template version back.
//
//   npx tsx scripts/bench/backup.ts [--groups 1000] [--instances 10000] [--template-mb 200] [--templates 10]
import assert from "node:assert/strict";
import { monitorEventLoopDelay, performance } from "node:perf_hooks";
import { startTestApp } from "../../test/support/http-app.js";
import { dumpCollections, populate, templateVersionDigests } from "../../test/backup/backup-fixtures.js";
import { argNumber, progress, uptimeLine } from "./system-bench-support.js";

const groups = argNumber("--groups", 1_000);
const instances = argNumber("--instances", 10_000);
const templateMb = argNumber("--template-mb", 200);
const templates = Math.max(1, argNumber("--templates", 10));

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
    const restore = await measure(() => app.backups.restore(record.id, { dryRun: false, filesystem: true, datastores: true }));

    const actual = await dumpCollections(app.documents, { ignoreTokenVersions: true });
    expected.audit_log = expected.audit_log ?? [];
    assert.deepEqual(actual, expected, "the restore brought every collection back");
    assert.deepEqual(await templateVersionDigests(app.templates), expectedVersions, "and every template version");

    const rows = [
      ["phase", "seconds", "loop p50 ms", "loop p99 ms", "loop max ms", "peak RSS MB", "peak RSS over baseline MB"],
      ["backup", backup.seconds, backup.loopP50Ms, backup.loopP99Ms, backup.loopMaxMs, backup.peakRssMb, backup.peakRssOverBaselineMb],
      ["restore", restore.seconds, restore.loopP50Ms, restore.loopP99Ms, restore.loopMaxMs, restore.peakRssMb, restore.peakRssOverBaselineMb],
    ];
    for (const row of rows) console.log(row.map(String).join("\t"));
    console.log(
      `RESULT ${JSON.stringify({ groups, instances, templateMb, documents: record.mongoDocumentCount, blobs: record.blobs.count, bundleMb: Math.round(record.sizeBytes / 1024 ** 2), backup, restore })}`,
    );
    progress(`load after: ${uptimeLine()}`);
  } finally {
    await app.close();
  }
}

await main();
