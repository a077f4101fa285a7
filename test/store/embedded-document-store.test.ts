// Runs the document store contract against the embedded LevelDB adapter, plus its own checks.
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { it } from "node:test";
import { ManualClock } from "../../src/shared/clock.js";
import { LevelDocumentStore, openLevelDocumentStore } from "../../src/store/embedded/level-document-store.js";
import type { Doc } from "../../src/store/ports.js";
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
  const clock = new ManualClock(Date.parse("2026-06-01T00:00:00Z"));
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
