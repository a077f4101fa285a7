/**
 * The conditional-write part of the document store contract (ARCHITECTURE.md, "A fenced write is
 * conditional"): revisions, compare-and-set and compare-and-delete, run by every adapter through
 * runDocumentStoreContract.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { describe, it } from "node:test";
import type { Clock } from "../../src/shared/clock.js";
import { DuplicateKeyError, RevisionConflictError, type Doc, type DocumentStore } from "../../src/store/ports.js";
import { FakeClock } from "../support/fake-clock.js";

/** What the contract needs of a subject (see DocumentStoreSubject). */
export interface RevisionSubject {
  open(clock: Clock): Promise<DocumentStore>;
  dispose(): Promise<void>;
}

const uniqueName = (base: string) => `${base}_${randomBytes(4).toString("hex")}`;

function isConflict(collection: string, id: string, expectedRev: string) {
  return (error: unknown) => {
    assert.ok(error instanceof RevisionConflictError, String(error));
    assert.equal(error.code, "REVISION_CONFLICT");
    assert.equal(error.collection, collection);
    assert.equal(error.id, id);
    assert.equal(error.expectedRev, expectedRev);
    return true;
  };
}

/** Runs the revision contract against the subjects `createSubject` makes. */
export function runRevisionContract(name: string, createSubject: () => Promise<RevisionSubject>): void {
  async function withStore(body: (store: DocumentStore, clock: FakeClock) => Promise<void>): Promise<void> {
    const subject = await createSubject();
    const clock = new FakeClock(Date.now());
    let store: DocumentStore | undefined;
    try {
      store = await subject.open(clock);
      await body(store, clock);
    } finally {
      await store?.close();
      await subject.dispose();
    }
  }

  describe(`document store contract, conditional writes: ${name}`, () => {
    it("every write answers a new revision, which the revisioned reads return; plain reads show no revision", () =>
      withStore(async (store) => {
        const items = store.collection<Doc>(uniqueName("rev"), { indexes: [{ name: uniqueName("rev_group"), field: "group" }] });
        const inserted = await items.insert({ _id: "x", group: "g", n: 1 });
        assert.equal(typeof inserted, "string");
        assert.deepEqual(await items.getRevisioned("x"), { doc: { _id: "x", group: "g", n: 1 }, rev: inserted });
        const replaced = await items.put({ _id: "x", group: "g", n: 2 });
        assert.notEqual(replaced, inserted);
        const other = await items.put({ _id: "y", group: "g", n: 3 });
        assert.deepEqual(await items.findRevisioned({ group: "g" }), [
          { doc: { _id: "x", group: "g", n: 2 }, rev: replaced },
          { doc: { _id: "y", group: "g", n: 3 }, rev: other },
        ]);
        assert.deepEqual(await items.findRevisioned({ group: "g" }, { sort: { field: "n", direction: -1 }, limit: 1 }), [
          { doc: { _id: "y", group: "g", n: 3 }, rev: other },
        ]);
        assert.deepEqual(await items.get("x"), { _id: "x", group: "g", n: 2 });
        assert.deepEqual(await items.find({ group: "g" }), [
          { _id: "x", group: "g", n: 2 },
          { _id: "y", group: "g", n: 3 },
        ]);
        assert.equal(await items.getRevisioned("absent"), null);
      }));

    it("putIf replaces only at the expected revision; a stale one fails and changes nothing", () =>
      withStore(async (store) => {
        const collection = uniqueName("cas");
        const items = store.collection<Doc>(collection);
        const first = await items.insert({ _id: "r", state: "RUNNING" });
        const second = await items.putIf({ _id: "r", state: "STOPPED" }, first);
        assert.notEqual(second, first);
        await assert.rejects(items.putIf({ _id: "r", state: "RUNNING" }, first), isConflict(collection, "r", first));
        assert.deepEqual(await items.getRevisioned("r"), { doc: { _id: "r", state: "STOPPED" }, rev: second });
        await assert.rejects(items.putIf({ _id: "missing", state: "RUNNING" }, first), isConflict(collection, "missing", first));
        assert.equal(await items.get("missing"), null, "putIf never creates a document");
      }));

    it("of many writers holding one revision, exactly one writes", () =>
      withStore(async (store) => {
        const items = store.collection<Doc>(uniqueName("race"));
        const rev = await items.insert({ _id: "k", by: "none" });
        const results = await Promise.allSettled(Array.from({ length: 12 }, (_, i) => items.putIf({ _id: "k", by: `w${i}` }, rev)));
        const winners = results.flatMap((r, i) => (r.status === "fulfilled" ? [i] : []));
        assert.equal(winners.length, 1, JSON.stringify(results.map((r) => r.status)));
        for (const r of results) if (r.status === "rejected") assert.ok(r.reason instanceof RevisionConflictError, String(r.reason));
        const stored = await items.getRevisioned("k");
        assert.equal(stored?.doc.by, `w${winners[0]}`);
        assert.equal(stored?.rev, (results[winners[0]] as PromiseFulfilledResult<string>).value);
      }));

    it("deleteIf deletes only at the expected revision", () =>
      withStore(async (store) => {
        const collection = uniqueName("cad");
        const items = store.collection<Doc>(collection);
        const first = await items.insert({ _id: "d", state: "STOPPED" });
        const second = await items.put({ _id: "d", state: "STOPPED", again: true });
        await assert.rejects(items.deleteIf("d", first), isConflict(collection, "d", first));
        assert.equal((await items.get("d"))?.again, true);
        await items.deleteIf("d", second);
        assert.equal(await items.get("d"), null);
        await assert.rejects(items.deleteIf("d", second), isConflict(collection, "d", second));
      }));

    it("a document deleted and inserted again never matches a revision of its earlier life", () =>
      withStore(async (store) => {
        const collection = uniqueName("aba");
        const items = store.collection<Doc>(collection);
        const old = await items.insert({ _id: "g", name: "first life" });
        await items.delete("g");
        const fresh = await items.insert({ _id: "g", name: "second life" });
        assert.notEqual(fresh, old);
        await assert.rejects(items.putIf({ _id: "g", name: "stale writer" }, old), isConflict(collection, "g", old));
        await assert.rejects(items.deleteIf("g", old), isConflict(collection, "g", old));
        assert.equal((await items.get("g"))?.name, "second life");
      }));

    it("an expired document cannot be written or deleted conditionally", () =>
      withStore(async (store, clock) => {
        const collection = uniqueName("ttlcas");
        const items = store.collection<Doc>(collection, { ttl: { name: `${collection}_ttl`, field: "at", seconds: 60 } });
        const rev = await items.insert({ _id: "e", at: new Date(clock.nowMs()).toISOString() });
        clock.advance(61_000);
        await assert.rejects(items.putIf({ _id: "e", at: new Date(clock.nowMs()).toISOString() }, rev), isConflict(collection, "e", rev));
        await assert.rejects(items.deleteIf("e", rev), isConflict(collection, "e", rev));
        assert.equal(await items.getRevisioned("e"), null);
      }));

    it("putIf keeps unique indexes", () =>
      withStore(async (store) => {
        const collection = uniqueName("uniqcas");
        const users = store.collection<Doc>(collection, { indexes: [{ name: `${collection}_name`, field: "name", unique: true }] });
        await users.insert({ _id: "u1", name: "ada" });
        const rev = await users.insert({ _id: "u2", name: "bob" });
        await assert.rejects(users.putIf({ _id: "u2", name: "ada" }, rev), DuplicateKeyError);
        assert.deepEqual(await users.getRevisioned("u2"), { doc: { _id: "u2", name: "bob" }, rev });
      }));

    it("an import gives every document a new revision", () =>
      withStore(async (store) => {
        const collection = uniqueName("imprev");
        const items = store.collection<Doc>(collection);
        const rev = await items.insert({ _id: "i", v: 1 });
        async function* batches() {
          yield { collection, documents: [{ _id: "i", v: 1 }] };
        }
        await store.importCollections(batches());
        const imported = await items.getRevisioned("i");
        assert.deepEqual(imported?.doc, { _id: "i", v: 1 });
        assert.notEqual(imported?.rev, rev);
        await assert.rejects(items.putIf({ _id: "i", v: 2 }, rev), RevisionConflictError);
        await items.putIf({ _id: "i", v: 2 }, imported!.rev);
      }));

    it("revisions are durable: a reopened store holds the same revision", async () => {
      const subject = await createSubject();
      const clock = new FakeClock(Date.now());
      const collection = uniqueName("revpersist");
      try {
        const first = await subject.open(clock);
        let rev: string;
        try {
          rev = await first.collection<Doc>(collection).insert({ _id: "p", v: 1 });
        } finally {
          await first.close();
        }
        const second = await subject.open(clock);
        try {
          const items = second.collection<Doc>(collection);
          assert.equal((await items.getRevisioned("p"))?.rev, rev);
          await items.putIf({ _id: "p", v: 2 }, rev);
          assert.equal((await items.get("p"))?.v, 2);
        } finally {
          await second.close();
        }
      } finally {
        await subject.dispose();
      }
    });
  });
}
