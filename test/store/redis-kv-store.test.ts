// Runs the key-value contract against the Redis adapter on a real redis-server started here.
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { openKvStore } from "../../src/store/open.js";
import { RedisKvStore } from "../../src/store/redis/redis-kv-store.js";
import { setTimeout as sleep } from "node:timers/promises";
import { openRedisKvStore } from "../../src/store/redis/redis-kv-store.js";
import { startRedisServer, type RedisServer } from "../support/redis-server.js";
import { runKvStoreContract } from "./kv-store-contract.js";

let server: RedisServer | undefined;

before(async () => {
  server = await startRedisServer();
});

after(async () => {
  await server?.stop();
});

// Redis expires keys on its own clock, so the subject waits the short TTLs out.
runKvStoreContract("Redis", async () => {
  const store = await openRedisKvStore({ uri: server!.uri });
  return {
    store,
    advance: (ms) => sleep(ms),
    dispose: () => store.close(),
  };
});

it("openKvStore picks Redis for redis:// URIs", async () => {
  const kv = await openKvStore({ uri: server!.uri });
  try {
    assert.ok(kv instanceof RedisKvStore);
    await kv.ping();
  } finally {
    await kv.close();
  }
});

it("openKvStore fails fast when Redis is unreachable", async () => {
  await assert.rejects(openKvStore({ uri: "redis://127.0.0.1:1" }));
});
