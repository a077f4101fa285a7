// The cross-controller mutex over a real Redis: callers on different connections (different
// controllers) never interleave a read-modify-write; a dead holder blocks the others for at most
// its TTL; a caller that waits too long gets 503 MUTEX_TIMEOUT. And what it is for: an operator's
// pause and promote of one deployment sent through two controllers at once both take effect.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { KvMutex, mutexKey } from "../../src/coordination/kv-mutex.js";
import { DeploymentService } from "../../src/deployments/deployment-service.js";
import { GroupService } from "../../src/domain/groups/group-service.js";
import { KeyedMutex } from "../../src/domain/shared/keyed-mutex.js";
import { openDeploymentCollections } from "../../src/deployments/deployment-store.js";
import { RevisionStore } from "../../src/deployments/revision-store.js";
import { isoFromMs } from "../../src/domain/shared/time.js";
import { systemClock } from "../../src/shared/clock.js";
import type { KvStore } from "../../src/store/ports.js";
import { openRedisKvStore } from "../../src/store/redis/redis-kv-store.js";
import { startTestApp, type TestApp } from "../support/http-app.js";
import { startRedisServer, type RedisServer } from "../support/redis-server.js";

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("KvMutex over Redis", () => {
  let redis: RedisServer;
  const stores: KvStore[] = [];
  let t: TestApp;

  before(async () => {
    redis = await startRedisServer();
    for (let i = 0; i < 2; i++) stores.push(await openRedisKvStore({ uri: redis.uri }));
    t = await startTestApp({ kv: stores[0] });
  });
  after(async () => {
    await t?.close();
    for (const kv of stores) await kv.close();
    await redis?.stop();
  });

  /** 2 × 15 read-modify-write increments of one key, a pause between the read and the write. */
  const race = async (guard: (fn: () => Promise<void>, i: number) => Promise<void>) => {
    const key = `cloud:v1:test:counter:${Math.random()}`;
    await stores[0].set(key, "0");
    const increment = async (kv: KvStore) => {
      const value = Number(await kv.get(key));
      await pause(2);
      await kv.set(key, String(value + 1));
    };
    await Promise.all(Array.from({ length: 30 }, (_, i) => guard(() => increment(stores[i % 2]), i)));
    return Number(await stores[0].get(key));
  };

  it("two controllers' read-modify-writes never interleave (without it, updates are lost)", async () => {
    assert.ok((await race((fn) => fn())) < 30, "the unguarded race loses updates");
    const mutexes = stores.map((kv) => new KvMutex(kv));
    assert.equal(await race((fn, i) => mutexes[i % 2].run("counter", fn)), 30);
    assert.equal(await stores[0].get(mutexKey("counter")), null, "released");
  });

  it("a dead holder's key blocks for at most its TTL; a caller that waits too long gets 503 MUTEX_TIMEOUT", async () => {
    await stores[1].set(mutexKey("dead"), "someone", { ttlMs: 300 });
    const started = Date.now();
    assert.equal(await new KvMutex(stores[0]).run("dead", async () => "ran"), "ran");
    assert.ok(Date.now() - started >= 250, `waited for the TTL (${Date.now() - started} ms)`);

    await stores[1].set(mutexKey("held"), "someone", { ttlMs: 10_000 });
    await assert.rejects(
      new KvMutex(stores[0], { waitMs: 100 }).run("held", async () => "ran"),
      (err: any) => err.status === 503 && err.code === "MUTEX_TIMEOUT",
    );
    assert.equal(await stores[0].get(mutexKey("held")), "someone", "another's key is never removed");
  });

  it("a pause and a promote of one deployment through two controllers at once both take effect", async () => {
    const admin = await t.tokenFor("ADMIN");
    const collections = openDeploymentCollections(t.documents);
    const controller = (kv: KvStore) =>
      new DeploymentService({
        collections,
        revisions: new RevisionStore(
          collections,
          async () => null,
          () => isoFromMs(Date.now()),
        ),
        groups: t.groups,
        instances: t.instances,
        templateHash: async () => null,
        events: t.events,
        clock: systemClock,
        controlLock: new KvMutex(kv),
      });
    const [a, b] = stores.map(controller);
    for (let round = 1; round <= 5; round++) {
      const group = `canary${round}`;
      assert.equal((await t.request("POST", "/api/v1/groups", { token: admin, body: { name: group, platform: "simulated" } })).status, 201);
      const created = await t.request("POST", `/api/v1/groups/${group}/deployments`, { token: admin, body: { canaryInstances: 1 } });
      assert.equal(created.status, 201, created.text);
      const revision = created.json.revision as number;
      await Promise.all([a.pause(group, revision), b.promote(group, revision)]);
      const shown = await a.show(group, revision);
      assert.deepEqual([shown.state, shown.promoted], ["PAUSED", true], `round ${round}: both controls kept`);
    }
  });

  it("a PATCH of a group on one controller and the scheduler's write of it on another both take effect, with or without the cluster-wide lock", async () => {
    const groupsOn = (lock: (kv: KvStore) => ReturnType<KvMutex["scoped"]>) =>
      stores.map((kv) => new GroupService(t.documents, t.events, systemClock, t.instances, lock(kv)));
    /** One round: a PATCH of maxInstances through A while B pauses the group; what the record keeps. */
    const round = async (a: GroupService, b: GroupService, name: string) => {
      await a.create({ name, platform: "simulated", maxInstances: 5 });
      await Promise.all([a.update(name, { maxInstances: 7 }), b.setSchedulingState(name, { paused: true })]);
      const doc = await a.getDoc(name);
      return [doc?.maxInstances, doc?.paused];
    };
    // Each controller's own mutex alone used to lose one of the writes (read, read, put, put). The
    // writes are now compare-and-set on the record's revision: the loser of the race reads again.
    const [localA, localB] = groupsOn(() => new KeyedMutex());
    for (let n = 0; n < 5; n++) assert.deepEqual(await round(localA, localB, `local${n}`), [7, true], `local round ${n}`);
    const [a, b] = groupsOn((kv) => new KvMutex(kv).scoped("group:"));
    for (let n = 0; n < 5; n++) assert.deepEqual(await round(a, b, `guarded${n}`), [7, true], `round ${n}`);
  });
});
