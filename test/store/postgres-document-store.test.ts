// Runs the document store contract against the PostgreSQL adapter on a real server started here.
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import pg from "pg";
import { openBlobStore, openDocumentStore } from "../../src/store/open.js";
import { PostgresBlobStore } from "../../src/store/postgres/postgres-blob-store.js";
import { openPostgresDocumentStore, PostgresDocumentStore } from "../../src/store/postgres/postgres-document-store.js";
import { filterConditions, SqlParams } from "../../src/store/postgres/sql-query.js";
import { RevisionConflictError, type Doc, type Filter } from "../../src/store/ports.js";
import { LEGACY_REVISION } from "../../src/store/revisions.js";
import { startPostgresServer, type PostgresServer } from "../support/postgres-server.js";
import { runDocumentStoreContract } from "./document-store-contract.js";

let server: PostgresServer | undefined;

before(async () => {
  server = await startPostgresServer();
});

after(async () => {
  await server?.stop();
});

// Tests share one database; the contract gives every test its own collection names.
runDocumentStoreContract("PostgreSQL", async () => ({
  open: (clock) => openPostgresDocumentStore({ uri: server!.uri, clock, ttlSweepIntervalMs: 0, poolConnectionsMax: 4 }),
  sweepExpired: (store) => (store as PostgresDocumentStore).sweepExpired(),
  dispose: async () => undefined,
}));

it("openDocumentStore and openBlobStore pick PostgreSQL for postgres:// and postgresql:// URIs", async () => {
  const documents = await openDocumentStore({ profile: "production", dataDir: "/nonexistent", uri: server!.uri, ttlSweepIntervalMs: 0 });
  try {
    assert.ok(documents instanceof PostgresDocumentStore);
    await documents.ping();
  } finally {
    await documents.close();
  }
  const blobs = await openBlobStore({ profile: "production", dataDir: "/nonexistent", uri: server!.uri.replace(/^postgres:/, "postgresql:") });
  try {
    assert.ok(blobs instanceof PostgresBlobStore);
    assert.equal(await blobs.get(await blobs.put(new Uint8Array([7]))).then((b) => b?.[0]), 7);
  } finally {
    await blobs.close();
  }
});

it("PostgreSQL: filters on indexed fields use the expression indexes", async () => {
  const store = await openPostgresDocumentStore({ uri: server!.uri, ttlSweepIntervalMs: 0, poolConnectionsMax: 2 });
  const client = new pg.Client({ connectionString: server!.uri });
  await client.connect();
  try {
    const spec = {
      indexes: [
        { name: "plan_group", field: "group" },
        { name: "plan_port", field: "portRange.start" },
      ],
    };
    const items = store.collection("plan_items", spec);
    await items.find({ group: "warm-up" }); // creates the table and indexes
    await client.query("SET enable_seqscan = off");
    const cases: [Filter, string][] = [
      [{ group: "g1" }, "doc_plan_items_plan_group"],
      [{ group: { $in: ["g1", "g2"] } }, "doc_plan_items_plan_group"],
      [{ "portRange.start": { $gte: 20000, $lt: 30000 } }, "doc_plan_items_plan_port"],
    ];
    for (const [filter, indexName] of cases) {
      const params = new SqlParams();
      const where = filterConditions(filter, params).join(" AND ");
      const plan = await client.query(`EXPLAIN SELECT doc FROM "doc_plan_items" WHERE ${where}`, params.values);
      const text = plan.rows.map((row: Record<string, string>) => row["QUERY PLAN"]).join("\n");
      assert.match(text, new RegExp(indexName), `${JSON.stringify(filter)}:\n${text}`);
    }
  } finally {
    await client.end();
    await store.close();
  }
});

it("PostgreSQL: controllers creating the same collection at once all succeed", async () => {
  const stores = await Promise.all([1, 2, 3].map(() => openPostgresDocumentStore({ uri: server!.uri, ttlSweepIntervalMs: 0, poolConnectionsMax: 2 })));
  try {
    const spec = {
      indexes: [{ name: "race_name", field: "name", unique: true }],
      ttl: { name: "race_ttl", field: "at", seconds: 60 },
    };
    await Promise.all(stores.map((store, n) => store.collection("race_items", spec).put({ _id: `d${n}`, name: `n${n}`, at: Date.now() })));
    assert.equal(await stores[0].collection("race_items", spec).count(), 3);
  } finally {
    await Promise.all(stores.map((store) => store.close()));
  }
});

it("PostgreSQL: a table from before revisions gets the rev column; its rows read at the legacy revision and take a conditional write", async () => {
  const client = new pg.Client({ connectionString: server!.uri });
  await client.connect();
  const store = await openPostgresDocumentStore({ uri: server!.uri, ttlSweepIntervalMs: 0, poolConnectionsMax: 2 });
  try {
    await client.query(`CREATE TABLE "doc_legacy_items" (id text COLLATE "C" PRIMARY KEY, doc jsonb NOT NULL, expires_at bigint)`);
    await client.query(`INSERT INTO "doc_legacy_items" (id, doc) VALUES ('old', '{"_id":"old","name":"from before"}')`);
    const items = store.collection<Doc>("legacy_items");
    assert.deepEqual(await items.getRevisioned("old"), { doc: { _id: "old", name: "from before" }, rev: LEGACY_REVISION });
    await items.putIf({ _id: "old", name: "written again" }, LEGACY_REVISION);
    await assert.rejects(items.putIf({ _id: "old", name: "stale" }, LEGACY_REVISION), RevisionConflictError);
    assert.equal((await items.get("old"))?.name, "written again");
  } finally {
    await client.end();
    await store.close();
  }
});
