// The lease keeper: acquire and renew on injected timers, and onLost as soon as a lease is gone and
// at the latest at the local deadline. Over the memory store and a real Redis.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { groupResource, leaseKey } from "../../src/coordination/keys.js";
import { KvLeases } from "../../src/coordination/kv-leases.js";
import { LeaseKeeper, type LeaseKeeperOptions } from "../../src/coordination/lease-keeper.js";
import { LeaseLostError, type Lease, type Leases } from "../../src/coordination/lease.js";
import { FakeClock } from "../support/fake-clock.js";
import { AssertionError } from "../../src/shared/errors.js";
import type { KvStore } from "../../src/store/ports.js";
import { AlwaysOwnedLeases } from "../../src/coordination/always-owned-leases.js";
import { describeEachKv, recordingLogger, withEnv, type KvEnvironment } from "./support.js";

const TTL_MS = 30_000; // 2 × a 15 s evaluation interval
const RENEW_MS = 10_000; // the default: a third of the TTL
const MARGIN_MS = 5_000; // the default: a sixth of the TTL

/** Leases whose acquire calls can be held back, then answered late or failed. */
class HangingLeases implements Leases {
  hang = false;
  calls = 0;
  private readonly hung: { resource: string; resolve: (lease: Promise<Lease | null>) => void; reject: (error: Error) => void }[] = [];

  constructor(private readonly inner: Leases) {}

  get controllerId(): string {
    return this.inner.controllerId;
  }
  acquire(resource: string): Promise<Lease | null> {
    this.calls++;
    if (!this.hang) return this.inner.acquire(resource);
    return new Promise((resolve, reject) => this.hung.push({ resource, resolve, reject }));
  }
  owns(resource: string) {
    return this.inner.owns(resource);
  }
  ensureCurrent(lease: Lease) {
    return this.inner.ensureCurrent(lease);
  }
  release(lease: Lease) {
    return this.inner.release(lease);
  }
  /** The held-back calls fail, as when the store cannot be reached. */
  failHung(): void {
    for (const call of this.hung.splice(0)) call.reject(new Error("store unreachable"));
  }
  /** The held-back calls reach the store now and are answered. */
  answerHung(): void {
    for (const call of this.hung.splice(0)) call.resolve(this.inner.acquire(call.resource));
  }
}

interface Harness {
  keeper: LeaseKeeper;
  leases: HangingLeases;
  kv: KvStore;
  clock: FakeClock;
  /** `<ms since start> acquired <resource> <token>` and `<ms since start> lost <resource>`. */
  events: string[];
  wanted: string[];
  /** Advances the clock by `ms` (firing timers) and waits for a tick it started. */
  step(ms: number): Promise<void>;
  /**
   * Advances the clock to `ms` after the start, firing timers, and lets the started ticks run up to
   * their first wait (they are not awaited: a held-back call may never finish).
   */
  advanceTo(ms: number): Promise<void>;
  sinceStart(): number;
}

async function harness(env: KvEnvironment, wanted: string[], options: Partial<LeaseKeeperOptions> & { controllerId?: string } = {}): Promise<Harness> {
  const kv = await env.connect();
  const leases = new HangingLeases(new KvLeases({ kv, controllerId: options.controllerId ?? "c-keeper", leaseTtlMs: TTL_MS }));
  const startMs = env.clock.nowMs();
  const events: string[] = [];
  const sinceStart = () => env.clock.nowMs() - startMs;
  const keeper = new LeaseKeeper({
    leases,
    resources: () => wanted,
    leaseTtlMs: TTL_MS,
    clock: env.clock,
    onAcquired: (resource, lease) => events.push(`${sinceStart()} acquired ${resource} ${lease.fencingToken}`),
    onLost: (resource) => events.push(`${sinceStart()} lost ${resource}`),
    ...options,
  });
  const step = async (ms: number) => {
    env.clock.advance(ms);
    await keeper.idle();
  };
  const advanceTo = async (ms: number) => {
    assert.ok(ms >= sinceStart(), "time only moves forward");
    env.clock.advance(ms - sinceStart());
    await new Promise((resolve) => setImmediate(resolve));
  };
  return { keeper, leases, kv, clock: env.clock, events, wanted, step, advanceTo, sinceStart };
}

describeEachKv("LeaseKeeper", (makeEnv) => {
  it("acquires every wanted resource on the first tick and renews without losing", () =>
    withEnv(makeEnv, async (env) => {
      const [lobby, bedwars] = [groupResource(env.unique("lobby")), groupResource(env.unique("bedwars"))];
      const h = await harness(env, [lobby, bedwars]);
      h.keeper.start();
      await h.step(0);
      assert.deepEqual(h.events.sort(), [`0 acquired ${bedwars} 1`, `0 acquired ${lobby} 1`]);
      for (let i = 0; i < 12; i++) await h.step(RENEW_MS); // two minutes, four TTLs
      assert.equal(h.events.length, 2, "no loss while renewals succeed");
      assert.deepEqual(h.keeper.lease(lobby), { resource: lobby, controllerId: "c-keeper", fencingToken: 1 });
      assert.deepEqual(h.keeper.heldResources().sort(), [lobby, bedwars].sort());
      assert.equal(await h.kv.get(leaseKey(lobby)), "c-keeper|1");
      await h.keeper.stop();
    }));

  it("fires onLost at the tick whose renewal finds another holder", () =>
    withEnv(makeEnv, async (env) => {
      const lobby = groupResource(env.unique("lobby"));
      const h = await harness(env, [lobby]);
      h.keeper.start();
      await h.step(0);
      await h.step(RENEW_MS);
      // another controller takes over (as after an expiry this keeper did not see)
      await h.kv.delete(leaseKey(lobby));
      const other = new KvLeases({ kv: await env.connect(), controllerId: "c-other", leaseTtlMs: TTL_MS });
      const taken = (await other.acquire(lobby))!;
      await h.step(RENEW_MS);
      assert.deepEqual(h.events, [`0 acquired ${lobby} 1`, `${2 * RENEW_MS} lost ${lobby}`]);
      assert.equal(h.keeper.lease(lobby), undefined);
      await h.step(RENEW_MS);
      assert.equal(h.events.length, 2, "no acquisition while the other holds it");
      await other.release(taken);
      await h.step(RENEW_MS);
      assert.equal(h.events[2], `${4 * RENEW_MS} acquired ${lobby} 3`, "free again: acquired with a higher token");
      await h.keeper.stop();
    }));

  it("fires onLost at acquiredAt + ttl - margin when renewals cannot be confirmed, before the TTL", () =>
    withEnv(makeEnv, async (env) => {
      const lobby = groupResource(env.unique("lobby"));
      const { logger, records } = recordingLogger();
      const h = await harness(env, [lobby], { logger });
      h.keeper.start();
      await h.step(0);
      h.leases.hang = true; // the store stops answering
      await h.advanceTo(10_000); // renewal sent, no answer
      await h.advanceTo(20_000); // the next tick is skipped: the previous one still runs
      assert.deepEqual(h.events, [`0 acquired ${lobby} 1`]);
      await h.advanceTo(TTL_MS - MARGIN_MS - 1);
      assert.equal(h.events.length, 1, "still held 1 ms before the deadline");
      await h.advanceTo(TTL_MS - MARGIN_MS);
      assert.deepEqual(h.events, [`0 acquired ${lobby} 1`, `${TTL_MS - MARGIN_MS} lost ${lobby}`], "lost at 25 s, before the TTL of 30 s");
      assert.equal(h.keeper.lease(lobby), undefined);
      assert.ok(records.some((r) => r.level === "WARN" && /tick skipped/.test(r.message)));
      h.leases.failHung();
      await h.keeper.idle();
      h.leases.hang = false;
      await h.step(TTL_MS - h.sinceStart()); // the tick at 30 s
      // The store answers again and nobody took the lease: the memory store, on the same clock, let
      // it expire at 30 s (a new token); Redis, on real time, still has it (renewed, same token).
      assert.equal(h.events[2], `${TTL_MS} acquired ${lobby} ${env.backend === "memory" ? 2 : 1}`);
      await h.keeper.stop();
    }));

  it("measures the deadline from when the renewal was sent, not from when it was answered", () =>
    withEnv(makeEnv, async (env) => {
      const lobby = groupResource(env.unique("lobby"));
      const h = await harness(env, [lobby]);
      h.keeper.start();
      await h.step(0);
      h.leases.hang = true;
      await h.advanceTo(10_000); // renewal sent at 10 s
      await h.advanceTo(24_000); // the tick at 20 s is skipped
      h.leases.answerHung(); // answered at 24 s: valid until 10 s + ttl - margin = 35 s
      await h.keeper.idle();
      await h.advanceTo(26_000); // past the first grant's deadline (25 s)
      assert.deepEqual(h.events, [`0 acquired ${lobby} 1`]);
      await h.advanceTo(34_999); // the tick at 30 s hangs
      assert.deepEqual(h.events, [`0 acquired ${lobby} 1`]);
      await h.advanceTo(35_000);
      assert.deepEqual(h.events, [`0 acquired ${lobby} 1`, `35000 lost ${lobby}`]);
      h.leases.failHung();
      await h.keeper.idle();
      await h.keeper.stop();
    }));

  it("gives the new grant to the owner after onLost when the token changed", () =>
    withEnv(makeEnv, async (env) => {
      const lobby = groupResource(env.unique("lobby"));
      const h = await harness(env, [lobby]);
      h.keeper.start();
      await h.step(0);
      await h.kv.delete(leaseKey(lobby)); // the lease vanished (expired) and the next tick takes a new token
      await h.step(RENEW_MS);
      assert.deepEqual(h.events, [`0 acquired ${lobby} 1`, `${RENEW_MS} lost ${lobby}`, `${RENEW_MS} acquired ${lobby} 2`]);
      assert.equal(h.keeper.lease(lobby)?.fencingToken, 2);
      await h.keeper.stop();
    }));

  it("ensureCurrent through the keeper fires onLost before the caller sees LEASE_LOST", () =>
    withEnv(makeEnv, async (env) => {
      const lobby = groupResource(env.unique("lobby"));
      const h = await harness(env, [lobby]);
      h.keeper.start();
      await h.step(0);
      const lease = h.keeper.lease(lobby)!;
      await h.keeper.ensureCurrent(lease);
      await h.kv.set(leaseKey(lobby), "c-other|9", { ttlMs: TTL_MS });
      await assert.rejects(h.keeper.ensureCurrent(lease), (error: unknown) => {
        assert.ok(error instanceof LeaseLostError);
        assert.equal(h.events.at(-1), `0 lost ${lobby}`, "onLost already fired");
        return true;
      });
      assert.equal(h.keeper.lease(lobby), undefined);
      await h.keeper.stop();
    }));

  it("releases a lease whose resource is no longer wanted, after onLost", () =>
    withEnv(makeEnv, async (env) => {
      const [lobby, bedwars] = [groupResource(env.unique("lobby")), groupResource(env.unique("bedwars"))];
      const h = await harness(env, [lobby, bedwars]);
      h.keeper.start();
      await h.step(0);
      h.wanted.splice(h.wanted.indexOf(bedwars), 1); // the group was deleted
      await h.step(RENEW_MS);
      assert.equal(h.events.at(-1), `${RENEW_MS} lost ${bedwars}`);
      assert.equal(await h.kv.get(leaseKey(bedwars)), null, "released at once");
      assert.deepEqual(h.keeper.heldResources(), [lobby]);
      await h.keeper.stop();
    }));

  it("keeps renewing held leases when listing the resources fails", () =>
    withEnv(makeEnv, async (env) => {
      const lobby = groupResource(env.unique("lobby"));
      let failing = false;
      const { logger, records } = recordingLogger();
      const h = await harness(env, [], { logger });
      h.wanted.push(lobby);
      const resources = h.wanted;
      const keeper = new LeaseKeeper({
        leases: h.leases,
        resources: () => {
          if (failing) throw new Error("document store down");
          return resources;
        },
        leaseTtlMs: TTL_MS,
        clock: env.clock,
        logger,
        onAcquired: () => undefined,
        onLost: (resource) => assert.fail(`lost ${resource}`),
      });
      keeper.start();
      h.clock.advance(0);
      await keeper.idle();
      failing = true;
      for (let i = 0; i < 6; i++) {
        h.clock.advance(RENEW_MS);
        await keeper.idle();
      }
      assert.deepEqual(keeper.heldResources(), [lobby]);
      assert.ok(records.some((r) => r.level === "WARN" && /Listing the resources/.test(r.message)));
      await keeper.stop();
    }));

  it("works on at most resourcesPerTickMax resources per tick, renewals first, the rest in rotation", () =>
    withEnv(makeEnv, async (env) => {
      const wanted = Array.from({ length: 7 }, (_, i) => groupResource(env.unique(`g${i}`)));
      const other = new KvLeases({ kv: await env.connect(), controllerId: "c-other", leaseTtlMs: TTL_MS });
      for (const resource of wanted.slice(0, 3)) await other.acquire(resource);
      const h = await harness(env, wanted, { resourcesPerTickMax: 3 });
      h.keeper.start();
      await h.step(0);
      assert.equal(h.leases.calls, 3);
      assert.deepEqual(h.keeper.heldResources(), [], "the first three are held by another controller");
      await h.step(RENEW_MS);
      assert.equal(h.leases.calls, 6);
      assert.deepEqual(h.keeper.heldResources().sort(), wanted.slice(3, 6).sort(), "the rotation moved on");
      for (let i = 0; i < 4; i++) await h.step(RENEW_MS);
      assert.equal(h.leases.calls, 6 + 4 * 3, "three requests per tick, no more");
      assert.deepEqual(h.keeper.heldResources().sort(), wanted.slice(3, 6).sort(), "never more leases than one tick renews");
      await h.keeper.stop();
    }));

  it("stop fires onLost for every held lease, then releases them for a peer to take at once", () =>
    withEnv(makeEnv, async (env) => {
      const [lobby, bedwars] = [groupResource(env.unique("lobby")), groupResource(env.unique("bedwars"))];
      const h = await harness(env, [lobby, bedwars]);
      h.keeper.start();
      await h.step(0);
      await h.keeper.stop();
      assert.deepEqual(h.events.slice(2).sort(), [`0 lost ${bedwars}`, `0 lost ${lobby}`]);
      assert.equal(h.clock.pendingTimers(), 0, "no timer left behind");
      const peer = new KvLeases({ kv: await env.connect(), controllerId: "c-peer", leaseTtlMs: TTL_MS });
      assert.equal((await peer.acquire(lobby))?.fencingToken, 2);
    }));

  it("stop with release false leaves the leases to expire", () =>
    withEnv(makeEnv, async (env) => {
      const lobby = groupResource(env.unique("lobby"));
      const h = await harness(env, [lobby]);
      h.keeper.start();
      await h.step(0);
      await h.keeper.stop({ release: false });
      assert.equal(h.events.at(-1), `0 lost ${lobby}`);
      assert.equal(await h.kv.get(leaseKey(lobby)), "c-keeper|1");
    }));

  it("two keepers over one store: one holds each resource; the survivor takes over after the TTL with a higher token", () =>
    withEnv(makeEnv, async (env) => {
      const lobby = groupResource(env.unique("lobby"));
      const a = await harness(env, [lobby], { controllerId: "c-a" });
      const b = await harness(env, [lobby], { controllerId: "c-b" });
      a.keeper.start();
      await a.step(0);
      b.keeper.start();
      await a.step(0);
      await b.keeper.idle();
      assert.deepEqual(a.keeper.heldResources(), [lobby]);
      assert.deepEqual(b.keeper.heldResources(), []);
      await a.keeper.stop({ release: false }); // a dies without releasing
      await a.kv.delete(leaseKey(lobby)); // its key runs out (the TTL elapses)
      a.clock.advance(RENEW_MS);
      await b.keeper.idle();
      assert.deepEqual(b.keeper.heldResources(), [lobby]);
      assert.equal(b.keeper.lease(lobby)?.fencingToken, 2);
      await b.keeper.stop();
    }));

  it("isolates a throwing callback", () =>
    withEnv(makeEnv, async (env) => {
      const lobby = groupResource(env.unique("lobby"));
      const { logger, records } = recordingLogger();
      const h = await harness(env, [lobby], {
        logger,
        onAcquired: () => {
          throw new Error("owner failed");
        },
      });
      h.keeper.start();
      await h.step(0);
      assert.deepEqual(h.keeper.heldResources(), [lobby]);
      assert.ok(records.some((r) => r.level === "ERROR" && /onAcquired callback/.test(r.message)));
      await h.keeper.stop();
    }));
});

describe("LeaseKeeper options", () => {
  const base = () => ({
    leases: new AlwaysOwnedLeases("c1"),
    resources: () => [],
    clock: new FakeClock(0),
    onAcquired: () => undefined,
    onLost: () => undefined,
  });

  it("refuses timings that leave no renewal before the local deadline", () => {
    assert.throws(() => new LeaseKeeper({ ...base(), leaseTtlMs: 30_000, renewIntervalMs: 26_000, safetyMarginMs: 5_000 }), AssertionError);
    assert.throws(() => new LeaseKeeper({ ...base(), leaseTtlMs: 30_000, safetyMarginMs: 0 }), AssertionError);
    assert.throws(() => new LeaseKeeper({ ...base(), leaseTtlMs: 30_000, resourcesPerTickMax: 0 }), AssertionError);
    new LeaseKeeper({ ...base(), leaseTtlMs: 30_000 });
  });

  it("with development leases holds every resource at token 0 and never loses one", async () => {
    const clock = new FakeClock(0);
    const acquired: string[] = [];
    const keeper = new LeaseKeeper({
      ...base(),
      clock,
      leaseTtlMs: TTL_MS,
      resources: () => ["group:a", "group:b"],
      onAcquired: (resource, lease) => acquired.push(`${resource} ${lease.fencingToken}`),
      onLost: (resource) => assert.fail(`lost ${resource}`),
    });
    keeper.start();
    for (let i = 0; i < 10; i++) {
      clock.advance(i === 0 ? 0 : RENEW_MS);
      await keeper.idle();
    }
    assert.deepEqual(acquired, ["group:a 0", "group:b 0"]);
    await keeper.stop({ release: false });
  });
});
