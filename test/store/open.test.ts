// Adapter selection by profile and URI scheme (the database-backed choices are exercised in the
// PostgreSQL and Redis test files, next to their servers).
import assert from "node:assert/strict";
import { mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { it } from "node:test";
import { LevelDocumentStore } from "../../src/store/embedded/level-document-store.js";
import { FsBlobStore } from "../../src/store/fs-blob-store.js";
import { MemoryKvStore } from "../../src/store/memory/memory-kv-store.js";
import { openBlobStore, openDocumentStore, openKvStore, uriScheme } from "../../src/store/open.js";

it("development without a URI opens the embedded store under <dataDir>/documents", async () => {
  const dataDir = await mkdtemp(join(tmpdir(), "open-"));
  try {
    const store = await openDocumentStore({ profile: "development", dataDir: join(dataDir, "nested"), ttlSweepIntervalMs: 0 });
    try {
      assert.ok(store instanceof LevelDocumentStore);
      await store.collection("groups").put({ _id: "g" });
      assert.ok((await stat(join(dataDir, "nested", "documents"))).isDirectory());
    } finally {
      await store.close();
    }
    const blobs = await openBlobStore({ profile: "development", dataDir });
    assert.ok(blobs instanceof FsBlobStore);
    await blobs.put(new Uint8Array([1]));
    assert.ok((await stat(join(dataDir, "blobs"))).isDirectory());
  } finally {
    await rm(dataDir, { recursive: true, force: true });
  }
});

it("production refuses to open without a document database URI", async () => {
  await assert.rejects(openDocumentStore({ profile: "production", dataDir: "/nonexistent" }), /production profile needs a shared document database/);
});

it("rejects unknown URI schemes", async () => {
  await assert.rejects(openDocumentStore({ profile: "production", dataDir: "/x", uri: "mysql://h/db" }), /unsupported document database URI scheme "mysql"/);
  await assert.rejects(openKvStore({ uri: "memcached://h" }), /unsupported key-value store URI scheme/);
});

it("opens the in-memory key-value store without a URI", async () => {
  const kv = await openKvStore();
  assert.ok(kv instanceof MemoryKvStore);
  await kv.close();
});

it("reads URI schemes, including multi-host and +srv forms", () => {
  assert.equal(uriScheme("mongodb+srv://cluster.example/db"), "mongodb+srv");
  assert.equal(uriScheme("mongodb://a:1,b:2/db?replicaSet=rs"), "mongodb");
  assert.equal(uriScheme("PostgreSQL://u@h/db"), "postgresql");
  assert.equal(uriScheme("not a uri"), undefined);
});
