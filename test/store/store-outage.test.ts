// The store adapters in an outage, on real servers: a frozen or killed Redis and a frozen
// PostgreSQL answer StoreUnavailableError (503 STORE_UNAVAILABLE) within seconds instead of
// hanging, and the adapters work again once the server is back. PostgreSQL with several hosts and
// target_session_attrs=read-write uses the writable one and follows it when it moves.
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { StoreUnavailableError } from "../../src/store/ports.js";
import { openPostgresDocumentStore } from "../../src/store/postgres/postgres-document-store.js";
import { parsePostgresUri } from "../../src/store/postgres/postgres-pool.js";
import { openRedisKvStore } from "../../src/store/redis/redis-kv-store.js";
import { unusedPort } from "../support/ports.js";
import { startPostgresServer, type PostgresServer } from "../support/postgres-server.js";
import { startRedisServer, type RedisServer } from "../support/redis-server.js";

/** Runs `call`, expecting StoreUnavailableError; answers how long it took. */
async function unavailableWithin(call: () => Promise<unknown>): Promise<number> {
  const started = Date.now();
  await assert.rejects(call(), (err: unknown) => {
    assert.ok(err instanceof StoreUnavailableError, String(err));
    assert.equal(err.status, 503);
    assert.equal(err.code, "STORE_UNAVAILABLE");
    assert.equal(err.retryAfterSeconds, 1);
    return true;
  });
  return Date.now() - started;
}

describe("Redis outage", () => {
  it("frozen: a command fails within its timeout; resumed: it works again", async (t) => {
    const redis = await startRedisServer();
    const kv = await openRedisKvStore({ uri: redis.uri });
    t.after(async () => {
      await kv.close();
      await redis.stop();
    });
    await kv.set("k", "before");
    redis.pause();
    const ms = await unavailableWithin(() => kv.set("k", "during"));
    assert.ok(ms < 4_000, `answered after ${ms} ms (command timeout 2 s)`);
    redis.resume();
    await kv.set("k", "after");
    assert.equal(await kv.get("k"), "after");
  });

  it("killed: commands fail fast; started again on its port: they work again", async (t) => {
    const first = await startRedisServer();
    const kv = await openRedisKvStore({ uri: first.uri });
    const restarted: RedisServer[] = [];
    t.after(async () => {
      await kv.close();
      await first.stop();
      for (const server of restarted) await server.stop();
    });
    await first.kill();
    const ms = await unavailableWithin(() => kv.increment("counter"));
    assert.ok(ms < 4_000, `answered after ${ms} ms`);
    restarted.push(await startRedisServer({ port: first.port }));
    let value = 0;
    for (const deadline = Date.now() + 10_000; value === 0 && Date.now() < deadline;) {
      value = await kv.increment("counter").catch(() => 0);
      if (value === 0) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    assert.equal(value, 1, "a fresh server: the counter starts again (what the fencing marks are for)");
  });
});

describe("PostgreSQL outage", () => {
  const servers: PostgresServer[] = [];
  after(async () => {
    for (const server of servers) {
      server.resume();
      await server.stop();
    }
  });

  it("frozen: a read and a write fail within seconds; resumed: they work again", async () => {
    const postgres = await startPostgresServer();
    servers.push(postgres);
    const store = await openPostgresDocumentStore({ uri: postgres.uri, ttlSweepIntervalMs: 0, poolConnectionsMax: 2 });
    try {
      const items = store.collection("outage_items");
      await items.put({ _id: "a", v: 1 });
      postgres.pause();
      const readMs = await unavailableWithin(() => items.get("a"));
      const writeMs = await unavailableWithin(() => items.put({ _id: "a", v: 2 }));
      assert.ok(readMs < 7_000 && writeMs < 7_000, `answered after ${readMs} and ${writeMs} ms (query timeout 4 s, connect 2 s)`);
      postgres.resume();
      let back = false;
      for (const deadline = Date.now() + 15_000; !back && Date.now() < deadline;) {
        back = await items.put({ _id: "a", v: 3 }).then(
          () => true,
          () => false,
        );
      }
      assert.ok(back, "writes work again");
      assert.equal((await items.get("a"))?.v, 3);
    } finally {
      await store.close();
    }
  });

  it("several hosts with target_session_attrs=read-write: the writable one is used, a dead host is passed over, a demotion is followed", async () => {
    const [one, two] = await Promise.all([startPostgresServer(), startPostgresServer()]);
    servers.push(one, two);
    const dead = await unusedPort();
    // A promoted replica holds the primary's tables: here the two servers are independent, so the
    // table is created on the first one beforehand.
    const onOne = await openPostgresDocumentStore({ uri: one.uri, ttlSweepIntervalMs: 0, poolConnectionsMax: 1 });
    await onOne.collection("failover_items").count();
    await onOne.close();
    await one.setReadOnly(true);
    const uri = `postgres://postgres@127.0.0.1:${dead},127.0.0.1:${one.port},127.0.0.1:${two.port}/cloud_test?target_session_attrs=read-write`;
    const store = await openPostgresDocumentStore({ uri, ttlSweepIntervalMs: 0, poolConnectionsMax: 2 });
    try {
      const items = store.collection("failover_items");
      await items.put({ _id: "x", on: "two" });
      // The second server is demoted, the first promoted (as a failover does it).
      await one.setReadOnly(false);
      await two.setReadOnly(true);
      let moved = false;
      for (let attempt = 0; attempt < 5 && !moved; attempt++) {
        moved = await items.put({ _id: "x", on: "one" }).then(
          () => true,
          (err: unknown) => {
            assert.ok(err instanceof StoreUnavailableError, `a write to the demoted server is STORE_UNAVAILABLE, not ${String(err)}`);
            return false;
          },
        );
      }
      assert.ok(moved, "the write went to the writable server");
      assert.equal((await items.get("x"))?.on, "one", "read back where it was written");
    } finally {
      await store.close();
    }
  });

  it("parses multi-host URIs as libpq does and refuses what it cannot honour", () => {
    const target = parsePostgresUri("postgresql://u:p%40ss@db1:5432,db2/cloud?sslmode=disable&target_session_attrs=read-write");
    assert.equal(target.readWrite, true);
    assert.deepEqual(
      target.candidates.map((c) => c.uri),
      ["postgresql://u:p%40ss@db1:5432/cloud?sslmode=disable", "postgresql://u:p%40ss@db2/cloud?sslmode=disable"],
    );
    assert.equal(parsePostgresUri("postgres://localhost/cloud").readWrite, false);
    assert.throws(() => parsePostgresUri("postgres://a,b/cloud?target_session_attrs=standby"), /not supported/);
    assert.throws(() => parsePostgresUri("postgres://a,,b/cloud"), /empty host/);
  });
});
