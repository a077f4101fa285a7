// cloudctl backup and restore against a fake controller: the parts a restore asks for from its
// flags, the confirmation prompt, dry runs, and verify's exit code. Download and upload against a
// real controller: the bundle streamed to disk and checked against the recorded sha256, refusals
// that leave nothing behind, and an upload recorded under the bundle's id.
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { restoreDiffLines, restoreParts } from "../../src/cli/commands/backup.js";
import { startTestApp, type TestApp } from "../support/http-app.js";
import { bodiesOf, homeWithContext, runCli, runOnTerminal, startFakeController, type FakeController } from "./harness.js";

const record = {
  id: "20261125T120000000Z-0a1b2c3d",
  createdAt: "2026-11-25T12:00:00.000Z",
  sizeBytes: 2048,
  mongoDocumentCount: 42,
  documentStore: "embedded",
  blobs: { count: 3 },
};
const report = (body: { dryRun: boolean; filesystem: boolean; datastores: boolean; foreign?: boolean }) => ({
  id: record.id,
  dryRun: body.dryRun,
  foreign: body.foreign === true,
  filesystem: { applied: !body.dryRun && body.filesystem, entryCount: 3, rollbackRoot: body.dryRun || !body.filesystem ? null : "/data/backups/rollback/x" },
  datastores: {
    applied: !body.dryRun && body.datastores,
    mongoCollections: ["groups", "users"],
    mongoPrefixGroups: ["groups", "users"],
    redisPrefixes: ["cloud:v1:lease-token:"],
  },
});

describe("cloudctl backup and restore", () => {
  let server: FakeController;
  before(async () => {
    server = await startFakeController((app) => {
      app.post("/api/v1/backups", (c) => c.json(record, 201));
      app.get("/api/v1/backups", (c) => c.json([record]));
      app.post("/api/v1/backups/:id/verify", (c) =>
        c.json({ id: c.req.param("id"), valid: c.req.param("id") === record.id, missingFiles: c.req.param("id") === record.id ? [] : ["manifest.json"] }),
      );
      app.post("/api/v1/restore", async (c) => c.json(report(await c.req.json())));
    });
  });
  after(() => server.close());

  test("a diff's lists end with … and N more past the ids the controller named", () => {
    const ids = (n: number, count: number) => ({ count, ids: Array.from({ length: n }, (_, i) => `g-${i}`) });
    const lines = restoreDiffLines({
      collections: [
        { name: "groups", added: ids(2, 2), replaced: ids(0, 0), removed: ids(20, 45), unchanged: 3 },
        { name: "users", added: ids(0, 0), replaced: ids(0, 0), removed: ids(0, 0), unchanged: 4 },
      ],
      blobs: null,
    });
    assert.deepEqual(lines, [
      "groups  2 added, 0 replaced, 45 removed, 3 unchanged",
      "  add     g-0, g-1",
      `  remove  ${ids(20, 20).ids.join(", ")}, … and 25 more`,
      "users   0 added, 0 replaced, 0 removed, 4 unchanged",
    ]);
  });

  test("restore flags pick the parts", () => {
    const all = { files: true, data: true };
    assert.deepEqual(restoreParts(all), { filesystem: true, datastores: true });
    assert.deepEqual(restoreParts({ ...all, filesystem: true }), { filesystem: true, datastores: false });
    assert.deepEqual(restoreParts({ ...all, datastores: true }), { filesystem: false, datastores: true });
    assert.deepEqual(restoreParts({ ...all, filesystem: true, datastores: true }), { filesystem: true, datastores: true });
    assert.deepEqual(restoreParts({ files: false, data: true }), { filesystem: false, datastores: true });
    assert.deepEqual(restoreParts({ files: true, data: false }), { filesystem: true, datastores: false });
    assert.throws(() => restoreParts({ files: false, data: false }), /nothing to restore/);
  });

  test("create, list, verify (exit 1 when invalid), and restore with its prompt", async () => {
    const { home, dispose } = homeWithContext(server.url);
    try {
      const created = await runCli(["backup", "create"], { home });
      assert.equal(created.code, 0, created.stderr);
      assert.match(created.stdout, /0a1b2c3d: 42 documents, 3 blobs/);
      const listed = await runCli(["backup", "list"], { home });
      assert.match(listed.stdout, /20261125T120000000Z-0a1b2c3d/);
      assert.equal((await runCli(["backup", "verify", record.id], { home })).code, 0);
      const invalid = await runCli(["backup", "verify", "20200101T000000000Z-00000000"], { home });
      assert.equal(invalid.code, 1);
      assert.match(invalid.stdout, /missingFiles\s+manifest.json/);

      const declined = await runCli(["restore", record.id], { home, stdin: "n\n" });
      assert.equal(declined.code, 6, declined.stderr);
      assert.match(declined.stderr, /not confirmed.*--yes/);
      assert.equal(bodiesOf(server, "POST", "/api/v1/restore").length, 0, "declining sends nothing");

      const dry = await runCli(["restore", record.id, "--dry-run", "--no-files"], { home });
      assert.equal(dry.code, 0, dry.stderr);
      const confirmed = await runCli(["restore", record.id, "--yes", "--filesystem", "--json"], { home });
      assert.equal(confirmed.code, 0, confirmed.stderr);
      assert.equal(JSON.parse(confirmed.stdout).filesystem.applied, true);
      assert.deepEqual(bodiesOf(server, "POST", "/api/v1/restore"), [
        { id: record.id, dryRun: true, filesystem: false, datastores: true },
        { id: record.id, dryRun: false, filesystem: true, datastores: false },
      ]);
    } finally {
      dispose();
    }
  });

  test("restore --foreign asks for a foreign bundle, says so in its question and report; --help offers it", async () => {
    const { home, dispose } = homeWithContext(server.url);
    try {
      const help = await runCli(["restore", "--help"], { home });
      assert.equal(help.code, 0, help.stderr);
      assert.match(help.stdout, /--foreign\s+take a bundle this cluster did not make/);
      const before = bodiesOf(server, "POST", "/api/v1/restore").length;
      // On a terminal, so the question is asked (and answered No: exit 6, nothing sent).
      const declined = await runOnTerminal(["restore", record.id, "--foreign"], { home, stdin: "n\n" });
      assert.equal(declined.code, 6, declined.stdout + declined.stderr);
      assert.match(declined.stdout + declined.stderr, /another cluster's: its users and roles replace these/);
      const dry = await runCli(["restore", record.id, "--dry-run", "--foreign"], { home });
      assert.equal(dry.code, 0, dry.stderr);
      assert.match(dry.stdout, /foreign\s+yes: not authenticated by this cluster/);
      const plain = await runCli(["restore", record.id, "--dry-run"], { home });
      assert.match(plain.stdout, /foreign\s+no/);
      assert.deepEqual(bodiesOf(server, "POST", "/api/v1/restore").slice(before), [
        { id: record.id, dryRun: true, filesystem: true, datastores: true, foreign: true },
        { id: record.id, dryRun: true, filesystem: true, datastores: true },
      ]);
    } finally {
      dispose();
    }
  });
});

describe("cloudctl backup download and upload against a real controller", () => {
  let t: TestApp;
  let home: string;
  let disposeHome: () => void;
  let work: string;
  before(async () => {
    t = await startTestApp();
    ({ home, dispose: disposeHome } = homeWithContext(t.baseUrl, await t.tokenFor("ADMIN")));
    work = await mkdtemp(join(tmpdir(), "cloudctl-backup-files-"));
    await t.groups.create({ name: "lobby", platform: "simulated" });
    await t.blobs.put(randomBytes(256 * 1024));
  });
  after(async () => {
    disposeHome?.();
    await t?.close();
    if (work) await rm(work, { recursive: true, force: true });
  });

  const sha256Of = async (file: string) =>
    createHash("sha256")
      .update(await readFile(file))
      .digest("hex");

  test("download streams the bundle to the file, checked against the recorded sha256; upload records it again under its id", async () => {
    const created = await runCli(["backup", "create", "--json"], { home });
    assert.equal(created.code, 0, created.stderr);
    const record = JSON.parse(created.stdout) as { id: string; sha256: string; sizeBytes: number };

    const file = join(work, "bundle.tar.gz");
    const downloaded = await runCli(["backup", "download", record.id, "--out", file], { home });
    assert.equal(downloaded.code, 0, downloaded.stderr);
    assert.match(downloaded.stdout, /sha256 matches the controller's/);
    assert.equal(await sha256Of(file), record.sha256);
    assert.equal((await readFile(file)).byteLength, record.sizeBytes);
    assert.deepEqual(await readdir(work), ["bundle.tar.gz"], "no partial file is left");

    const again = await runCli(["backup", "download", record.id, "--out", file], { home });
    assert.equal(again.code, 1);
    assert.match(again.stderr, /already exists/);
    assert.equal(await sha256Of(file), record.sha256, "an existing file is not overwritten");

    const unknown = await runCli(["backup", "download", "20200101T000000000Z-00000000", "--out", join(work, "none.tar.gz")], { home });
    assert.equal(unknown.code, 4, unknown.stderr);
    assert.deepEqual(await readdir(work), ["bundle.tar.gz"]);

    // The bundle moves: deleted here, uploaded back, it is the same backup under the same id.
    assert.equal((await runCli(["backup", "delete", record.id, "--yes"], { home })).code, 0);
    const uploaded = await runCli(["backup", "upload", file], { home });
    assert.equal(uploaded.code, 0, uploaded.stderr);
    assert.equal(uploaded.stdout.trim(), record.id, "the id alone on stdout");
    const shown = await t.request("GET", `/api/v1/backups/${record.id}`, { token: await t.tokenFor("ADMIN") });
    assert.equal(shown.status, 200, shown.text);
    assert.equal(shown.json.sha256, record.sha256);
    const dry = await runCli(["restore", record.id, "--dry-run", "--json"], { home });
    assert.equal(dry.code, 0, dry.stderr);
    assert.ok(JSON.parse(dry.stdout).datastores.mongoCollections.includes("groups"));

    const twice = await runCli(["backup", "upload", file], { home });
    assert.equal(twice.code, 1);
    assert.match(twice.stderr, /BACKUP_EXISTS|already exists/);
  });

  test("restore --dry-run prints what would be added, replaced and removed, in words of this store", async () => {
    const record = await t.backups.create();
    await t.groups.create({ name: "arena", platform: "simulated" });
    await t.groups.update("lobby", { maxInstances: 7 });
    await t.blobs.put(randomBytes(1024));
    const dry = await runCli(["restore", record.id, "--dry-run"], { home });
    assert.equal(dry.code, 0, dry.stderr);
    assert.match(dry.stdout, /What the restore would change:/);
    assert.match(dry.stdout, /^\s+groups\s+0 added, 1 replaced, 1 removed, 0 unchanged\n\s+replace\s+lobby\n\s+remove\s+arena$/m);
    assert.match(dry.stdout, /template files \(blobs\)\s+0 stored, 1 set aside\n\s+set aside [0-9a-f]{64}$/m);
    assert.doesNotMatch(dry.stdout, /mongo|redis/i, "an embedded store with an in-memory key-value store is not described as MongoDB and Redis");
    const restoredNothing = await t.groups.get("arena");
    assert.equal(restoredNothing.name, "arena", "a dry run changes nothing");
  });

  test("download refuses bytes that do not match the recorded sha256 and leaves no file", async () => {
    const record = await t.backups.create();
    const recordFile = join(t.dir, "backups", `${record.id}.json`);
    await writeFile(recordFile, JSON.stringify({ ...record, sha256: "0".repeat(64) }));
    const file = join(work, "mismatch.tar.gz");
    const result = await runCli(["backup", "download", record.id, "--out", file], { home });
    assert.equal(result.code, 1);
    assert.match(result.stderr, /records 0{64}: nothing written/);
    assert.ok(!existsSync(file) && !existsSync(`${file}.partial`));
    await writeFile(recordFile, JSON.stringify(record));
  });

  test("upload refuses what is not a verified bundle and records nothing", async () => {
    const before = (await t.backups.list()).map((r) => r.id);
    const garbage = join(work, "garbage.tar.gz");
    await writeFile(garbage, randomBytes(4096));
    const refused = await runCli(["backup", "upload", garbage], { home });
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /does not verify|INVALID_BUNDLE/);
    assert.deepEqual(
      (await t.backups.list()).map((r) => r.id),
      before,
    );
    const missing = await runCli(["backup", "upload", join(work, "absent.tar.gz")], { home });
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /does not exist/);
  });
});
