import { after, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ConfState, Entry } from "../../raft/types.js";
import { Level } from "level";
import { LevelStorage } from "../../src/cluster/raft-host/level-storage.js";
import { ErrCompacted, ErrSnapOutOfDate, ErrUnavailable } from "../../raft/errors.js";
import { runStorageContract } from "../raft/storage-contract.js";

const root = mkdtempSync(join(tmpdir(), "level-storage-"));
after(() => rmSync(root, { recursive: true, force: true }));
let dirCount = 0;
const freshDir = () => join(root, `db-${dirCount++}`);
const confState: ConfState = { voters: ["a", "b", "c"], learners: [], votersOutgoing: [], learnersNext: [], autoLeave: false };

runStorageContract("LevelStorage", async () => {
  const dir = freshDir();
  let storage = await LevelStorage.open(dir);
  return {
    storage,
    close: () => storage.close(),
    reopen: async () => {
      await storage.close();
      storage = await LevelStorage.open(dir);
      return storage;
    },
  };
});

function entry(index: number, term: number, text = `e${index}`): Entry {
  return { index, term, type: "normal", data: new TextEncoder().encode(text) };
}

async function withStorage(fn: (s: LevelStorage, dir: string) => Promise<void>): Promise<void> {
  const dir = freshDir();
  const storage = await LevelStorage.open(dir);
  try {
    await fn(storage, dir);
  } finally {
    await storage.close();
  }
}

test("a fresh storage is empty and bootstrap sets the first configuration", async () => {
  await withStorage(async (s) => {
    assert.equal(s.firstIndex(), 1);
    assert.equal(s.lastIndex(), 0);
    assert.equal(s.term(0), 0);
    assert.deepEqual(s.initialState().hardState, { term: 0, vote: null, commit: 0 });
    await s.bootstrap(confState);
    assert.deepEqual(s.initialState().confState, confState);
  });
});

test("a hard state that only moved the commit index is written with the next batch or snapshot", async () => {
  const dir = freshDir();
  let s = await LevelStorage.open(dir);
  await s.bootstrap(confState);
  await s.persist({ hardState: { term: 2, vote: "a", commit: 1 }, entries: [entry(1, 1), entry(2, 2), entry(3, 2)], snapshot: null });
  await s.persist({ hardState: { term: 2, vote: "a", commit: 2 }, entries: [], snapshot: null, mustSync: false });
  assert.deepEqual(s.currentHardState(), { term: 2, vote: "a", commit: 2 });
  await s.persist({ hardState: null, entries: [entry(4, 2)], snapshot: null });
  await s.persist({ hardState: { term: 2, vote: "a", commit: 4 }, entries: [], snapshot: null, mustSync: false });
  await s.createSnapshot(4, confState, new Uint8Array([1]));
  await s.close();
  s = await LevelStorage.open(dir);
  try {
    // The snapshot went to disk with the hard state: its commit index is not behind the snapshot.
    assert.deepEqual(s.initialState().hardState, { term: 2, vote: "a", commit: 4 });
    await s.persist({ hardState: { term: 2, vote: "a", commit: 4 }, entries: [entry(5, 2)], snapshot: null });
    await s.persist({ hardState: { term: 2, vote: "a", commit: 5 }, entries: [], snapshot: null, mustSync: false });
  } finally {
    await s.close();
  }
  s = await LevelStorage.open(dir);
  try {
    assert.deepEqual(s.initialState().hardState, { term: 2, vote: "a", commit: 5 }, "close() wrote the last hard state");
  } finally {
    await s.close();
  }
});

test("compaction removes the compacted entries from disk", async () => {
  const dir = freshDir();
  const s = await LevelStorage.open(dir);
  await s.bootstrap(confState);
  await s.persist({ hardState: { term: 1, vote: "a", commit: 6 }, entries: [1, 2, 3, 4, 5, 6].map((i) => entry(i, 1)), snapshot: null });
  await s.createSnapshot(4, confState, new Uint8Array([4]));
  await s.compact(4);
  await s.close();
  const db = new Level<string, Uint8Array>(dir, { keyEncoding: "utf8", valueEncoding: "view" });
  try {
    const keys = await db.keys({ gte: "entry/", lt: "entry/~" }).all();
    assert.deepEqual(keys, ["entry/0000000000000005", "entry/0000000000000006"]);
  } finally {
    await db.close();
  }
});

test("persist writes hard state and entries in one batch and survives a reopen", async () => {
  const dir = freshDir();
  const s = await LevelStorage.open(dir);
  await s.bootstrap(confState);
  await s.persist({ hardState: { term: 2, vote: "a", commit: 2 }, entries: [entry(1, 1), entry(2, 2), entry(3, 2)], snapshot: null });
  await s.close();
  const reopened = await LevelStorage.open(dir);
  try {
    assert.deepEqual(reopened.initialState(), { hardState: { term: 2, vote: "a", commit: 2 }, confState });
    assert.equal(reopened.lastIndex(), 3);
    assert.deepEqual(
      reopened.entries(1, 4, Infinity).map((e) => [e.index, e.term, new TextDecoder().decode(e.data)]),
      [
        [1, 1, "e1"],
        [2, 2, "e2"],
        [3, 2, "e3"],
      ],
    );
  } finally {
    await reopened.close();
  }
});

test("an append that conflicts truncates the old tail, also on disk", async () => {
  const dir = freshDir();
  const s = await LevelStorage.open(dir);
  await s.append([entry(1, 1), entry(2, 1), entry(3, 1), entry(4, 1)]);
  await s.append([entry(3, 2, "new3")]);
  assert.equal(s.lastIndex(), 3);
  assert.equal(s.term(3), 2);
  await s.close();
  const reopened = await LevelStorage.open(dir);
  try {
    assert.equal(reopened.lastIndex(), 3);
    assert.equal(new TextDecoder().decode(reopened.entries(3, 4, Infinity)[0]!.data), "new3");
    await assert.rejects(reopened.append([entry(6, 2)]), /gap/);
  } finally {
    await reopened.close();
  }
});

test("entries honours the size limit but always returns one entry; out-of-range reads are typed errors", async () => {
  await withStorage(async (s) => {
    await s.append([entry(1, 1, "x".repeat(100)), entry(2, 1, "x".repeat(100)), entry(3, 1)]);
    assert.equal(s.entries(1, 4, 1).length, 1);
    assert.equal(s.entries(1, 4, 250).length, 2);
    assert.throws(() => s.entries(1, 5, Infinity), ErrUnavailable);
    assert.throws(() => s.term(4), ErrUnavailable);
  });
});

test("snapshot, compaction and restart from snapshot plus log tail", async () => {
  const dir = freshDir();
  const s = await LevelStorage.open(dir);
  await s.bootstrap(confState);
  await s.append([1, 2, 3, 4, 5, 6].map((i) => entry(i, i < 4 ? 1 : 2)));
  const snap = await s.createSnapshot(4, confState, new TextEncoder().encode("state@4"));
  assert.deepEqual(snap.metadata, { index: 4, term: 2, confState });
  await assert.rejects(s.createSnapshot(3, confState, new Uint8Array()), ErrSnapOutOfDate);
  await s.compact(3);
  assert.equal(s.firstIndex(), 4);
  assert.equal(s.term(3), 1);
  assert.throws(() => s.term(2), ErrCompacted);
  assert.throws(() => s.entries(3, 5, Infinity), ErrCompacted);
  await s.close();
  const reopened = await LevelStorage.open(dir);
  try {
    assert.equal(reopened.firstIndex(), 4);
    assert.equal(reopened.lastIndex(), 6);
    assert.equal(reopened.term(3), 1);
    assert.equal(new TextDecoder().decode(reopened.snapshot().data), "state@4");
  } finally {
    await reopened.close();
  }
});

test("applying a snapshot from the leader replaces the log atomically", async () => {
  const dir = freshDir();
  const s = await LevelStorage.open(dir);
  await s.append([entry(1, 1), entry(2, 1)]);
  const snapshot = { metadata: { index: 10, term: 3, confState }, data: new TextEncoder().encode("leader") };
  await s.persist({ hardState: { term: 3, vote: null, commit: 10 }, entries: [entry(11, 3)], snapshot });
  assert.equal(s.firstIndex(), 11);
  assert.equal(s.lastIndex(), 11);
  await assert.rejects(s.applySnapshot({ ...snapshot, metadata: { ...snapshot.metadata, index: 9 } }), ErrSnapOutOfDate);
  await s.close();
  const reopened = await LevelStorage.open(dir);
  try {
    assert.equal(reopened.firstIndex(), 11);
    assert.equal(reopened.term(10), 3);
    assert.deepEqual(reopened.initialState(), { hardState: { term: 3, vote: null, commit: 10 }, confState });
  } finally {
    await reopened.close();
  }
});
