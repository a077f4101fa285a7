// Runs the key-value contract against the Redis adapter on a real redis-server started here.
import { after, before } from "node:test";
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
