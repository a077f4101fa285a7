// The Redis key-value store through Sentinel, on Debian's redis-server and redis-sentinel: a master,
// a replica and three Sentinels. The store connects with a redis-sentinel:// URI, the master is
// killed, the Sentinels promote the replica, and the store follows it: writes fail only as
// STORE_UNAVAILABLE while there is no master, then go on, and what was replicated is still there.
// The contract suite also runs through the Sentinel URI.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Redis } from "ioredis";
import { setTimeout as sleep } from "node:timers/promises";
import { openKvStore } from "../../src/store/open.js";
import { StoreUnavailableError, type KvStore } from "../../src/store/ports.js";
import { RedisKvStore } from "../../src/store/redis/redis-kv-store.js";
import { startRedisSentinel, startRedisServer, type RedisSentinel, type RedisServer } from "../support/redis-server.js";
import { runKvStoreContract } from "./kv-store-contract.js";

const masterName = "cloudmaster";

describe("Redis through Sentinel", { timeout: 180_000 }, () => {
  let master: RedisServer;
  let replica: RedisServer;
  const sentinels: RedisSentinel[] = [];
  let uri = "";

  before(async () => {
    master = await startRedisServer();
    replica = await startRedisServer({ replicaOf: master.port });
    for (let i = 0; i < 3; i++)
      sentinels.push(await startRedisSentinel({ masterName, masterPort: master.port, quorum: 2, downAfterMs: 1_000, failoverTimeoutMs: 3_000 }));
    uri = `redis-sentinel://${sentinels.map((s) => `127.0.0.1:${s.port}`).join(",")}/${masterName}`;
    // The Sentinels know the replica once they asked the master (INFO every 10 s at first): wait for it.
    const probe = new Redis({ port: sentinels[0].port, host: "127.0.0.1", lazyConnect: true });
    await probe.connect();
    try {
      for (const deadline = Date.now() + 30_000; ;) {
        const replicas = (await probe.call("SENTINEL", "REPLICAS", masterName)) as unknown[];
        if (replicas.length >= 1) break;
        if (Date.now() > deadline) throw new Error("the Sentinels never saw the replica");
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    } finally {
      probe.disconnect();
    }
  });
  after(async () => {
    for (const sentinel of sentinels) await sentinel.stop();
    await replica?.stop();
    await master?.stop();
  });

  it("openKvStore picks Redis for a redis-sentinel:// URI and reaches the master", async () => {
    const kv = await openKvStore({ uri });
    try {
      assert.ok(kv instanceof RedisKvStore);
      await kv.set("cloud:v1:test:through-sentinel", "yes");
      const direct = new Redis(master.uri);
      assert.equal(await direct.get("cloud:v1:test:through-sentinel"), "yes", "written on the master");
      direct.disconnect();
    } finally {
      await kv.close();
    }
  });

  describe("contract", () => {
    runKvStoreContract("Redis through Sentinel", async () => {
      const store = await openKvStore({ uri });
      return { store, advance: (ms) => sleep(ms), dispose: () => store.close() };
    });
  });

  it("the master is killed: the replica is promoted and the store follows it; replicated data survives", async () => {
    const kv: KvStore = await openKvStore({ uri });
    try {
      for (let i = 0; i < 20; i++) await kv.increment("cloud:v1:test:acknowledged");
      const direct = new Redis(master.uri);
      assert.equal(Number(await direct.call("WAIT", "1", "5000")), 1, "replicated to the replica");
      direct.disconnect();
      const killedAt = Date.now();
      await master.kill();
      const errors = new Set<string>();
      let failed = 0;
      let value = 0;
      for (const deadline = Date.now() + 60_000; value === 0 && Date.now() < deadline;) {
        value = await kv.increment("cloud:v1:test:acknowledged").catch((err: unknown) => {
          errors.add(err instanceof StoreUnavailableError ? "STORE_UNAVAILABLE" : String(err));
          failed++;
          return 0;
        });
        if (value === 0) await new Promise((resolve) => setTimeout(resolve, 100));
      }
      // An increment that timed out may still have reached the new master: it was not acknowledged,
      // so it may or may not count; the 20 acknowledged ones must.
      assert.ok(value >= 21 && value <= 21 + failed, `every acknowledged increment survived the failover (value ${value}, ${failed} unanswered)`);
      assert.deepEqual(
        [...errors].filter((e) => e !== "STORE_UNAVAILABLE"),
        [],
        "only STORE_UNAVAILABLE while there was no master",
      );
      const promoted = new Redis(replica.uri);
      assert.equal(((await promoted.call("ROLE")) as unknown[])[0], "master", "the replica is the master now");
      promoted.disconnect();
      console.log(`writes went on ${Date.now() - killedAt} ms after the master was killed`);
    } finally {
      await kv.close();
    }
  });
});
