// Round trips: populate, back up, restore into an empty controller (the wipe), then compare every
// collection document by document and every template version's hash and files. On the embedded
// store, on PostgreSQL (a real server started here), and from the embedded store into PostgreSQL,
// the migration path of docs/operations.md.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { startPostgresServer, type PostgresServer } from "../support/postgres-server.js";
import { ADMIN_PASSWORD, startTestApp, type TestApp } from "../support/http-app.js";
import { dumpCollections, populate, SMALL_SCALE, templateVersionDigests } from "./backup-fixtures.js";

const scale = { ...SMALL_SCALE, groups: 40, instances: 300, users: 6, auditEntries: 60 };

async function roundTrip(source: TestApp, target: TestApp): Promise<void> {
  await populate(source, scale, "rt");
  const sourceAdmin = await source.login("admin", ADMIN_PASSWORD);
  const created = await source.request("POST", "/api/v1/backups", { token: sourceAdmin });
  assert.equal(created.status, 201, created.text);
  const record = created.json as { id: string; documentStore: string };
  // Compared as they were when the bundle was written: its own creation is audited after it.
  const expected = await dumpCollections(source.documents, { ignoreTokenVersions: true });
  expected.audit_log = expected.audit_log.filter((e) => !(e.action === "backup.create" && e.resourceId === record.id));
  const expectedVersions = await templateVersionDigests(source.templates);
  assert.ok(Object.keys(expectedVersions).length >= scale.templates * (scale.versionsPerTemplate + 1));

  const bundle = Buffer.from(
    await (await fetch(`${source.baseUrl}/api/v1/backups/${record.id}/download`, { headers: { authorization: `Bearer ${sourceAdmin}` } })).arrayBuffer(),
  );
  const targetAdmin = await target.login("admin", ADMIN_PASSWORD);
  const uploaded = await fetch(`${target.baseUrl}/api/v1/backups/upload`, {
    method: "POST",
    headers: { authorization: `Bearer ${targetAdmin}` },
    body: bundle,
  });
  assert.equal(uploaded.status, 201, await uploaded.text());
  // Another cluster's bundle: restored as foreign, by an ADMIN (docs/operations.md, the migration).
  const restored = await target.request("POST", "/api/v1/restore", { token: targetAdmin, body: { id: record.id, foreign: true } });
  assert.equal(restored.status, 200, restored.text);
  assert.equal(restored.json.foreign, true);

  const actual = await dumpCollections(target.documents, { ignoreTokenVersions: true });
  actual.audit_log = actual.audit_log.filter((e) => e.action !== "backup.restore");
  assert.deepEqual(Object.keys(actual).sort(), Object.keys(expected).sort());
  for (const name of Object.keys(expected)) assert.deepEqual(actual[name], expected[name], `collection ${name}`);
  assert.equal(actual.groups.length, scale.groups);
  assert.equal(actual.instances.length, scale.instances);
  assert.deepEqual(await templateVersionDigests(target.templates), expectedVersions);
  // The restored users sign in with their passwords on the target.
  await target.login("rt-user-1", "password-rt-1-long");
}

describe("backup round trips", () => {
  let server: PostgresServer | undefined;
  const apps: TestApp[] = [];
  const app = async (databaseName?: string) => {
    const uri = databaseName ? await server!.createDatabase(databaseName) : undefined;
    const started = await startTestApp(uri ? { config: { database: { uri } } } : {});
    apps.push(started);
    return started;
  };

  before(async () => {
    server = await startPostgresServer();
  });
  after(async () => {
    for (const started of apps) await started.close();
    await server?.stop();
  });

  it("embedded → embedded", async () => {
    await roundTrip(await app(), await app());
  });

  it("PostgreSQL → PostgreSQL", async () => {
    const source = await app("rt_pg_source");
    await roundTrip(source, await app("rt_pg_target"));
    const record = (await source.request("GET", "/api/v1/backups", { token: await source.login("admin", ADMIN_PASSWORD) })).json[0];
    assert.equal(record.documentStore, "postgres");
  });

  it("embedded → PostgreSQL (the migration to a production database)", async () => {
    await roundTrip(await app(), await app("rt_migration_target"));
  });
});
