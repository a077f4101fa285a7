// Fencing tokens never go backwards when the key-value store loses its data: over a real Redis and
// a real PostgreSQL, a lease whose tokens reached 5 is flushed away (FLUSHALL) and taken by another
// controller. Without the durable high-water mark its token starts again at 1, below what daemons
// have seen; with it (the production wiring) the token is 6, recorded in `fencing_tokens`.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { DocumentFencingHighWater, FENCING_TOKENS_COLLECTION } from "../../src/coordination/fencing-high-water.js";
import { KvLeases } from "../../src/coordination/kv-leases.js";
import type { DocumentStore } from "../../src/store/ports.js";
import { openPostgresDocumentStore } from "../../src/store/postgres/postgres-document-store.js";
import type { RedisKvStore } from "../../src/store/redis/redis-kv-store.js";
import { openRedisKvStore } from "../../src/store/redis/redis-kv-store.js";
import { NEVER_BUNDLED_COLLECTIONS } from "../../src/backup/bundle-format.js";
import { startPostgresServer, type PostgresServer } from "../support/postgres-server.js";
import { startRedisServer, type RedisServer } from "../support/redis-server.js";

const leaseTtlMs = 30_000;

describe("fencing tokens across a key-value store that lost its data", () => {
  let redis: RedisServer;
  let postgres: PostgresServer;
  let kv: RedisKvStore;
  let documents: DocumentStore;

  before(async () => {
    [redis, postgres] = await Promise.all([startRedisServer(), startPostgresServer()]);
    kv = await openRedisKvStore({ uri: redis.uri });
    documents = await openPostgresDocumentStore({ uri: postgres.uri, ttlSweepIntervalMs: 0, poolConnectionsMax: 2 });
  });
  after(async () => {
    await kv?.close();
    await documents?.close();
    await redis?.stop();
    await postgres?.stop();
  });

  const flushall = () => (kv as unknown as { client: { flushall(): Promise<string> } }).client.flushall();

  /** Controller "a" takes and gives back `resource` until its token is 5; answers that token. */
  async function historyUpToFive(leases: KvLeases, resource: string): Promise<number> {
    let token = 0;
    while (token < 5) {
      const lease = await leases.acquire(resource);
      assert.ok(lease);
      token = lease.fencingToken;
      await leases.release(lease);
    }
    return token;
  }

  it("without the durable mark (the defect): after FLUSHALL another controller's token starts again at 1", async () => {
    const a = new KvLeases({ kv, controllerId: "a", leaseTtlMs });
    const b = new KvLeases({ kv, controllerId: "b", leaseTtlMs });
    assert.equal(await historyUpToFive(a, "group:plain"), 5);
    await flushall();
    assert.equal((await b.acquire("group:plain"))?.fencingToken, 1);
  });

  it("with it: the next holder's token is above every token granted before, and recorded durably", async () => {
    const highWater = new DocumentFencingHighWater(documents);
    const a = new KvLeases({ kv, controllerId: "a", leaseTtlMs, highWater });
    const b = new KvLeases({ kv, controllerId: "b", leaseTtlMs, highWater });
    const c = new KvLeases({ kv, controllerId: "c", leaseTtlMs, highWater });
    assert.equal(await historyUpToFive(a, "group:durable"), 5);
    // "a" still believes it holds token 5 when the store forgets everything.
    const held = await a.acquire("group:durable");
    assert.equal(held?.fencingToken, 6);
    await flushall();
    const taken = await b.acquire("group:durable");
    assert.equal(taken?.fencingToken, 7, "above the flushed holder's 6");
    await assert.rejects(a.ensureCurrent(held!), (err: unknown) => (err as { code?: string }).code === "LEASE_LOST");
    assert.equal(await highWater.highest("group:durable"), 7);
    assert.equal((await documents.collection(FENCING_TOKENS_COLLECTION).get("group:durable"))?.token, 7);
    // Flushed again and again: every holder's token is above the last.
    let last = 7;
    for (const leases of [c, a, b, c]) {
      await flushall();
      const lease = await leases.acquire("group:durable");
      assert.ok(lease && lease.fencingToken > last, `${lease?.fencingToken} > ${last}`);
      last = lease.fencingToken;
    }
    // Without a flush the key-value counter leads again, and the mark follows it.
    await b.release((await c.acquire("group:durable"))!);
    assert.ok((await b.acquire("group:durable"))!.fencingToken > last);
  });

  it("the marks are never part of a backup, so a restore cannot lower them", () => {
    assert.ok(NEVER_BUNDLED_COLLECTIONS.has(FENCING_TOKENS_COLLECTION));
  });
});
