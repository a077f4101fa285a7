/**
 * The contract every Raft {@link Storage} must honour, as one node:test suite run against each
 * implementation (MemoryStorage here, the LevelDB storage in src/cluster/). Reads are synchronous
 * (the core calls them inside `step`); writes may be asynchronous and are awaited. Expected
 * failures are recognised by their stable `code`: COMPACTED, UNAVAILABLE, SNAPSHOT_OUT_OF_DATE.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { ConfState, Entry, HardState, Snapshot, Storage } from "../../raft/types.js";

/** Write side of a storage under test; each may be synchronous or return a promise. */
export interface WritableStorage extends Storage {
  append(entries: Entry[]): void | Promise<void>;
  setHardState(hardState: HardState): void | Promise<void>;
  applySnapshot(snapshot: Snapshot): void | Promise<void>;
  compact(index: number): void | Promise<void>;
  createSnapshot(index: number, confState: ConfState, data: Uint8Array): Snapshot | Promise<Snapshot>;
}

/** One fresh, empty storage; `reopen`, when given, closes it and opens the same data again. */
export interface StorageUnderTest {
  storage: WritableStorage;
  close(): Promise<void>;
  reopen?(): Promise<WritableStorage>;
}

const confState: ConfState = { voters: ["a", "b", "c"], learners: ["d"], votersOutgoing: [], learnersNext: [], autoLeave: false };

function entry(index: number, term: number, text = ""): Entry {
  return { index, term, type: "normal", data: new TextEncoder().encode(text) };
}

function entries(from: number, to: number, term: number): Entry[] {
  const out: Entry[] = [];
  for (let i = from; i <= to; i++) out.push(entry(i, term, `e${i}`));
  return out;
}

async function expectCode(action: () => unknown, code: string): Promise<void> {
  let caught: unknown = null;
  try {
    await action();
  } catch (error) {
    caught = error;
  }
  assert.ok(caught !== null, `expected an error with code ${code}`);
  assert.equal((caught as { code?: unknown }).code, code);
}

function summary(list: readonly Entry[]): string[] {
  return list.map((e) => `${e.term}/${e.index}`);
}

/**
 * Registers the storage contract suite under `name`. `factory` opens a fresh, empty storage for
 * each test; the suite closes it afterwards.
 */
export function runStorageContract(name: string, factory: () => Promise<StorageUnderTest>): void {
  describe(`raft storage contract: ${name}`, () => {
    async function withStorage(body: (s: WritableStorage, under: StorageUnderTest) => Promise<void>): Promise<void> {
      const under = await factory();
      try {
        await body(under.storage, under);
      } finally {
        await under.close();
      }
    }

    it("starts empty: no hard state, first index 1, last index 0, term 0 at index 0", () =>
      withStorage(async (s) => {
        const state = s.initialState();
        assert.deepEqual(state.hardState, { term: 0, vote: null, commit: 0 });
        assert.equal(s.firstIndex(), 1);
        assert.equal(s.lastIndex(), 0);
        assert.equal(s.term(0), 0);
        assert.equal(s.snapshot().metadata.index, 0);
      }));

    it("keeps the hard state it is given", () =>
      withStorage(async (s) => {
        await s.setHardState({ term: 3, vote: "b", commit: 0 });
        assert.deepEqual(s.initialState().hardState, { term: 3, vote: "b", commit: 0 });
      }));

    it("returns appended entries and their terms", () =>
      withStorage(async (s) => {
        await s.append(entries(1, 5, 1));
        assert.equal(s.firstIndex(), 1);
        assert.equal(s.lastIndex(), 5);
        assert.equal(s.term(3), 1);
        assert.deepEqual(summary(s.entries(2, 5, Number.MAX_SAFE_INTEGER)), ["1/2", "1/3", "1/4"]);
        assert.equal(new TextDecoder().decode(s.entries(4, 5, Number.MAX_SAFE_INTEGER)[0].data), "e4");
      }));

    it("limits entries by size but always returns at least one", () =>
      withStorage(async (s) => {
        await s.append(entries(1, 5, 1));
        assert.deepEqual(summary(s.entries(1, 6, 0)), ["1/1"]);
        const one = s.entries(1, 2, Number.MAX_SAFE_INTEGER);
        assert.equal(one.length, 1);
        const all = s.entries(1, 6, Number.MAX_SAFE_INTEGER);
        assert.equal(all.length, 5);
      }));

    it("replaces a conflicting suffix on append", () =>
      withStorage(async (s) => {
        await s.append(entries(1, 5, 1));
        await s.append([entry(4, 2, "x"), entry(5, 2, "y"), entry(6, 2, "z")]);
        assert.deepEqual(summary(s.entries(1, 7, Number.MAX_SAFE_INTEGER)), ["1/1", "1/2", "1/3", "2/4", "2/5", "2/6"]);
        await s.append([entry(3, 3, "w")]);
        assert.equal(s.lastIndex(), 3);
        assert.equal(s.term(3), 3);
      }));

    it("answers UNAVAILABLE for a term beyond the last index", () =>
      withStorage(async (s) => {
        await s.append(entries(1, 3, 1));
        await expectCode(() => s.term(4), "UNAVAILABLE");
      }));

    it("compacts: earlier indexes answer COMPACTED, the compaction point keeps its term", () =>
      withStorage(async (s) => {
        await s.append([...entries(1, 3, 1), ...entries(4, 6, 2)]);
        await s.createSnapshot(4, confState, new Uint8Array([1]));
        await s.compact(4);
        assert.equal(s.firstIndex(), 5);
        assert.equal(s.lastIndex(), 6);
        assert.equal(s.term(4), 2);
        await expectCode(() => s.term(3), "COMPACTED");
        await expectCode(() => s.entries(4, 6, Number.MAX_SAFE_INTEGER), "COMPACTED");
        assert.deepEqual(summary(s.entries(5, 7, Number.MAX_SAFE_INTEGER)), ["2/5", "2/6"]);
        await expectCode(() => s.compact(4), "COMPACTED");
        await expectCode(() => s.compact(2), "COMPACTED");
      }));

    it("ignores appended entries at or before the compaction point", () =>
      withStorage(async (s) => {
        await s.append(entries(1, 6, 1));
        await s.createSnapshot(4, confState, new Uint8Array([1]));
        await s.compact(4);
        await s.append([...entries(3, 6, 1), entry(7, 1, "e7")]);
        assert.equal(s.firstIndex(), 5);
        assert.equal(s.lastIndex(), 7);
        assert.deepEqual(summary(s.entries(5, 8, Number.MAX_SAFE_INTEGER)), ["1/5", "1/6", "1/7"]);
      }));

    it("creates a snapshot at an index in the log and refuses an older one", () =>
      withStorage(async (s) => {
        await s.append([...entries(1, 3, 1), ...entries(4, 5, 2)]);
        const snap = await s.createSnapshot(4, confState, new Uint8Array([7, 8]));
        assert.equal(snap.metadata.index, 4);
        assert.equal(snap.metadata.term, 2);
        const stored = s.snapshot();
        assert.equal(stored.metadata.index, 4);
        assert.equal(stored.metadata.term, 2);
        assert.deepEqual(stored.metadata.confState, confState);
        assert.deepEqual([...stored.data], [7, 8]);
        await expectCode(() => s.createSnapshot(3, confState, new Uint8Array()), "SNAPSHOT_OUT_OF_DATE");
        await expectCode(() => s.createSnapshot(4, confState, new Uint8Array()), "SNAPSHOT_OUT_OF_DATE");
      }));

    it("installs a received snapshot, replacing the log, and refuses an older one", () =>
      withStorage(async (s) => {
        await s.append(entries(1, 3, 1));
        const snap: Snapshot = { metadata: { index: 10, term: 4, confState }, data: new Uint8Array([9]) };
        await s.applySnapshot(snap);
        assert.equal(s.firstIndex(), 11);
        assert.equal(s.lastIndex(), 10);
        assert.equal(s.term(10), 4);
        assert.deepEqual(s.initialState().confState, confState);
        await expectCode(() => s.term(3), "COMPACTED");
        await s.append(entries(11, 12, 4));
        assert.equal(s.lastIndex(), 12);
        await expectCode(() => s.applySnapshot({ metadata: { index: 9, term: 4, confState }, data: new Uint8Array() }), "SNAPSHOT_OUT_OF_DATE");
        await expectCode(() => s.applySnapshot(snap), "SNAPSHOT_OUT_OF_DATE");
      }));

    it("keeps hard state, log and snapshot across a reopen (when the storage is durable)", async (t) => {
      const under = await factory();
      if (!under.reopen) {
        await under.close();
        t.skip("storage is not durable");
        return;
      }
      let current: WritableStorage = under.storage;
      try {
        await current.append(entries(1, 6, 2));
        await current.setHardState({ term: 2, vote: "a", commit: 5 });
        await current.createSnapshot(3, confState, new Uint8Array([5]));
        await current.compact(3);
        current = await under.reopen();
        assert.deepEqual(current.initialState().hardState, { term: 2, vote: "a", commit: 5 });
        assert.equal(current.firstIndex(), 4);
        assert.equal(current.lastIndex(), 6);
        assert.equal(current.term(3), 2);
        assert.equal(current.snapshot().metadata.index, 3);
        assert.deepEqual(summary(current.entries(4, 7, Number.MAX_SAFE_INTEGER)), ["2/4", "2/5", "2/6"]);
      } finally {
        await under.close();
      }
    });
  });
}
