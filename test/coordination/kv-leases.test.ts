// Key-value leases with fencing tokens, over the memory store and a real Redis.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { AlwaysOwnedLeases, DEVELOPMENT_FENCING_TOKEN } from "../../src/coordination/always-owned-leases.js";
import { groupResource, leaseKey, leaseTokenKey } from "../../src/coordination/keys.js";
import { KvLeases, type LeaseMetrics } from "../../src/coordination/kv-leases.js";
import { LeaseLostError, type Lease } from "../../src/coordination/lease.js";
import { AssertionError } from "../../src/shared/errors.js";
import type { KvStore, SequencedLog } from "../../src/store/ports.js";
import { createMetrics } from "../../src/metrics/metrics.js";
import { describeEachKv, withEnv, type KvEnvironment } from "./support.js";

/** Short enough to wait out on a real server, long enough for a few round trips. */
const SHORT_TTL_MS = 200;
const LONG_TTL_MS = 30_000;

function countingMetrics() {
  const counts = { acquisitions: 0, renewals: 0, contentions: 0 };
  const metrics: LeaseMetrics = {
    leaseAcquisitions: { inc: (value?: number) => void (counts.acquisitions += value ?? 1) },
    leaseRenewals: { inc: (value?: number) => void (counts.renewals += value ?? 1) },
    leaseContentions: { inc: (value?: number) => void (counts.contentions += value ?? 1) },
  };
  return { metrics, counts };
}

/** A store whose chosen calls wait for a gate or fail, to force interleavings. */
class SteppedKvStore implements KvStore {
  private gates = new Map<string, { reached: () => void; open: Promise<void> }[]>();
  failNext = new Map<string, Error>();

  constructor(private readonly inner: KvStore) {}

  /** The next call of `method` waits; resolves `reached` once it is waiting, `open()` lets it on. */
  hold(method: string): { reached: Promise<void>; open: () => void } {
    let open!: () => void;
    let reached!: () => void;
    const reachedPromise = new Promise<void>((resolve) => (reached = resolve));
    const openPromise = new Promise<void>((resolve) => (open = resolve));
    const list = this.gates.get(method) ?? [];
    list.push({ reached, open: openPromise });
    this.gates.set(method, list);
    return { reached: reachedPromise, open };
  }

  private async step(method: string): Promise<void> {
    const failure = this.failNext.get(method);
    if (failure) {
      this.failNext.delete(method);
      throw failure;
    }
    const gate = this.gates.get(method)?.shift();
    if (gate) {
      gate.reached();
      await gate.open;
    }
  }

  async get(key: string) {
    await this.step("get");
    return this.inner.get(key);
  }
  async set(key: string, value: string, options?: { ttlMs?: number }) {
    await this.step("set");
    return this.inner.set(key, value, options);
  }
  async setIfAbsent(key: string, value: string, options?: { ttlMs?: number }) {
    await this.step("setIfAbsent");
    return this.inner.setIfAbsent(key, value, options);
  }
  async compareAndSet(key: string, expected: string, value: string, options?: { ttlMs?: number }) {
    await this.step("compareAndSet");
    return this.inner.compareAndSet(key, expected, value, options);
  }
  async compareAndDelete(key: string, expected: string) {
    await this.step("compareAndDelete");
    return this.inner.compareAndDelete(key, expected);
  }
  delete(key: string) {
    return this.inner.delete(key);
  }
  async increment(key: string) {
    await this.step("increment");
    return this.inner.increment(key);
  }
  take(key: string) {
    return this.inner.take(key);
  }
  ttlMs(key: string) {
    return this.inner.ttlMs(key);
  }
  keys(prefix: string) {
    return this.inner.keys(prefix);
  }
  publish(channel: string, message: string) {
    return this.inner.publish(channel, message);
  }
  subscribe(channel: string, handler: (message: string) => void) {
    return this.inner.subscribe(channel, handler);
  }
  appendSequenced(log: SequencedLog, value: string) {
    return this.inner.appendSequenced(log, value);
  }
  readSequenced(log: SequencedLog, fromSequence: number) {
    return this.inner.readSequenced(log, fromSequence);
  }
  ping() {
    return this.inner.ping();
  }
  close() {
    return this.inner.close();
  }
}

async function leasesFor(env: KvEnvironment, controllerId: string, leaseTtlMs: number, metrics?: LeaseMetrics): Promise<KvLeases> {
  return new KvLeases({ kv: await env.connect(), controllerId, leaseTtlMs, metrics });
}

describeEachKv("KvLeases", (makeEnv) => {
  it("grants a free lease with the next token and stores <controllerId>|<token> with the TTL", () =>
    withEnv(makeEnv, async (env) => {
      const resource = groupResource(env.unique("lobby"));
      const kv = await env.connect();
      const leases = new KvLeases({ kv, controllerId: "c1", leaseTtlMs: LONG_TTL_MS });
      const lease = await leases.acquire(resource);
      assert.deepEqual(lease, { resource, controllerId: "c1", fencingToken: 1 });
      assert.equal(await kv.get(leaseKey(resource)), "c1|1");
      assert.equal(await kv.get(leaseTokenKey(resource)), "1");
      assert.equal(await kv.ttlMs(leaseTokenKey(resource)), null, "the counter never expires");
      const remaining = await kv.ttlMs(leaseKey(resource));
      assert.ok(remaining !== null && remaining > LONG_TTL_MS - 1_000 && remaining <= LONG_TTL_MS, `remaining ${remaining}`);
      assert.ok(leaseKey(resource).startsWith("cloud:v1:lease:group:"));
    }));

  it("renews for the holder: same token, expiry extended, counted as a renewal", () =>
    withEnv(makeEnv, async (env) => {
      const resource = groupResource(env.unique("lobby"));
      const kv = await env.connect();
      const { metrics, counts } = countingMetrics();
      const leases = new KvLeases({ kv, controllerId: "c1", leaseTtlMs: SHORT_TTL_MS * 2, metrics });
      const first = await leases.acquire(resource);
      await env.expire(SHORT_TTL_MS);
      const before = (await kv.ttlMs(leaseKey(resource)))!;
      const renewed = await leases.acquire(resource);
      assert.deepEqual(renewed, first);
      const afterRenewal = (await kv.ttlMs(leaseKey(resource)))!;
      assert.ok(afterRenewal > before, `expiry extended: ${before} -> ${afterRenewal}`);
      await env.expire(SHORT_TTL_MS + 50);
      assert.equal(await leases.owns(resource), true, "still held: the renewal moved the expiry");
      assert.deepEqual(counts, { acquisitions: 1, renewals: 1, contentions: 0 });
      assert.equal(await kv.get(leaseTokenKey(resource)), "1", "a renewal takes no token");
    }));

  it("two controllers contend: only one holds; the other gets it after the TTL with a higher token", () =>
    withEnv(makeEnv, async (env) => {
      const resource = groupResource(env.unique("lobby"));
      const a = await leasesFor(env, "c-a", SHORT_TTL_MS);
      const b = await leasesFor(env, "c-b", SHORT_TTL_MS);
      const [leaseA, leaseB] = await Promise.all([a.acquire(resource), b.acquire(resource)]);
      const winner = leaseA ?? leaseB;
      assert.ok(winner, "one of them holds");
      assert.ok(leaseA === null || leaseB === null, "never both");
      const loser = winner.controllerId === "c-a" ? b : a;
      const holder = winner.controllerId === "c-a" ? a : b;
      assert.equal(await loser.acquire(resource), null, "held by the other: refused");
      assert.equal(await loser.owns(resource), false);
      assert.equal(await holder.owns(resource), true);
      await env.expire(SHORT_TTL_MS + 50); // the holder stops renewing
      const taken = await loser.acquire(resource);
      assert.ok(taken);
      assert.equal(taken.controllerId, loser.controllerId);
      assert.ok(taken.fencingToken > winner.fencingToken, `${taken.fencingToken} > ${winner.fencingToken}`);
      assert.equal(await holder.acquire(resource), null, "the former holder cannot renew");
      assert.equal(await holder.owns(resource), false);
    }));

  it("counts a lost race as contention, a refusal of a settled holder not", () =>
    withEnv(makeEnv, async (env) => {
      const resource = groupResource(env.unique("lobby"));
      const one = countingMetrics();
      const two = countingMetrics();
      const inner = await env.connect();
      const stepped = new SteppedKvStore(inner);
      const a = new KvLeases({ kv: stepped, controllerId: "c-a", leaseTtlMs: LONG_TTL_MS, metrics: one.metrics });
      const b = new KvLeases({ kv: inner, controllerId: "c-b", leaseTtlMs: LONG_TTL_MS, metrics: two.metrics });
      const gate = stepped.hold("setIfAbsent"); // a has seen the key absent, then waits to claim
      const racing = a.acquire(resource);
      await gate.reached;
      assert.ok(await b.acquire(resource));
      gate.open();
      assert.equal(await racing, null);
      assert.equal(await a.acquire(resource), null);
      assert.deepEqual(one.counts, { acquisitions: 0, renewals: 0, contentions: 1 });
      assert.deepEqual(two.counts, { acquisitions: 1, renewals: 0, contentions: 0 });
    }));

  it("ensureCurrent passes for the holder and throws LEASE_LOST after a takeover, so no write happens", () =>
    withEnv(makeEnv, async (env) => {
      const resource = groupResource(env.unique("lobby"));
      const a = await leasesFor(env, "c-a", SHORT_TTL_MS);
      const b = await leasesFor(env, "c-b", SHORT_TTL_MS);
      const leaseA = (await a.acquire(resource))!;
      await a.ensureCurrent(leaseA);
      await env.expire(SHORT_TTL_MS + 50);
      const leaseB = (await b.acquire(resource))!;
      const writes: string[] = [];
      const mutate = async (leases: KvLeases, lease: Lease) => {
        await leases.ensureCurrent(lease);
        writes.push(lease.controllerId);
      };
      await assert.rejects(mutate(a, leaseA), (error: unknown) => {
        assert.ok(error instanceof LeaseLostError);
        assert.equal(error.code, "LEASE_LOST");
        assert.equal(error.resource, resource);
        assert.deepEqual(error.found, { controllerId: "c-b", fencingToken: leaseB.fencingToken });
        return true;
      });
      await mutate(b, leaseB);
      assert.deepEqual(writes, ["c-b"]);
    }));

  it("ensureCurrent throws when the token moved even though the holder is the same controller", () =>
    withEnv(makeEnv, async (env) => {
      const resource = groupResource(env.unique("lobby"));
      const a = await leasesFor(env, "c-a", SHORT_TTL_MS);
      const first = (await a.acquire(resource))!;
      await env.expire(SHORT_TTL_MS + 50);
      const second = (await a.acquire(resource))!;
      assert.ok(second.fencingToken > first.fencingToken);
      await assert.rejects(a.ensureCurrent(first), LeaseLostError);
      await a.ensureCurrent(second);
      assert.equal(await a.release(second), true);
      await assert.rejects(a.ensureCurrent(second), (error: unknown) => error instanceof LeaseLostError && error.found === null);
    }));

  it("owns is a read: true for the holder, false for others, and it does not extend the expiry", () =>
    withEnv(makeEnv, async (env) => {
      const resource = groupResource(env.unique("lobby"));
      const kv = await env.connect();
      const a = new KvLeases({ kv, controllerId: "c-a", leaseTtlMs: SHORT_TTL_MS });
      const b = await leasesFor(env, "c-b", SHORT_TTL_MS);
      assert.equal(await a.owns(resource), false, "free");
      await a.acquire(resource);
      await env.expire(SHORT_TTL_MS / 2);
      const before = (await kv.ttlMs(leaseKey(resource)))!;
      for (let i = 0; i < 5; i++) assert.equal(await a.owns(resource), true);
      assert.equal(await b.owns(resource), false);
      const afterOwns = (await kv.ttlMs(leaseKey(resource)))!;
      assert.ok(afterOwns <= before, `no renewal: ${before} -> ${afterOwns}`);
      await env.expire(SHORT_TTL_MS / 2 + 50);
      assert.equal(await a.owns(resource), false, "expired: owns never renewed it");
    }));

  it("release deletes only the lease it names", () =>
    withEnv(makeEnv, async (env) => {
      const resource = groupResource(env.unique("lobby"));
      const a = await leasesFor(env, "c-a", SHORT_TTL_MS);
      const b = await leasesFor(env, "c-b", SHORT_TTL_MS);
      const leaseA = (await a.acquire(resource))!;
      await env.expire(SHORT_TTL_MS + 50);
      const leaseB = (await b.acquire(resource))!;
      assert.equal(await a.release(leaseA), false, "a stale lease releases nothing");
      assert.equal(await b.owns(resource), true);
      assert.equal(await b.release(leaseB), true);
      const again = (await a.acquire(resource))!;
      assert.ok(again.fencingToken > leaseB.fencingToken, "a released lease is free at once, with a higher token");
    }));

  it("a contender delayed between claim and token cannot end up below an earlier holder's token", () =>
    withEnv(makeEnv, async (env) => {
      const resource = groupResource(env.unique("lobby"));
      const inner = await env.connect();
      const stepped = new SteppedKvStore(inner);
      const slow = new KvLeases({ kv: stepped, controllerId: "c-slow", leaseTtlMs: SHORT_TTL_MS });
      const fast = new KvLeases({ kv: inner, controllerId: "c-fast", leaseTtlMs: SHORT_TTL_MS });
      const gate = stepped.hold("increment"); // slow has claimed the key, then stalls before INCR
      const slowAcquire = slow.acquire(resource);
      await gate.reached;
      assert.equal(await fast.acquire(resource), null, "the claim counts as held");
      await env.expire(SHORT_TTL_MS + 50); // the stalled claim expires
      const fastLease = (await fast.acquire(resource))!;
      assert.ok(fastLease);
      assert.equal(await fast.release(fastLease), true);
      gate.open(); // slow's INCR and grant now run: its claim is gone
      assert.equal(await slowAcquire, null);
      const slowLease = (await slow.acquire(resource))!;
      assert.ok(slowLease.fencingToken > fastLease.fencingToken, `${slowLease.fencingToken} > ${fastLease.fencingToken}`);
      assert.notEqual(slowLease.fencingToken, fastLease.fencingToken);
    }));

  it("a renewal delayed past a takeover does not overwrite the new holder", () =>
    withEnv(makeEnv, async (env) => {
      const resource = groupResource(env.unique("lobby"));
      const inner = await env.connect();
      const stepped = new SteppedKvStore(inner);
      const a = new KvLeases({ kv: stepped, controllerId: "c-a", leaseTtlMs: SHORT_TTL_MS });
      const b = new KvLeases({ kv: inner, controllerId: "c-b", leaseTtlMs: SHORT_TTL_MS });
      const leaseA = (await a.acquire(resource))!;
      const gate = stepped.hold("compareAndSet"); // a read its own lease, its renewal write waits
      const renewal = a.acquire(resource);
      await gate.reached;
      await env.expire(SHORT_TTL_MS + 50);
      const leaseB = (await b.acquire(resource))!;
      gate.open();
      assert.equal(await renewal, null);
      await b.ensureCurrent(leaseB);
      await assert.rejects(a.ensureCurrent(leaseA), LeaseLostError);
    }));

  it("completes its own claim left behind by an interrupted acquire; others see the claim as held", () =>
    withEnv(makeEnv, async (env) => {
      const resource = groupResource(env.unique("lobby"));
      const inner = await env.connect();
      const stepped = new SteppedKvStore(inner);
      const a = new KvLeases({ kv: stepped, controllerId: "c-a", leaseTtlMs: LONG_TTL_MS });
      const b = new KvLeases({ kv: inner, controllerId: "c-b", leaseTtlMs: LONG_TTL_MS });
      stepped.failNext.set("increment", new Error("connection reset"));
      await assert.rejects(a.acquire(resource), /connection reset/);
      assert.match((await inner.get(leaseKey(resource)))!, /^c-a\|claim:/);
      assert.deepEqual(await b.holder(resource), { controllerId: "c-a", fencingToken: null });
      assert.equal(await b.acquire(resource), null);
      assert.equal(await a.owns(resource), false, "a claim is not yet a lease");
      const lease = (await a.acquire(resource))!;
      assert.deepEqual(lease, { resource, controllerId: "c-a", fencingToken: 1 });
      assert.equal(await inner.get(leaseKey(resource)), "c-a|1");
    }));

  it("treats a value it cannot read as held by someone else", () =>
    withEnv(makeEnv, async (env) => {
      const resource = groupResource(env.unique("lobby"));
      const kv = await env.connect();
      await kv.set(leaseKey(resource), "legacy-format", { ttlMs: LONG_TTL_MS });
      const a = new KvLeases({ kv, controllerId: "c-a", leaseTtlMs: LONG_TTL_MS });
      assert.equal(await a.acquire(resource), null);
      assert.equal(await a.owns(resource), false);
      await kv.set(leaseKey(resource), "c-a|not-a-token", { ttlMs: LONG_TTL_MS });
      assert.equal(await a.acquire(resource), null, "its own id with an unknown suffix is not its lease");
      assert.equal(await a.owns(resource), false);
    }));

  it("grants one holder per round and strictly increasing, never reused tokens to many concurrent acquirers", () =>
    withEnv(makeEnv, async (env) => {
      const resource = groupResource(env.unique("contended"));
      const connections = await Promise.all(Array.from({ length: 4 }, () => env.connect()));
      const contenders = Array.from(
        { length: 16 },
        (_, i) => new KvLeases({ kv: connections[i % connections.length], controllerId: `c${i}`, leaseTtlMs: LONG_TTL_MS }),
      );
      const tokens: number[] = [];
      for (let round = 0; round < 25; round++) {
        const results = await Promise.all(contenders.map((leases) => leases.acquire(resource)));
        const granted = results.filter((lease): lease is Lease => lease !== null);
        assert.equal(granted.length, 1, `round ${round}: exactly one holder`);
        const [lease] = granted;
        const holder = contenders.find((leases) => leases.controllerId === lease.controllerId)!;
        // the holder renews while everyone else tries again: still one holder, same token
        const again = await Promise.all(contenders.map((leases) => leases.acquire(resource)));
        assert.deepEqual(
          again.filter((l) => l !== null),
          [lease],
        );
        tokens.push(lease.fencingToken);
        assert.equal(await holder.release(lease), true);
      }
      for (let i = 1; i < tokens.length; i++) assert.ok(tokens[i] > tokens[i - 1], `tokens increase: ${tokens.join(",")}`);
      assert.equal(new Set(tokens).size, tokens.length);
    }));

  it("under churn with expiring leases: a grant that began after another grant ended has a higher token", { timeout: 20_000 }, () =>
    withEnv(makeEnv, async (env) => {
      const resource = groupResource(env.unique("churn"));
      const ttlMs = env.backend === "redis" ? 30 : 50;
      const connections = await Promise.all(Array.from({ length: 4 }, () => env.connect()));
      const contenders = Array.from(
        { length: 8 },
        (_, i) => new KvLeases({ kv: connections[i % connections.length], controllerId: `c${i}`, leaseTtlMs: ttlMs }),
      );
      const grants: { controllerId: string; token: number; sentAt: number; doneAt: number }[] = [];
      let step = 0; // a logical clock: every request start and end takes the next value
      const deadline = Date.now() + (env.backend === "redis" ? 1_500 : 0);
      for (let round = 0; round < 40 || Date.now() < deadline; round++) {
        await Promise.all(
          contenders.map(async (leases) => {
            const sentAt = step++;
            const lease = await leases.acquire(resource);
            const doneAt = step++;
            if (lease) grants.push({ controllerId: lease.controllerId, token: lease.fencingToken, sentAt, doneAt });
          }),
        );
        if (env.backend === "memory") env.clock.advance(round % 3 === 0 ? ttlMs + 1 : 1);
        const sample = grants.at(-1);
        if (sample && round % 5 === 4)
          await contenders
            .find((l) => l.controllerId === sample.controllerId)!
            .release({ resource, controllerId: sample.controllerId, fencingToken: sample.token });
      }
      assert.ok(grants.length > 20, `enough grants: ${grants.length}`);
      const holderOfToken = new Map<number, string>();
      for (const grant of grants) {
        const owner = holderOfToken.get(grant.token);
        assert.ok(owner === undefined || owner === grant.controllerId, `token ${grant.token} granted to ${owner} and ${grant.controllerId}`);
        holderOfToken.set(grant.token, grant.controllerId);
      }
      for (const earlier of grants) {
        for (const later of grants) {
          if (later.sentAt > earlier.doneAt && later.token !== earlier.token) {
            assert.ok(later.token > earlier.token, `grant ${later.token} began after grant ${earlier.token} ended`);
          }
        }
      }
      assert.ok(holderOfToken.size > 3, `several takeovers: ${holderOfToken.size}`);
    }),
  );

  it("records acquisitions, renewals and contentions in the spec's counters", () =>
    withEnv(makeEnv, async (env) => {
      const resource = groupResource(env.unique("lobby"));
      const metrics = createMetrics({ enabled: true, processMetrics: false });
      const inner = await env.connect();
      const stepped = new SteppedKvStore(inner);
      const a = new KvLeases({ kv: stepped, controllerId: "c-a", leaseTtlMs: LONG_TTL_MS, metrics });
      const b = new KvLeases({ kv: inner, controllerId: "c-b", leaseTtlMs: LONG_TTL_MS, metrics });
      const gate = stepped.hold("setIfAbsent");
      const racing = a.acquire(resource);
      await gate.reached;
      await b.acquire(resource);
      await b.acquire(resource);
      gate.open();
      await racing;
      const text = await metrics.render();
      assert.match(text, /^cloud_coordination_lease_acquisitions_total 1$/m);
      assert.match(text, /^cloud_coordination_lease_renewals_total 1$/m);
      assert.match(text, /^cloud_coordination_lease_contentions_total 1$/m);
    }));
});

describe("KvLeases options", () => {
  it("refuses a controller id containing the value separator", async () => {
    const { MemoryKvStore } = await import("../../src/store/memory/memory-kv-store.js");
    const kv = new MemoryKvStore();
    assert.throws(() => new KvLeases({ kv, controllerId: "a|b", leaseTtlMs: 1_000 }), AssertionError);
    assert.throws(() => new KvLeases({ kv, controllerId: "", leaseTtlMs: 1_000 }), AssertionError);
    assert.throws(() => new KvLeases({ kv, controllerId: "c", leaseTtlMs: 0 }), AssertionError);
    await kv.close();
  });
});

describe("AlwaysOwnedLeases (development)", () => {
  it("grants every resource to its controller with the constant development token, storing nothing", async () => {
    const leases = new AlwaysOwnedLeases("dev-1");
    const lobby = await leases.acquire(groupResource("lobby"));
    assert.deepEqual(lobby, { resource: "group:lobby", controllerId: "dev-1", fencingToken: DEVELOPMENT_FENCING_TOKEN });
    assert.equal(DEVELOPMENT_FENCING_TOKEN, 0, "below every key-value token");
    assert.deepEqual(await leases.acquire(groupResource("lobby")), lobby, "renewal: same token");
    assert.equal(await leases.owns(groupResource("anything")), true);
    await leases.ensureCurrent(lobby);
    assert.equal(await leases.release(lobby), true);
    await leases.ensureCurrent(lobby); // still owned: development has no other holder
  });

  it("ensureCurrent refuses a lease it cannot have granted", async () => {
    const leases = new AlwaysOwnedLeases("dev-1");
    await assert.rejects(leases.ensureCurrent({ resource: "group:lobby", controllerId: "dev-2", fencingToken: 0 }), LeaseLostError);
    await assert.rejects(leases.ensureCurrent({ resource: "group:lobby", controllerId: "dev-1", fencingToken: 7 }), LeaseLostError);
  });
});
