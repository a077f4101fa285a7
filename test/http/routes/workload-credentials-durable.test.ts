/**
 * Revocations and rotations of workload tokens are kept in the document store, so a key-value
 * store that lost its data (FLUSHALL on a real Redis: a restart without persistence, a failover to
 * an empty replica) brings no revoked or rotated-out token back, and takes no valid one away.
 * A real server on a fake clock over a real Redis.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Redis } from "ioredis";
import { openRedisKvStore } from "../../../src/store/redis/redis-kv-store.js";
import type { KvStore } from "../../../src/store/ports.js";
import { workloadTokenRotationGraceMs } from "../../../src/plugin-api/credentials.js";
import { FakeClock } from "../../support/fake-clock.js";
import { ADMIN_PASSWORD, startTestApp, type TestApp, type TestResponse } from "../../support/http-app.js";
import { startRedisServer, type RedisServer } from "../../support/redis-server.js";

describe("workload credentials survive a lost key-value store", () => {
  let redis: RedisServer;
  let kv: KvStore;
  let t: TestApp;
  const clock = new FakeClock(Date.parse("2026-03-01T12:00:00Z"));

  const players = (token: string): Promise<TestResponse> => t.request("GET", "/api/plugin/players", { token });
  const flushAll = async () => {
    const client = new Redis(redis.uri, { maxRetriesPerRequest: 2 });
    try {
      await client.flushall();
    } finally {
      client.disconnect();
    }
  };
  const tokenOf = (instanceId: string, startId: string) => t.credentials.issueWorkloadToken({ instanceId, group: "lobby", node: "n1" }, startId).token;

  before(async () => {
    redis = await startRedisServer();
    kv = await openRedisKvStore({ uri: redis.uri });
    t = await startTestApp({ kv, clock });
    await t.groups.create({ name: "lobby", platform: "paper" });
    await t.nodes.upsert("n1", { host: "10.0.0.1" });
    for (const id of ["lobby-1", "lobby-2", "lobby-3", "lobby-4"]) {
      await t.instances.save({
        id,
        group: "lobby",
        node: "n1",
        port: 30000,
        memoryMb: 512,
        state: "RUNNING",
        playerCount: 0,
        startedAt: null,
        deploymentRevision: 1,
        startId: `start-${id}`,
      } as never);
    }
  });
  after(async () => {
    await t?.close();
    await kv?.close();
    await redis?.stop();
  });

  it("a revoked token, a rotated-out token and an instance's revoked tokens stay refused after FLUSHALL; a current one keeps working", async () => {
    const admin = await t.login("admin", ADMIN_PASSWORD);
    const revoked = tokenOf("lobby-1", "start-lobby-1");
    const res = await t.request("POST", "/api/v1/workload-credentials/revoke", { token: admin, body: { token: revoked } });
    assert.equal(res.status, 200, res.text);

    const rotatedOut = tokenOf("lobby-2", "start-lobby-2");
    const refreshed = await t.request("POST", "/api/plugin/auth/refresh", { token: rotatedOut });
    assert.equal(refreshed.status, 200, refreshed.text);
    const current = refreshed.json.token as string;

    const ofRevokedInstance = tokenOf("lobby-3", "start-lobby-3");
    assert.equal((await t.request("POST", "/api/v1/services/lobby-3/workload-credentials/revoke", { token: admin })).status, 200);
    const untouched = tokenOf("lobby-4", "start-lobby-4");

    clock.advance(workloadTokenRotationGraceMs);
    const before = await Promise.all([revoked, rotatedOut, ofRevokedInstance, current, untouched].map(async (token) => (await players(token)).status));
    assert.deepEqual(before, [401, 401, 401, 200, 200]);

    await flushAll();
    assert.equal(await kv.get("cloud:v1:ticket:none"), null, "the store is empty");
    const after = await Promise.all([revoked, rotatedOut, ofRevokedInstance, current, untouched].map(async (token) => (await players(token)).status));
    assert.deepEqual(after, [401, 401, 401, 200, 200], "revoked, rotated out, revoked by instance, current, untouched");

    // The rotation goes on from the generation the document store kept.
    const next = await t.request("POST", "/api/plugin/auth/refresh", { token: current });
    assert.equal(next.status, 200, next.text);
    assert.equal((await players(next.json.token)).status, 200);
    clock.advance(workloadTokenRotationGraceMs);
    await flushAll();
    assert.equal((await players(current)).status, 401, "the token the last refresh replaced");
    assert.equal((await players(next.json.token)).status, 200);
  });
});
