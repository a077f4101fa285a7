// cloudctl backup and restore against a fake controller: the parts a restore asks for from its
// flags, the confirmation prompt, dry runs, and verify's exit code.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { restoreParts } from "../../src/cli/commands/backup.js";
import { bodiesOf, homeWithContext, runCli, startFakeController, type FakeController } from "./harness.js";

const record = {
  id: "20261125T120000000Z-0a1b2c3d",
  createdAt: "2026-11-25T12:00:00.000Z",
  sizeBytes: 2048,
  mongoDocumentCount: 42,
  documentStore: "embedded",
  blobs: { count: 3 },
};
const report = (body: { dryRun: boolean; filesystem: boolean; datastores: boolean }) => ({
  id: record.id,
  dryRun: body.dryRun,
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
      assert.equal(declined.code, 0, declined.stderr);
      assert.match(declined.stdout + declined.stderr, /cancelled/);
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
});
