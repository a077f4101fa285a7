/**
 * The plugin API across two controllers sharing one real Redis (two in-process apps, each with its
 * own HTTP server, document store and bus, over one database directory each but the same shared
 * key-value store): the player registry is one, and a transfer asked for on one controller reaches
 * the holder's plugin event stream open on the other. Revocations live in the shared document
 * store: across controllers they are tested on one PostgreSQL (test/e2e/credentials-cluster.test.ts).
 */
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Redis } from "ioredis";
import { PLAYER_REGISTRY_EPOCH_KEY } from "../../../src/plugin-api/players.js";
import { openRedisKvStore } from "../../../src/store/redis/redis-kv-store.js";
import type { KvStore } from "../../../src/store/ports.js";
import { startTestApp, type TestApp } from "../../support/http-app.js";
import { startRedisServer, type RedisServer } from "../../support/redis-server.js";
import { frameJson, openSse, type SseStream } from "../../support/sse-client.js";
import { eventually } from "../../support/wait.js";

const uuid = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, "0")}`;

describe("plugin API over two controllers sharing Redis", () => {
  let redis: RedisServer;
  const stores: KvStore[] = [];
  const apps: TestApp[] = [];
  const streams: SseStream[] = [];
  const tokens: Record<string, string> = {};

  before(async () => {
    redis = await startRedisServer();
    for (let i = 0; i < 2; i++) {
      const kv = await openRedisKvStore({ uri: redis.uri });
      stores.push(kv);
      apps.push(await startTestApp({ kv }));
    }
    // Each app has its own document store: both get the same records (production shares one database).
    for (const t of apps) {
      await t.groups.create({ name: "proxy", platform: "velocity" });
      await t.groups.create({ name: "lobby", platform: "paper" });
      await t.nodes.upsert("n1", { host: "10.0.0.1" });
      for (const [id, group] of [
        ["proxy-1", "proxy"],
        ["lobby-1", "lobby"],
        ["lobby-2", "lobby"],
      ]) {
        await t.instances.save({ id, group, node: "n1", port: 30000, memoryMb: 512, state: "RUNNING", playerCount: 0, startedAt: null, deploymentRevision: 1 });
      }
    }
  });
  after(async () => {
    for (const stream of streams) stream.close();
    for (const app of apps) await app.close();
    for (const kv of stores) await kv.close();
    await redis?.stop();
  });

  it("one registry, and a transfer asked for on A reaches the proxy's stream on B", async () => {
    const [a, b] = apps;
    tokens.proxyOnB = b.credentials.issueWorkloadToken({ instanceId: "proxy-1", group: "proxy", node: "n1" }).token;
    tokens.lobbyOnA = a.credentials.issueWorkloadToken({ instanceId: "lobby-1", group: "lobby", node: "n1" }).token;
    assert.equal((await b.request("POST", "/api/plugin/player-join", { token: tokens.proxyOnB, body: { uuid: uuid(1), name: "alice" } })).status, 200);
    assert.equal((await a.request("POST", "/api/plugin/player-join", { token: tokens.lobbyOnA, body: { uuid: uuid(1), name: "alice" } })).status, 200);
    const seenOnB = (await b.request("GET", "/api/plugin/players", { token: tokens.proxyOnB })).json;
    assert.deepEqual(
      seenOnB.map((p: any) => [p.uuid, p.instanceId, p.proxyInstanceId]),
      [[uuid(1), "lobby-1", "proxy-1"]],
    );

    const ticket = await b.request("POST", "/api/plugin/events/ticket", { token: tokens.proxyOnB });
    const stream = await openSse(`${b.baseUrl}/api/v1/events/stream?ticket=${ticket.json.ticket}`);
    streams.push(stream);
    await stream.waitFor(1);
    const queued = await a.request("POST", "/api/plugin/transfer", { token: tokens.lobbyOnA, body: { playerUuid: uuid(1), targetInstanceId: "lobby-2" } });
    assert.equal(queued.status, 202, queued.text);
    const [frame] = await stream.waitFor(1, (f) => f.event === "transfer", 10_000);
    assert.equal(frameJson(frame).id, queued.json.id);
    assert.equal(await b.transfers.pendingCount(), 1, "B sees the transfer A queued");
  });

  it("a Redis that lost its data (FLUSHALL) gets a new registry epoch, announced on the plugin streams of both controllers", async () => {
    const [a, b] = apps;
    const streamOn = async (app: TestApp, instanceId: string, group: string) => {
      const token = app.credentials.issueWorkloadToken({ instanceId, group, node: "n1" }).token;
      const ticket = await app.request("POST", "/api/plugin/events/ticket", { token });
      assert.equal(ticket.status, 200, ticket.text);
      const stream = await openSse(`${app.baseUrl}/api/v1/events/stream?ticket=${ticket.json.ticket}`);
      streams.push(stream);
      const [connected] = await stream.waitFor(1);
      return { stream, epoch: frameJson(connected).registryEpoch as string };
    };
    const onA = await streamOn(a, "lobby-1", "lobby");
    const onB = await streamOn(b, "proxy-1", "proxy");
    assert.ok(onA.epoch, "the connected frame names the epoch");
    assert.equal(onB.epoch, onA.epoch, "one epoch for the cluster");
    assert.equal(await stores[0].get(PLAYER_REGISTRY_EPOCH_KEY), onA.epoch);
    const flushed = new Redis(redis.uri, { maxRetriesPerRequest: 2 });
    try {
      await flushed.flushall();
    } finally {
      flushed.disconnect();
    }
    const announced = async (stream: SseStream) => frameJson((await stream.waitFor(1, (f) => f.event === "registry-epoch", 15_000))[0]).registryEpoch as string;
    const [newOnA, newOnB] = await Promise.all([announced(onA.stream), announced(onB.stream)]);
    assert.notEqual(newOnA, onA.epoch, "a new epoch after the store lost the old one");
    assert.equal(newOnB, newOnA, "both controllers announce the same new epoch");
    assert.equal(await stores[0].get(PLAYER_REGISTRY_EPOCH_KEY), newOnA);
  });
});

describe("a scope taken over mid-drain", () => {
  let redis: RedisServer;
  let kv: KvStore;
  let dir: string;
  const apps: TestApp[] = [];

  before(async () => {
    redis = await startRedisServer();
    kv = await openRedisKvStore({ uri: redis.uri });
    dir = await mkdtemp(join(tmpdir(), "cloud-drain-takeover-"));
  });
  after(async () => {
    for (const app of apps) await app.close();
    await kv?.close();
    await redis?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("the controller that adopts a DRAINING instance moves the players still on it", async () => {
    const first = await startTestApp({ kv, dir });
    apps.push(first);
    await first.groups.create({ name: "lobby", platform: "paper" });
    await first.nodes.upsert("n1", { host: "10.0.0.1" });
    // The previous owner died after lobby-a went DRAINING and before its players were moved: the record says DRAINING, alice is still on it.
    for (const [id, state] of [
      ["lobby-a", "DRAINING"],
      ["lobby-b", "RUNNING"],
    ] as const) {
      await first.instances.save({ id, group: "lobby", node: "n1", port: 30000, memoryMb: 512, state, playerCount: 0, startedAt: null, deploymentRevision: 1 });
    }
    const token = first.credentials.issueWorkloadToken({ instanceId: "lobby-a", group: "lobby", node: "n1" }).token;
    const joined = await first.request("POST", "/api/plugin/player-join", { token, body: { uuid: uuid(7), name: "alice" } });
    assert.equal(joined.status, 200, joined.text);
    assert.equal((await first.transfers.pending()).length, 0, "no drain was started by a record written straight to the store");
    await first.stop();

    const next = await startTestApp({ kv, dir, scheduler: true });
    apps.push(next);
    const [transfer] = await eventually(
      async () => {
        const pending = await next.transfers.pending();
        return pending.length ? pending : null;
      },
      "the adopted drain's transfer",
      10_000,
    );
    assert.equal(transfer.playerUuid, uuid(7));
    assert.equal(transfer.targetInstanceId, "lobby-b");
    assert.equal(transfer.requestedBy, "drain:lobby-a");
  });
});
