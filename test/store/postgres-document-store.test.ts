// Runs the document store contract against the PostgreSQL adapter on a real server started here.
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { openBlobStore, openDocumentStore } from "../../src/store/open.js";
import { PostgresBlobStore } from "../../src/store/postgres/postgres-blob-store.js";
import { openPostgresDocumentStore, PostgresDocumentStore } from "../../src/store/postgres/postgres-document-store.js";
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
