/**
 * The document store contract: one suite every DocumentStore adapter runs (embedded LevelDB,
 * PostgreSQL, MongoDB). A runner passes a factory for a fresh subject; each test opens the store
 * with a manual clock, so TTL expiry is checked by advancing time instead of sleeping.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { describe, it } from "node:test";
import fc from "fast-check";
import type { Clock } from "../../src/shared/clock.js";
import { FakeClock } from "../support/fake-clock.js";
import { AssertionError } from "../../src/shared/errors.js";
import { documentComparator, matchesFilter } from "../../src/store/document-query.js";
import { DuplicateKeyError, type CollectionSpec, type Doc, type DocumentStore, type Filter, type FindOptions } from "../../src/store/ports.js";
import { runRevisionContract } from "./document-revision-contract.js";
import { checkAgainstReference, portableStrings, queryArbitraries, queryPropertySpec } from "./query-arbitraries.js";

/** What a runner provides for one test. */
export interface DocumentStoreSubject {
  /** Opens the store under test; called again after close() to check persistence. */
  open(clock: Clock): Promise<DocumentStore>;
  /** Deletes expired documents now (the adapter's sweeper step), returning how many. */
  sweepExpired?(store: DocumentStore): Promise<number>;
  /** Releases what the subject holds (temp directories, databases). */
  dispose(): Promise<void>;
}

interface Item extends Doc {
  name?: string;
  size?: number | null;
  active?: boolean;
  group?: string;
  portRange?: { start: number; end: number };
  tags?: string[];
}

/** Clocks start at the real time: a real MongoDB's TTL monitor expires by its own clock. */
const startMs = () => Date.now();

/** Collection names unique per test, so subjects may share one database. */
function uniqueName(base: string): string {
  return `${base}_${randomBytes(4).toString("hex")}`;
}

const fixtures: Item[] = [
  { _id: "a1", name: "alpha", size: 10, active: true, group: "g1", portRange: { start: 30000, end: 30010 } },
  { _id: "a2", name: "beta", size: 2, active: false, group: "g1", portRange: { start: 20000, end: 20010 } },
  { _id: "a3", name: "gamma", size: 10, active: true, group: "g2", portRange: { start: 25000, end: 25100 } },
  { _id: "a4", name: "Delta", size: -3.5, active: false, group: "g2" },
  { _id: "a5", name: "epsilon", size: null, active: true, group: "g3" },
  { _id: "a6", name: "zeta", active: true },
  { _id: "b1", name: "10", size: 100, active: false, group: "g1", tags: ["x"] },
  { _id: "b2", name: "ä-umlaut", size: 0, active: true, group: "g3" },
  { _id: "b3", name: "alpha", size: 7, active: true, group: "g2" },
];

const indexedSpec: CollectionSpec = {
  indexes: [
    { name: "items_name", field: "name" },
    { name: "items_size", field: "size" },
    { name: "items_active", field: "active" },
    { name: "items_group", field: "group" },
    { name: "items_port_start", field: "portRange.start" },
  ],
};

const ids = (docs: Doc[]) => docs.map((d) => d._id);

/** Random cases per adapter; each one creates a collection with two indexes. */
const propertyRuns = 25;

/** Query cases checked on both an indexed and an unindexed collection, with expected ids. */
const queryCases: { title: string; filter: Filter; options?: FindOptions; expected: string[] }[] = [
  { title: "string equality", filter: { name: "alpha" }, expected: ["a1", "b3"] },
  { title: "number equality", filter: { size: 10 }, expected: ["a1", "a3"] },
  { title: "number equality ignores numeric strings", filter: { name: 10 }, expected: [] },
  { title: "boolean equality", filter: { active: false }, expected: ["a2", "a4", "b1"] },
  { title: "null matches null and missing", filter: { size: null }, expected: ["a5", "a6"] },
  { title: "missing group", filter: { group: null }, expected: ["a6"] },
  { title: "$in strings", filter: { group: { $in: ["g3", "g2"] } }, expected: ["a3", "a4", "a5", "b2", "b3"] },
  { title: "$in numbers", filter: { size: { $in: [2, 100, 999] } }, expected: ["a2", "b1"] },
  { title: "$gt number", filter: { size: { $gt: 7 } }, expected: ["a1", "a3", "b1"] },
  { title: "$gte and $lt numbers", filter: { size: { $gte: 0, $lt: 10 } }, expected: ["a2", "b2", "b3"] },
  { title: "$lte negative", filter: { size: { $lte: 0 } }, expected: ["a4", "b2"] },
  { title: "string range is type-bracketed", filter: { name: { $gte: "a", $lt: "c" } }, expected: ["a1", "a2", "b3"] },
  { title: "string range by code point", filter: { name: { $gt: "zeta" } }, expected: ["b2"] },
  { title: "uppercase sorts before lowercase", filter: { name: { $lt: "a" } }, expected: ["a4", "b1"] },
  { title: "conjunction", filter: { group: "g2", active: true }, expected: ["a3", "b3"] },
  { title: "conjunction with range", filter: { active: true, size: { $gte: 7 } }, expected: ["a1", "a3", "b3"] },
  { title: "dotted field equality", filter: { "portRange.start": 20000 }, expected: ["a2"] },
  { title: "dotted field range", filter: { "portRange.start": { $gte: 25000 } }, expected: ["a1", "a3"] },
  { title: "_id range", filter: { _id: { $gte: "a3", $lt: "b2" } }, expected: ["a3", "a4", "a5", "a6", "b1"] },
  { title: "_id equality", filter: { _id: "a4" }, expected: ["a4"] },
  { title: "_id $in", filter: { _id: { $in: ["b3", "a1", "zz"] } }, expected: ["a1", "b3"] },
  { title: "no match", filter: { group: "nope" }, expected: [] },
  {
    title: "sort by string desc",
    filter: {},
    options: { sort: { field: "name", direction: -1 } },
    expected: ["b2", "a6", "a3", "a5", "a2", "b3", "a1", "a4", "b1"],
  },
  {
    title: "sort by number asc with missing and null first, ties by _id",
    filter: {},
    options: { sort: { field: "size", direction: 1 } },
    expected: ["a6", "a5", "a4", "b2", "a2", "b3", "a1", "a3", "b1"],
  },
  {
    title: "sort by number desc ties by _id desc",
    filter: { size: { $gte: 7 } },
    options: { sort: { field: "size", direction: -1 } },
    expected: ["b1", "a3", "a1", "b3"],
  },
  { title: "sort on booleans", filter: { group: "g1" }, options: { sort: { field: "active", direction: 1 } }, expected: ["a2", "b1", "a1"] },
  {
    title: "sort by dotted field",
    filter: { "portRange.start": { $gt: 0 } },
    options: { sort: { field: "portRange.start", direction: 1 } },
    expected: ["a2", "a3", "a1"],
  },
  { title: "skip and limit on _id order", filter: {}, options: { skip: 2, limit: 3 }, expected: ["a3", "a4", "a5"] },
  {
    title: "skip and limit with sort",
    filter: { active: true },
    options: { sort: { field: "name", direction: 1 }, skip: 1, limit: 2 },
    expected: ["b3", "a5"],
  },
  { title: "limit 0", filter: {}, options: { limit: 0 }, expected: [] },
  { title: "skip past the end", filter: {}, options: { skip: 50 }, expected: [] },
  {
    title: "_id desc with equality on an indexed field",
    filter: { group: "g2" },
    options: { sort: { field: "_id", direction: -1 } },
    expected: ["b3", "a4", "a3"],
  },
  {
    title: "keyset step with equality",
    filter: { group: "g1", _id: { $lt: "b1" } },
    options: { sort: { field: "_id", direction: -1 }, limit: 1 },
    expected: ["a2"],
  },
];

/** Runs the document store contract against the subjects `createSubject` makes. */
export function runDocumentStoreContract(name: string, createSubject: () => Promise<DocumentStoreSubject>): void {
  runRevisionContract(name, createSubject);
  async function withStore(body: (store: DocumentStore, clock: FakeClock, subject: DocumentStoreSubject) => Promise<void>): Promise<void> {
    const subject = await createSubject();
    const clock = new FakeClock(startMs());
    let store: DocumentStore | undefined;
    try {
      store = await subject.open(clock);
      await body(store, clock, subject);
    } finally {
      await store?.close();
      await subject.dispose();
    }
  }

  describe(`document store contract: ${name}`, () => {
    it("answers ping", () => withStore((store) => store.ping()));

    it("inserts, reads, replaces and deletes documents", () =>
      withStore(async (store) => {
        const items = store.collection<Item>(uniqueName("crud"));
        assert.equal(await items.get("x"), null);
        await items.insert({ _id: "x", name: "first", size: 1, portRange: { start: 1, end: 2 }, tags: ["a", "b"] });
        assert.deepEqual(await items.get("x"), { _id: "x", name: "first", size: 1, portRange: { start: 1, end: 2 }, tags: ["a", "b"] });
        await items.put({ _id: "x", name: "second" });
        assert.deepEqual(await items.get("x"), { _id: "x", name: "second" }, "put replaces the whole document");
        await items.put({ _id: "y", name: "upserted" });
        assert.equal((await items.get("y"))?.name, "upserted");
        assert.equal(await items.delete("x"), true);
        assert.equal(await items.delete("x"), false);
        assert.equal(await items.get("x"), null);
        assert.deepEqual(ids(await items.find()), ["y"]);
      }));

    it("stores JSON: dates become ISO strings, undefined fields vanish, unicode ids round-trip", () =>
      withStore(async (store) => {
        const items = store.collection<Doc>(uniqueName("json"));
        const at = new Date("2026-02-03T04:05:06.007Z");
        await items.insert({ _id: "é/ü 1", at, gone: undefined, nested: { deep: [1, { x: "y" }] } });
        assert.deepEqual(await items.get("é/ü 1"), { _id: "é/ü 1", at: at.toISOString(), nested: { deep: [1, { x: "y" }] } });
      }));

    it("rejects a duplicate _id on insert with DuplicateKeyError", () =>
      withStore(async (store) => {
        const collectionName = uniqueName("dup");
        const items = store.collection<Item>(collectionName);
        await items.insert({ _id: "k", name: "one" });
        await assert.rejects(items.insert({ _id: "k", name: "two" }), (error: unknown) => {
          assert.ok(error instanceof DuplicateKeyError);
          assert.equal(error.code, "DUPLICATE_KEY");
          assert.equal(error.collection, collectionName);
          return true;
        });
        assert.equal((await items.get("k"))?.name, "one");
      }));

    for (const variant of ["indexed", "unindexed"] as const) {
      it(`evaluates filters, sorting and paging (${variant})`, () =>
        withStore(async (store) => {
          const items = store.collection<Item>(uniqueName(`q_${variant}`), variant === "indexed" ? indexedSpec : {});
          for (const doc of fixtures) await items.insert(doc);
          for (const testCase of queryCases) {
            const found = await items.find(testCase.filter, testCase.options);
            assert.deepEqual(ids(found), testCase.expected, testCase.title);
            if (!testCase.options) assert.equal(await items.count(testCase.filter), testCase.expected.length, `count: ${testCase.title}`);
          }
        }));

      it(`agrees with the reference semantics on generated queries (${variant})`, () =>
        withStore(async (store) => {
          const items = store.collection<Item>(uniqueName(`ref_${variant}`), variant === "indexed" ? indexedSpec : {});
          for (const doc of fixtures) await items.insert(doc);
          const filters: Filter[] = [
            {},
            { size: { $gt: -10, $lte: 10 } },
            { name: { $gte: "beta" } },
            { group: { $in: ["g1"] }, size: { $lt: 50 } },
            { active: true },
            { _id: { $gt: "a2" } },
            { _id: { $lte: "a5" }, active: true },
            { _id: { $in: ["b3", "a1", "a5", "nope"] } },
            { _id: { $in: ["b3", "a1", "a5"], $gt: "a1" }, group: { $in: ["g2", "g3"] } },
          ];
          const sorts: FindOptions["sort"][] = [
            undefined,
            { field: "_id", direction: -1 },
            { field: "size", direction: 1 },
            { field: "size", direction: -1 },
            { field: "name", direction: 1 },
            { field: "group", direction: -1 },
          ];
          for (const filter of filters) {
            for (const sort of sorts) {
              for (const [skip, limit] of [
                [0, undefined],
                [1, 2],
                [0, 1],
                [3, 10],
              ] as const) {
                const options: FindOptions = { ...(sort ? { sort } : {}), skip, ...(limit !== undefined ? { limit } : {}) };
                const expected = fixtures
                  .filter((d) => matchesFilter(d, filter))
                  .sort(documentComparator(sort))
                  .slice(skip, limit === undefined ? undefined : skip + limit);
                assert.deepEqual(ids(await items.find(filter, options)), ids(expected), JSON.stringify({ filter, options }));
              }
            }
          }
        }));
    }

    it("agrees with the reference semantics on random documents and queries (property)", () =>
      withStore(async (store) => {
        const { docs, filter, options } = queryArbitraries(portableStrings);
        const base = uniqueName("prop");
        let run = 0;
        await fc.assert(
          fc.asyncProperty(docs, filter, options, async (generated, f, o) => {
            await checkAgainstReference(store.collection<Doc>(`${base}_${run++}`, queryPropertySpec), generated, f, o);
          }),
          { numRuns: propertyRuns, seed: 20261122 },
        );
      }));

    it("counts and deletes many by filter", () =>
      withStore(async (store) => {
        const items = store.collection<Item>(uniqueName("many"), indexedSpec);
        for (const doc of fixtures) await items.insert(doc);
        assert.equal(await items.count(), fixtures.length);
        assert.equal(await items.deleteMany({ group: "g1" }), 3);
        assert.equal(await items.count(), fixtures.length - 3);
        assert.deepEqual(ids(await items.find({ group: "g1" })), []);
        assert.equal(await items.deleteMany({ size: { $gt: 1000 } }), 0);
        assert.equal(await items.deleteMany(), fixtures.length - 3);
        assert.equal(await items.count(), 0);
      }));

    it("enforces unique indexes on insert and put, exempting documents without the field", () =>
      withStore(async (store) => {
        const users = store.collection<Doc>(uniqueName("users"), { indexes: [{ name: "users_username", field: "username", unique: true }] });
        await users.insert({ _id: "u1", username: "ann" });
        await users.insert({ _id: "u2", username: "bob" });
        await assert.rejects(users.insert({ _id: "u3", username: "ann" }), DuplicateKeyError);
        await assert.rejects(users.put({ _id: "u2", username: "ann" }), DuplicateKeyError);
        assert.equal((await users.get("u2"))?.username, "bob", "a rejected put changes nothing");
        assert.equal(await users.get("u3"), null);
        await users.put({ _id: "u1", username: "ann", role: "ADMIN" });
        await users.insert({ _id: "n1" });
        await users.insert({ _id: "n2" });
        assert.equal(await users.delete("u1"), true);
        await users.insert({ _id: "u3", username: "ann" });
        assert.deepEqual(ids(await users.find({ username: "ann" })), ["u3"]);
      }));

    it("expires documents after the TTL, hiding them before the sweeper runs", () =>
      withStore(async (store, clock, subject) => {
        const spec: CollectionSpec = { ttl: { name: uniqueName("ttl"), field: "createdAt", seconds: 60 }, indexes: [{ name: "logs_kind", field: "kind" }] };
        const logs = store.collection<Doc>(uniqueName("logs"), spec);
        const now = clock.nowMs();
        await logs.insert({ _id: "iso", kind: "k", createdAt: new Date(now).toISOString() });
        await logs.insert({ _id: "date", kind: "k", createdAt: new Date(now + 30_000) });
        await logs.insert({ _id: "epoch", kind: "k", createdAt: now - 30_000 });
        await logs.insert({ _id: "never", kind: "k" });
        assert.equal(await logs.count({ kind: "k" }), 4);
        clock.advance(30_000);
        assert.equal(await logs.get("epoch"), null, "expired exactly at createdAt + ttl");
        assert.deepEqual(ids(await logs.find({ kind: "k" })), ["date", "iso", "never"]);
        clock.advance(30_001);
        assert.deepEqual(ids(await logs.find()), ["date", "never"]);
        assert.equal(await logs.count(), 2);
        assert.equal(await logs.delete("iso"), false, "an expired document counts as absent");
        await logs.insert({ _id: "epoch", kind: "again", createdAt: clock.nowMs() });
        assert.equal((await logs.get("epoch"))?.kind, "again", "an expired _id can be inserted again");
        if (subject.sweepExpired) {
          clock.advance(60_000);
          assert.ok((await subject.sweepExpired(store)) >= 2);
          assert.deepEqual(ids(await logs.find()), ["never"]);
        }
      }));

    it("pages with the keyset pattern _id < cursor sorted descending", () =>
      withStore(async (store) => {
        const audit = store.collection<Doc>(uniqueName("audit"), { indexes: [{ name: "audit_username", field: "username" }] });
        const all: string[] = [];
        const evenIds = new Set<string>();
        for (let i = 0; i < 45; i++) {
          const id = `${String(1_700_000_000_000 + i * 1000).padStart(15, "0")}-${i % 3}`;
          all.push(id);
          if (i % 2 === 0) evenIds.add(id);
          await audit.insert({ _id: id, username: i % 2 === 0 ? "even" : "odd", seq: i });
        }
        const expectedDesc = [...all].reverse();
        for (const filter of [{}, { username: "even" }] as Filter[]) {
          const seen: string[] = [];
          let cursor: string | undefined;
          for (let page = 0; page < 20; page++) {
            const rows = await audit.find({ ...filter, ...(cursor ? { _id: { $lt: cursor } } : {}) }, { sort: { field: "_id", direction: -1 }, limit: 10 });
            seen.push(...ids(rows));
            if (rows.length < 10) break;
            cursor = rows[rows.length - 1]._id;
          }
          const wanted = expectedDesc.filter((id) => !("username" in filter) || evenIds.has(id));
          assert.deepEqual(seen, wanted, JSON.stringify(filter));
        }
      }));

    it("keeps indexes consistent under concurrent writes", () =>
      withStore(async (store) => {
        const items = store.collection<Item>(uniqueName("concurrent"), indexedSpec);
        const groups = ["g1", "g2", "g3", "g4"];
        const writes: Promise<unknown>[] = [];
        for (let round = 0; round < 8; round++) {
          for (let n = 0; n < 12; n++) {
            const group = groups[(round * 7 + n) % groups.length];
            writes.push(items.put({ _id: `d${n}`, group, size: round * 100 + n }));
          }
          writes.push(items.delete(`d${round}`));
        }
        await Promise.all(writes);
        const all = await items.find();
        for (const group of groups) {
          const expected = ids(all.filter((d) => d.group === group));
          assert.deepEqual(ids(await items.find({ group })), expected, `index for ${group}`);
          assert.equal(await items.count({ group }), expected.length);
        }
        assert.deepEqual(
          ids(await items.find({}, { sort: { field: "size", direction: 1 } })),
          ids([...all].sort((a, b) => (a.size as number) - (b.size as number))),
        );
      }));

    it("rejects concurrent inserts of one unique value but one", () =>
      withStore(async (store) => {
        const users = store.collection<Doc>(uniqueName("race"), { indexes: [{ name: "race_username", field: "username", unique: true }] });
        const results = await Promise.allSettled(Array.from({ length: 10 }, (_, i) => users.insert({ _id: `r${i}`, username: "same" })));
        assert.equal(results.filter((r) => r.status === "fulfilled").length, 1);
        for (const r of results) if (r.status === "rejected") assert.ok(r.reason instanceof DuplicateKeyError);
        assert.equal(await users.count({ username: "same" }), 1);
      }));

    it("accepts exactly one of many concurrent inserts of one _id", () =>
      withStore(async (store) => {
        const items = store.collection<Item>(uniqueName("idrace"), indexedSpec);
        const results = await Promise.allSettled(Array.from({ length: 10 }, (_, i) => items.insert({ _id: "same", name: `n${i}`, group: "g" })));
        const winners = results.flatMap((r, i) => (r.status === "fulfilled" ? [i] : []));
        assert.equal(winners.length, 1);
        for (const r of results) if (r.status === "rejected") assert.ok(r.reason instanceof DuplicateKeyError);
        assert.equal((await items.get("same"))?.name, `n${winners[0]}`);
        assert.deepEqual(ids(await items.find({ group: "g" })), ["same"]);
      }));

    it("rejects collection names that some adapter could not hold", () =>
      withStore(async (store) => {
        for (const bad of ["", "1abc", "has-hyphen", "has space", "x".repeat(51), "doc$"]) {
          assert.throws(() => store.collection(bad), AssertionError, JSON.stringify(bad));
        }
      }));

    it("returns the same collection for the same name", () =>
      withStore(async (store) => {
        const collectionName = uniqueName("same");
        const a = store.collection<Doc>(collectionName, { indexes: [{ name: `${collectionName}_x`, field: "x" }] });
        await a.insert({ _id: "1", x: 1 });
        const b = store.collection<Doc>(collectionName);
        assert.equal((await b.get("1"))?.x, 1);
      }));

    it("snapshot: sees every collection as it was when taken, whatever is written meanwhile", () =>
      withStore(async (store, clock) => {
        const [first, second, empty] = [uniqueName("snapa"), uniqueName("snapb"), uniqueName("snape")];
        const a = store.collection<Item>(first, indexedSpec);
        const b = store.collection<Doc>(second, { ttl: { name: `${second}_ttl`, field: "at", seconds: 60 } });
        for (const doc of fixtures) await a.insert(doc);
        await b.insert({ _id: "old", at: new Date(clock.nowMs() - 120_000).toISOString() });
        await b.insert({ _id: "live", at: new Date(clock.nowMs()).toISOString() });
        await store.collection<Doc>(empty).count();
        const snapshot = await store.snapshot();
        try {
          await a.insert({ _id: "z9", name: "after" });
          await a.delete("a1");
          await a.put({ _id: "a2", name: "changed" });
          await b.deleteMany();
          const names = (await snapshot.collections()).filter((name) => [first, second, empty].includes(name));
          assert.deepEqual(names, [first, second, empty].sort());
          const read = async (name: string, batchMax: number) => {
            const docs: Doc[] = [];
            for await (const batch of snapshot.documents(name, batchMax)) {
              assert.ok(batch.length <= batchMax);
              docs.push(...batch);
            }
            return docs;
          };
          const docsOfA = await read(first, 4);
          assert.deepEqual(ids(docsOfA), ids(fixtures).sort());
          assert.deepEqual(
            docsOfA.find((d) => d._id === "a2"),
            fixtures.find((d) => d._id === "a2"),
          );
          assert.deepEqual(ids(await read(second, 10)), ["live"], "expired documents are not part of a snapshot");
          assert.deepEqual(await read(empty, 10), []);
          assert.deepEqual(await read(uniqueName("absent"), 10), []);
        } finally {
          await snapshot.release();
        }
        assert.equal(await a.count(), fixtures.length);
      }));

    it("importCollections replaces the named collections, keeps their indexes and leaves the others", () =>
      withStore(async (store) => {
        const [target, emptied, untouched] = [uniqueName("impa"), uniqueName("impb"), uniqueName("impc")];
        const a = store.collection<Item>(target, indexedSpec);
        await a.insert({ _id: "gone", name: "alpha", group: "g1" });
        await store.collection<Doc>(emptied).insert({ _id: "x" });
        await store.collection<Doc>(untouched).insert({ _id: "kept" });
        async function* batches() {
          yield { collection: target, documents: fixtures.slice(0, 4) };
          yield { collection: emptied, documents: [] };
          yield { collection: target, documents: fixtures.slice(4) };
        }
        const counts = await store.importCollections(batches());
        assert.deepEqual(
          [...counts.entries()].sort(),
          [
            [emptied, 0],
            [target, fixtures.length],
          ].sort(),
        );
        assert.deepEqual(ids(await a.find()), ids(fixtures).sort());
        assert.deepEqual(ids(await a.find({ name: "alpha" })), ["a1", "b3"], "the index holds the imported documents only");
        assert.deepEqual(ids(await a.find({ group: "g1" })), ["a1", "a2", "b1"]);
        assert.equal(await store.collection<Doc>(emptied).count(), 0);
        assert.deepEqual(ids(await store.collection<Doc>(untouched).find()), ["kept"]);
        await assert.rejects(a.insert({ _id: "a1", name: "again" }), DuplicateKeyError);
      }));

    it("keeps data across close and reopen, and indexes added later cover old documents", async () => {
      const subject = await createSubject();
      const clock = new FakeClock(startMs());
      const collectionName = uniqueName("persist");
      try {
        const first = await subject.open(clock);
        try {
          const items = first.collection<Item>(collectionName);
          for (const doc of fixtures) await items.insert(doc);
          await items.delete("a2");
        } finally {
          await first.close();
        }
        const second = await subject.open(clock);
        try {
          const items = second.collection<Item>(collectionName, indexedSpec);
          assert.equal(await items.count(), fixtures.length - 1);
          assert.deepEqual(ids(await items.find({ group: "g1" })), ["a1", "b1"]);
          assert.deepEqual(ids(await items.find({ size: { $gte: 10 } }, { sort: { field: "size", direction: -1 } })), ["b1", "a3", "a1"]);
        } finally {
          await second.close();
        }
      } finally {
        await subject.dispose();
      }
    });
  });
}
