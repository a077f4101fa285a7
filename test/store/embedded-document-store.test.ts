// Runs the document store contract against the embedded LevelDB adapter, plus its own checks.
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { it } from "node:test";
import { FakeClock } from "../support/fake-clock.js";
import { LevelDocumentStore, openLevelDocumentStore } from "../../src/store/embedded/level-document-store.js";
import { Level } from "level";
import { CollectionKeys } from "../../src/store/embedded/key-codec.js";
import { DuplicateKeyError, RevisionConflictError, type Doc } from "../../src/store/ports.js";
import { LEGACY_REVISION } from "../../src/store/revisions.js";
import { runDocumentStoreContract } from "./document-store-contract.js";

runDocumentStoreContract("embedded (LevelDB)", async () => {
  const directory = await mkdtemp(join(tmpdir(), "doc-store-"));
  return {
    open: (clock) => openLevelDocumentStore({ directory, clock, ttlSweepIntervalMs: 0 }),
    sweepExpired: (store) => (store as LevelDocumentStore).sweepExpired(),
    dispose: () => rm(directory, { recursive: true, force: true }),
  };
});

it("embedded: a sweep deletes at most ttlSweepBatchMax documents per collection", async () => {
  const directory = await mkdtemp(join(tmpdir(), "doc-store-"));
  const clock = new FakeClock(Date.parse("2026-06-01T00:00:00Z"));
  const store = await openLevelDocumentStore({ directory, clock, ttlSweepIntervalMs: 0, ttlSweepBatchMax: 4 });
  try {
    const crashes = store.collection<Doc>("crashes", { ttl: { name: "crashes_ttl", field: "at", seconds: 1 } });
    for (let i = 0; i < 10; i++) await crashes.insert({ _id: `c${i}`, at: clock.nowMs() });
    clock.advance(1_000);
    assert.equal(await crashes.count(), 0);
    assert.equal(await store.sweepExpired(), 4);
    assert.equal(await store.sweepExpired(), 4);
    assert.equal(await store.sweepExpired(), 2);
    assert.equal(await store.sweepExpired(), 0);
  } finally {
    await store.close();
    await rm(directory, { recursive: true, force: true });
  }
});

it("embedded: writes issued together apply in call order, each seeing the ones before it", async () => {
  const directory = await mkdtemp(join(tmpdir(), "doc-store-"));
  const store = await openLevelDocumentStore({ directory, ttlSweepIntervalMs: 0 });
  try {
    const users = store.collection<Doc>("users", { indexes: [{ name: "users_username", field: "username", unique: true }] });
    const results = await Promise.allSettled([
      users.insert({ _id: "u1", username: "ann" }),
      users.put({ _id: "u1", username: "bea" }), // frees "ann" before the next insert
      users.insert({ _id: "u2", username: "ann" }),
      users.insert({ _id: "u3", username: "bea" }), // taken by u1 in the same group
      users.delete("u2"),
      users.insert({ _id: "u2", username: "cid" }),
    ]);
    assert.deepEqual(
      results.map((r) => r.status),
      ["fulfilled", "fulfilled", "fulfilled", "rejected", "fulfilled", "fulfilled"],
    );
    assert.ok((results[3] as PromiseRejectedResult).reason instanceof DuplicateKeyError);
    assert.deepEqual(await users.find({}, { sort: { field: "username", direction: 1 } }), [
      { _id: "u1", username: "bea" },
      { _id: "u2", username: "cid" },
    ]);
    assert.deepEqual(await users.find({ username: "ann" }), []);
  } finally {
    await store.close();
    await rm(directory, { recursive: true, force: true });
  }
});

it("embedded: a document written before documents had revisions reads at the legacy revision and takes a conditional write", async () => {
  const directory = await mkdtemp(join(tmpdir(), "doc-store-"));
  try {
    const first = await openLevelDocumentStore({ directory, ttlSweepIntervalMs: 0 });
    await first.collection<Doc>("groups").insert({ _id: "placeholder" });
    await first.close();
    // The value format of the earlier layout: the document JSON alone.
    const db = new Level<string, string>(directory, { keyEncoding: "utf8", valueEncoding: "utf8" });
    await db.put(new CollectionKeys("groups").doc("old"), JSON.stringify({ _id: "old", name: "from before" }));
    await db.close();
    const store = await openLevelDocumentStore({ directory, ttlSweepIntervalMs: 0 });
    try {
      const groups = store.collection<Doc>("groups");
      assert.deepEqual(await groups.getRevisioned("old"), { doc: { _id: "old", name: "from before" }, rev: LEGACY_REVISION });
      const rev = await groups.putIf({ _id: "old", name: "written again" }, LEGACY_REVISION);
      assert.notEqual(rev, LEGACY_REVISION);
      await assert.rejects(groups.putIf({ _id: "old", name: "stale" }, LEGACY_REVISION), RevisionConflictError);
      assert.equal((await groups.get("old"))?.name, "written again");
    } finally {
      await store.close();
    }
  } finally {
    await rm(directory, { recursive: true, force: true });
  }
});
