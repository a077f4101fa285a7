// The record lock tells its holder when it is lost: the AbortSignal handed to the section fires when
// a renewal finds the key gone or taken (a flushed Redis, an expired key taken by another
// controller) or when no renewal was confirmed within the TTL (a frozen or unreachable store), and a
// group write whose lock fired writes nothing (503 LOCK_LOST). Over the in-memory store on a fake
// clock, and over a real Redis.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { KvMutex, LockLostError, mutexKey } from "../../src/coordination/kv-mutex.js";
import { GroupService } from "../../src/domain/groups/group-service.js";
import { systemClock } from "../../src/shared/clock.js";
import { MemoryKvStore } from "../../src/store/memory/memory-kv-store.js";
import type { KvStore } from "../../src/store/ports.js";
import { openRedisKvStore } from "../../src/store/redis/redis-kv-store.js";
import { FakeClock } from "../support/fake-clock.js";
import { startRedisServer, type RedisServer } from "../support/redis-server.js";
import { openStoreFixture, type StoreFixture } from "../support/store-fixture.js";

const ttlMs = 3_000;

/** Starts `mutex.run(name, …)` and hands out the section's signal; `finish` ends the section. */
async function holdLock(mutex: KvMutex, name: string) {
  let finish!: () => void;
  const done = new Promise<void>((resolve) => (finish = resolve));
  let signal!: AbortSignal;
  const entered = new Promise<void>((resolve) => {
    void mutex.run(name, async (s) => {
      signal = s;
      resolve();
      await done;
    });
  });
  await entered;
  return { signal, finish };
}

describe("record lock signal, in memory on a fake clock", () => {
  it("stays quiet while renewals succeed, for many TTLs", async () => {
    const clock = new FakeClock(1_000_000);
    const kv = new MemoryKvStore({ clock });
    const held = await holdLock(new KvMutex(kv, { ttlMs, clock }), "group:calm");
    for (let i = 0; i < 20; i++) await clock.advanceAsync(ttlMs / 2);
    assert.equal(held.signal.aborted, false);
    held.finish();
  });

  it("fires with LOCK_LOST once a renewal finds the key gone (a flushed store)", async () => {
    const clock = new FakeClock(1_000_000);
    const kv = new MemoryKvStore({ clock });
    const held = await holdLock(new KvMutex(kv, { ttlMs, clock }), "group:flushed");
    await kv.delete(mutexKey("group:flushed"));
    await clock.advanceAsync(ttlMs / 3 + 1);
    assert.equal(held.signal.aborted, true);
    assert.ok(held.signal.reason instanceof LockLostError);
    assert.equal(held.signal.reason.status, 503);
    assert.equal(held.signal.reason.code, "LOCK_LOST");
    held.finish();
  });

  it("fires before the key can have expired when renewals hang (a frozen store)", async () => {
    const clock = new FakeClock(1_000_000);
    const memory = new MemoryKvStore({ clock });
    let frozen = false;
    const kv: Pick<KvStore, "setIfAbsent" | "compareAndSet" | "compareAndDelete"> = {
      setIfAbsent: (key, value, options) => memory.setIfAbsent(key, value, options),
      compareAndSet: (key, expected, value, options) => (frozen ? new Promise(() => undefined) : memory.compareAndSet(key, expected, value, options)),
      compareAndDelete: (key, expected) => memory.compareAndDelete(key, expected),
    };
    const held = await holdLock(new KvMutex(kv, { ttlMs, clock }), "group:frozen");
    await clock.advanceAsync(ttlMs / 3 + 1); // one confirmed renewal
    const lastConfirmedMs = clock.nowMs() - 1;
    frozen = true;
    let firedAtMs: number | null = null;
    held.signal.addEventListener("abort", () => (firedAtMs = clock.nowMs()));
    for (let elapsed = 0; elapsed < 2 * ttlMs && firedAtMs === null; elapsed += 100) await clock.advanceAsync(100);
    assert.notEqual(firedAtMs, null, "the signal fired");
    assert.ok(firedAtMs! <= lastConfirmedMs + ttlMs, `fired at +${firedAtMs! - lastConfirmedMs} ms, before the key's TTL ran out`);
    assert.ok(held.signal.reason instanceof LockLostError);
    held.finish();
  });
});

describe("record lock signal over Redis", () => {
  let redis: RedisServer;
  let kv: KvStore;
  let fixture: StoreFixture;

  before(async () => {
    redis = await startRedisServer();
    kv = await openRedisKvStore({ uri: redis.uri });
    fixture = await openStoreFixture("lock-signal-");
  });
  after(async () => {
    await kv?.close();
    await redis?.stop();
    await fixture?.close();
  });

  it("FLUSHALL under a holder: its signal fires and its group write is refused with 503 LOCK_LOST, nothing written", async () => {
    const mutex = new KvMutex(kv, { ttlMs: 600 });
    const noAggregates = { aggregatesForGroup: async () => ({ runningInstances: 0, totalPlayers: 0 }), aggregatesByGroup: async () => new Map() };
    // The group lock as the controller wires it, with the holder held up once after taking it.
    let stall: Promise<void> | null = null;
    const stalledLock = {
      run: <T>(name: string, fn: (signal: AbortSignal) => Promise<T>) =>
        mutex.run(`group:${name}`, async (signal) => {
          if (stall) await stall;
          return fn(signal);
        }),
    };
    const groups = new GroupService(fixture.store, fixture.events, systemClock, noAggregates, stalledLock);
    await groups.create({ name: "flushed", platform: "simulated", maxInstances: 5 });
    let release!: () => void;
    stall = new Promise<void>((resolve) => (release = resolve));
    const patch = groups.update("flushed", { maxInstances: 9 });
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.ok((await kv.keys(mutexKey("group:flushed"))).length === 1, "the PATCH holds the group's lock");
    await (kv as unknown as { client: { flushall(): Promise<string> } }).client.flushall();
    await new Promise((resolve) => setTimeout(resolve, 400)); // two renewal intervals (200 ms each)
    stall = null;
    release();
    await assert.rejects(patch, (err: unknown) => err instanceof LockLostError && err.code === "LOCK_LOST" && err.status === 503);
    assert.equal((await groups.getDoc("flushed"))?.maxInstances, 5, "the holder wrote nothing after its lock was lost");
    assert.equal((await groups.update("flushed", { maxInstances: 6 })).after.maxInstances, 6, "a fresh lock works");
  });
});
