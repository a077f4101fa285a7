// Two controller processes with one controller id (a copied raft.dataDir) on the production profile,
// with real PostgreSQL and Redis: the second is refused at start (exit status 1, the reason in its
// log) and the first keeps running; the same controller restarted after kill -9 waits while its
// old presence entry is there, then starts; after a graceful stop it starts without waiting.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { cpSync } from "node:fs";
import { join } from "node:path";
import { controllerPresenceKey } from "../../src/coordination/keys.js";
import { parsePresence } from "../../src/coordination/controller-presence.js";
import { openRedisKvStore } from "../../src/store/redis/redis-kv-store.js";
import type { KvStore } from "../../src/store/ports.js";
import { ClusterHarness, type ClusterMemberProcess } from "./cluster-harness.js";
import { startPostgresServer, type PostgresServer } from "../support/postgres-server.js";
import { startRedisServer, type RedisServer } from "../support/redis-server.js";

/** The lease TTL, and so the presence TTL: 2 × scheduler.evaluationIntervalSeconds. */
const evaluationIntervalSeconds = 1;

describe("two controller processes with one controller id", { timeout: 600_000 }, () => {
  let postgres: PostgresServer;
  let redis: RedisServer;
  let kv: KvStore;
  let harness: ClusterHarness;
  let a: ClusterMemberProcess;
  let controllerId: string;

  const presenceNonce = async () => parsePresence((await kv.get(controllerPresenceKey(controllerId))) ?? "")?.nonce ?? null;

  before(async () => {
    [postgres, redis] = await Promise.all([startPostgresServer(), startRedisServer()]);
    kv = await openRedisKvStore({ uri: redis.uri });
    harness = new ClusterHarness({
      runtime: { profile: "production" },
      database: { uri: postgres.uri },
      kvstore: { uri: redis.uri },
      scheduler: { evaluationIntervalSeconds },
    });
    a = await harness.start("a");
    controllerId = (await a.call("GET", "/api/v1/cluster")).json.nodeId;
  });
  after(async () => {
    await harness?.close();
    await kv?.close();
    await redis?.stop();
    await postgres?.stop();
  });

  it("the second process is refused with the id in its log and exits 1; the first keeps running", async () => {
    const nonceBefore = await presenceNonce();
    assert.ok(nonceBefore, "the running controller has a presence entry");
    const copy = await harness.prepare("copy");
    cpSync(join(a.dataDir, "raft"), join(copy.dataDir, "raft"), { recursive: true });
    await assert.rejects(harness.launch(copy), (err: Error) => {
      assert.match(err.message, /exited with code 1/);
      assert.match(err.message, new RegExp(`Another controller process is running with controller id ${controllerId}`));
      assert.match(err.message, /"level":"ERROR"[^\n]*Another controller process is running/, "the reason is in the log");
      return true;
    });
    const cluster = await a.call("GET", "/api/v1/cluster");
    assert.equal(cluster.status, 200);
    assert.equal(cluster.json.nodeId, controllerId);
    assert.equal(await presenceNonce(), nonceBefore, "the first process keeps its entry");
    assert.doesNotMatch(a.process!.output(), /was taken over by another process/);
  });

  it("the same controller restarted after kill -9 while its old entry is still there waits a TTL at most, then starts", async () => {
    const key = controllerPresenceKey(controllerId);
    const deadValue = await kv.get(key);
    assert.ok(deadValue);
    await harness.kill9(a);
    // A restart can take longer than the 2 s TTL here: the test keeps the dead process's entry
    // alive, unchanged (as a process that died just after a renewal leaves it), until the new
    // process has claimed it, so the new one surely finds it. The new one sees a value that does
    // not change for a whole TTL, so it names no live process, and takes it over.
    const ttlMs = 2 * evaluationIntervalSeconds * 1000;
    await kv.set(key, deadValue, { ttlMs });
    let keep = true;
    const keeper = (async () => {
      while (keep && (await kv.compareAndSet(key, deadValue, deadValue, { ttlMs }))) await new Promise((resolve) => setTimeout(resolve, 200));
    })();
    try {
      await harness.launch(a);
    } finally {
      keep = false;
      await keeper;
    }
    assert.match(a.process!.output(), /has a presence entry of a process started at .*; waiting up to 2000 ms/);
    assert.equal((await a.call("GET", "/api/v1/cluster")).json.nodeId, controllerId);
    const nonceAfter = await presenceNonce();
    assert.ok(nonceAfter && nonceAfter !== parsePresence(deadValue)?.nonce, "the restarted process holds the entry");
  });

  it("after a graceful stop the entry is gone and the next start does not wait", async () => {
    await harness.stop(a);
    assert.equal(await presenceNonce(), null);
    await harness.launch(a);
    assert.doesNotMatch(a.process!.output(), /has a presence entry/);
    assert.equal((await a.call("GET", "/api/v1/cluster")).json.nodeId, controllerId);
  });
});
