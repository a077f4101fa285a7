/**
 * The key-value store contract: one suite for every KvStore adapter (memory, Redis). A subject
 * says how time passes for it: the memory store advances a manual clock; a real Redis expires
 * keys on its own clock, so its subject waits the (short) time out.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { describe, it } from "node:test";
import { parseSequencedEntry, type KvStore } from "../../src/store/ports.js";

/** What a runner provides for one test. */
export interface KvStoreSubject {
  store: KvStore;
  /** Lets `ms` pass for the store's expiry clock. */
  advance(ms: number): Promise<void>;
  /** Closes the store and releases what the subject holds. */
  dispose(): Promise<void>;
}

/** Short enough to wait out against a real server, long enough to outlive a round trip. */
const shortTtlMs = 120;
const deliveryTimeoutMs = 2_000;

/** Collects published messages and waits for a count of them, bounded by a timeout. */
class Inbox {
  readonly messages: string[] = [];
  private waiter: { count: number; resolve: () => void } | undefined;

  readonly handler = (message: string) => {
    this.messages.push(message);
    if (this.waiter && this.messages.length >= this.waiter.count) this.waiter.resolve();
  };

  async waitFor(count: number): Promise<string[]> {
    if (this.messages.length < count) {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`got ${this.messages.length} of ${count} messages`)), deliveryTimeoutMs);
        this.waiter = {
          count,
          resolve: () => {
            clearTimeout(timer);
            resolve();
          },
        };
      });
    }
    return this.messages;
  }
}

/** Runs the key-value store contract against the subjects `createSubject` makes. */
export function runKvStoreContract(name: string, createSubject: () => Promise<KvStoreSubject>): void {
  async function withStore(body: (store: KvStore, subject: KvStoreSubject, ns: string) => Promise<void>): Promise<void> {
    const subject = await createSubject();
    try {
      await body(subject.store, subject, `t${randomBytes(4).toString("hex")}:`);
    } finally {
      await subject.dispose();
    }
  }

  describe(`key-value store contract: ${name}`, () => {
    it("answers ping", () => withStore((store) => store.ping()));

    it("gets, sets, overwrites and deletes", () =>
      withStore(async (store, _subject, ns) => {
        assert.equal(await store.get(`${ns}a`), null);
        await store.set(`${ns}a`, "1");
        assert.equal(await store.get(`${ns}a`), "1");
        await store.set(`${ns}a`, "two words ✓");
        assert.equal(await store.get(`${ns}a`), "two words ✓");
        await store.set(`${ns}empty`, "");
        assert.equal(await store.get(`${ns}empty`), "");
        assert.equal(await store.delete(`${ns}a`), true);
        assert.equal(await store.delete(`${ns}a`), false);
        assert.equal(await store.get(`${ns}a`), null);
      }));

    it("expires keys written with ttlMs and reports the remaining time", () =>
      withStore(async (store, subject, ns) => {
        await store.set(`${ns}lease`, "holder", { ttlMs: shortTtlMs });
        const remaining = await store.ttlMs(`${ns}lease`);
        assert.ok(remaining !== null && remaining > 0 && remaining <= shortTtlMs, `remaining ${remaining}`);
        await store.set(`${ns}forever`, "x");
        assert.equal(await store.ttlMs(`${ns}forever`), null);
        assert.equal(await store.ttlMs(`${ns}absent`), null);
        await subject.advance(shortTtlMs + 30);
        assert.equal(await store.get(`${ns}lease`), null);
        assert.equal(await store.ttlMs(`${ns}lease`), null);
        assert.equal(await store.get(`${ns}forever`), "x");
      }));

    it("set without ttlMs clears an earlier expiry", () =>
      withStore(async (store, subject, ns) => {
        await store.set(`${ns}k`, "1", { ttlMs: shortTtlMs });
        await store.set(`${ns}k`, "2");
        await subject.advance(shortTtlMs + 30);
        assert.equal(await store.get(`${ns}k`), "2");
      }));

    it("setIfAbsent writes only when the key is absent or expired", () =>
      withStore(async (store, subject, ns) => {
        assert.equal(await store.setIfAbsent(`${ns}k`, "first", { ttlMs: shortTtlMs }), true);
        assert.equal(await store.setIfAbsent(`${ns}k`, "second"), false);
        assert.equal(await store.get(`${ns}k`), "first");
        await subject.advance(shortTtlMs + 30);
        assert.equal(await store.setIfAbsent(`${ns}k`, "third"), true);
        assert.equal(await store.get(`${ns}k`), "third");
        assert.equal(await store.ttlMs(`${ns}k`), null);
      }));

    it("lets exactly one of many concurrent setIfAbsent calls win", () =>
      withStore(async (store, _subject, ns) => {
        const results = await Promise.all(Array.from({ length: 20 }, (_, i) => store.setIfAbsent(`${ns}race`, `c${i}`, { ttlMs: 10_000 })));
        assert.equal(results.filter(Boolean).length, 1);
        assert.equal(await store.get(`${ns}race`), `c${results.indexOf(true)}`);
      }));

    it("compareAndSet replaces only the expected value and applies the new expiry", () =>
      withStore(async (store, subject, ns) => {
        assert.equal(await store.compareAndSet(`${ns}k`, "a", "b"), false, "absent key");
        await store.set(`${ns}k`, "a");
        assert.equal(await store.compareAndSet(`${ns}k`, "x", "b"), false);
        assert.equal(await store.get(`${ns}k`), "a");
        assert.equal(await store.compareAndSet(`${ns}k`, "a", "b", { ttlMs: shortTtlMs }), true);
        assert.equal(await store.get(`${ns}k`), "b");
        const remaining = await store.ttlMs(`${ns}k`);
        assert.ok(remaining !== null && remaining <= shortTtlMs);
        assert.equal(await store.compareAndSet(`${ns}k`, "b", "c"), true);
        assert.equal(await store.ttlMs(`${ns}k`), null, "no ttlMs: no expiry, like set");
        await store.set(`${ns}short`, "v", { ttlMs: shortTtlMs });
        await subject.advance(shortTtlMs + 30);
        assert.equal(await store.compareAndSet(`${ns}short`, "v", "w"), false, "an expired key is absent");
      }));

    it("compareAndDelete deletes only the expected value", () =>
      withStore(async (store, _subject, ns) => {
        await store.set(`${ns}k`, "mine");
        assert.equal(await store.compareAndDelete(`${ns}k`, "theirs"), false);
        assert.equal(await store.get(`${ns}k`), "mine");
        assert.equal(await store.compareAndDelete(`${ns}k`, "mine"), true);
        assert.equal(await store.get(`${ns}k`), null);
        assert.equal(await store.compareAndDelete(`${ns}k`, "mine"), false);
      }));

    it("increments atomically, starting at 1, keeping the expiry", () =>
      withStore(async (store, _subject, ns) => {
        assert.equal(await store.increment(`${ns}n`), 1);
        assert.equal(await store.increment(`${ns}n`), 2);
        const values = await Promise.all(Array.from({ length: 30 }, () => store.increment(`${ns}n`)));
        assert.deepEqual(
          [...values].sort((a, b) => a - b),
          Array.from({ length: 30 }, (_, i) => i + 3),
        );
        assert.equal(await store.get(`${ns}n`), "32");
        await store.set(`${ns}t`, "5", { ttlMs: 60_000 });
        assert.equal(await store.increment(`${ns}t`), 6);
        assert.ok((await store.ttlMs(`${ns}t`)) !== null);
        await store.set(`${ns}text`, "abc");
        await assert.rejects(store.increment(`${ns}text`));
      }));

    it("take returns the value once, even to concurrent callers", () =>
      withStore(async (store, _subject, ns) => {
        await store.set(`${ns}ticket`, "t-1", { ttlMs: 10_000 });
        const results = await Promise.all(Array.from({ length: 10 }, () => store.take(`${ns}ticket`)));
        assert.deepEqual(
          results.filter((r) => r !== null),
          ["t-1"],
        );
        assert.equal(await store.get(`${ns}ticket`), null);
        assert.equal(await store.take(`${ns}ticket`), null);
      }));

    it("lists live keys by literal prefix", () =>
      withStore(async (store, subject, ns) => {
        await store.set(`${ns}a:2`, "x");
        await store.set(`${ns}a:1`, "x");
        await store.set(`${ns}b:1`, "x");
        await store.set(`${ns}a*[x]?\\:1`, "x");
        await store.set(`${ns}a:gone`, "x", { ttlMs: shortTtlMs });
        await subject.advance(shortTtlMs + 30);
        assert.deepEqual(await store.keys(`${ns}a:`), [`${ns}a:1`, `${ns}a:2`]);
        assert.deepEqual(await store.keys(`${ns}a*[x]?\\`), [`${ns}a*[x]?\\:1`]);
        assert.deepEqual(await store.keys(`${ns}zzz`), []);
        assert.equal((await store.keys(ns)).length, 4);
      }));

    it("lists many keys (several SCAN rounds)", () =>
      withStore(async (store, _subject, ns) => {
        await Promise.all(Array.from({ length: 1200 }, (_, i) => store.set(`${ns}k:${String(i).padStart(4, "0")}`, "v")));
        const keys = await store.keys(`${ns}k:`);
        assert.equal(keys.length, 1200);
        assert.equal(new Set(keys).size, 1200);
      }));

    it("delivers published messages in order to every subscriber of the channel", () =>
      withStore(async (store, _subject, ns) => {
        const first = new Inbox();
        const second = new Inbox();
        const other = new Inbox();
        const unsubscribeFirst = await store.subscribe(`${ns}events`, first.handler);
        await store.subscribe(`${ns}events`, second.handler);
        await store.subscribe(`${ns}other`, other.handler);
        for (let i = 0; i < 5; i++) await store.publish(`${ns}events`, `m${i}`);
        assert.deepEqual(await first.waitFor(5), ["m0", "m1", "m2", "m3", "m4"]);
        assert.deepEqual(await second.waitFor(5), ["m0", "m1", "m2", "m3", "m4"]);
        await unsubscribeFirst();
        await store.publish(`${ns}events`, "after");
        await store.publish(`${ns}other`, "elsewhere");
        assert.deepEqual(await second.waitFor(6), ["m0", "m1", "m2", "m3", "m4", "after"]);
        assert.deepEqual(await other.waitFor(1), ["elsewhere"]);
        assert.deepEqual(first.messages, ["m0", "m1", "m2", "m3", "m4"], "no delivery after unsubscribe");
      }));

    it("isolates a throwing subscriber", () =>
      withStore(async (store, _subject, ns) => {
        const inbox = new Inbox();
        await store.subscribe(`${ns}c`, () => {
          throw new Error("subscriber bug");
        });
        await store.subscribe(`${ns}c`, inbox.handler);
        await store.publish(`${ns}c`, "one");
        await store.publish(`${ns}c`, "two");
        assert.deepEqual(await inbox.waitFor(2), ["one", "two"]);
      }));

    it("appendSequenced numbers, keeps and announces entries in one order; readSequenced reads the kept tail", () =>
      withStore(async (store, _subject, ns) => {
        const log = { counterKey: `${ns}seq`, listKey: `${ns}log`, channel: `${ns}journal`, entriesMax: 3 };
        assert.deepEqual(await store.readSequenced(log, 0), { latestSequence: 0, entries: [] });
        const inbox = new Inbox();
        await store.subscribe(log.channel, inbox.handler);
        const sequences = await Promise.all(["a", "b c", "d", "e ✓", "f"].map((value) => store.appendSequenced(log, value)));
        assert.deepEqual(sequences, [1, 2, 3, 4, 5]);
        assert.deepEqual(await inbox.waitFor(5), ["1 a", "2 b c", "3 d", "4 e ✓", "5 f"]);
        assert.deepEqual(parseSequencedEntry("2 b c"), { sequence: 2, value: "b c" });
        assert.equal(parseSequencedEntry("x y"), null);
        assert.equal(parseSequencedEntry("0 y"), null);
        const all = await store.readSequenced(log, 0);
        assert.equal(all.latestSequence, 5);
        assert.deepEqual(all.entries, [
          { sequence: 3, value: "d" },
          { sequence: 4, value: "e ✓" },
          { sequence: 5, value: "f" },
        ]);
        assert.deepEqual((await store.readSequenced(log, 5)).entries, [{ sequence: 5, value: "f" }]);
        assert.deepEqual((await store.readSequenced(log, 6)).entries, []);
      }));

    it("appendSequenced from many concurrent callers never repeats or skips a number", () =>
      withStore(async (store, _subject, ns) => {
        const log = { counterKey: `${ns}seq`, listKey: `${ns}log`, channel: `${ns}journal`, entriesMax: 100 };
        const sequences = await Promise.all(Array.from({ length: 50 }, (_, i) => store.appendSequenced(log, `v${i}`)));
        assert.deepEqual(
          [...sequences].sort((a, b) => a - b),
          Array.from({ length: 50 }, (_, i) => i + 1),
        );
        const { entries } = await store.readSequenced(log, 1);
        assert.deepEqual(
          entries.map((e) => e.sequence),
          Array.from({ length: 50 }, (_, i) => i + 1),
        );
        for (const entry of entries) assert.equal(entry.value, `v${sequences.indexOf(entry.sequence)}`);
      }));

    it("publishing to a channel without subscribers is fine", () =>
      withStore(async (store, _subject, ns) => {
        await store.publish(`${ns}nobody`, "hello");
      }));
  });
}
