// Lease keepers with a fair share over one store: resources spread over the live controllers, a
// stopped or dead controller's resources taken by the others, a joining controller given some
// without a storm, and no resource left unowned by the share rule for longer than a lease TTL.
// Over the memory store and a real Redis, with real presence entries.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ControllerPresence } from "../../src/coordination/controller-presence.js";
import { FairShare, GIFT_BACKOFF_TICKS } from "../../src/coordination/fair-share.js";
import { controllerPresenceKey, CONTROLLER_PRESENCE_PREFIX, groupResource } from "../../src/coordination/keys.js";
import { KvLeases } from "../../src/coordination/kv-leases.js";
import { LeaseKeeper, type KeeperShare } from "../../src/coordination/lease-keeper.js";
import type { KvStore } from "../../src/store/ports.js";
import { describeEachKv, recordingLogger, withEnv, type KvEnvironment } from "./support.js";

/** Long enough in real time for the Redis variant on a loaded machine (renewals run on the fake clock). */
const TTL_MS = 3_000;
const RENEW_MS = TTL_MS / 3;

interface Member {
  id: string;
  kv: KvStore;
  leases: KvLeases;
  presence: ControllerPresence;
  keeper: LeaseKeeper;
  lost: string[];
}

class Cluster {
  readonly members: Member[] = [];
  constructor(
    readonly env: KvEnvironment,
    readonly wanted: string[],
  ) {}

  /** A controller: its presence claimed, its keeper started (the first tick runs at the next step). */
  async join(name: string, share: (m: Omit<Member, "keeper" | "lost">) => KeeperShare = shareOf): Promise<Member> {
    const kv = await this.env.connect();
    const id = this.env.unique(name);
    const leases = new KvLeases({ kv, controllerId: id, leaseTtlMs: TTL_MS });
    const presence = new ControllerPresence({ kv, controllerId: id, ttlMs: TTL_MS, schedules: true, clock: this.env.clock, logger: recordingLogger().logger });
    await presence.claim();
    const lost: string[] = [];
    const keeper = new LeaseKeeper({
      leases,
      resources: () => this.wanted,
      leaseTtlMs: TTL_MS,
      clock: this.env.clock,
      onAcquired: () => undefined,
      onLost: (resource) => lost.push(resource),
      share: share({ id, kv, leases, presence }),
    });
    const member = { id, kv, leases, presence, keeper, lost };
    this.members.push(member);
    keeper.start();
    return member;
  }

  /** Moves time by `ms` (the ticks and renewals due run) and waits for every tick it started. */
  async step(ms = RENEW_MS): Promise<void> {
    this.env.clock.advance(ms);
    await this.idle();
  }

  async idle(): Promise<void> {
    for (let round = 0; round < 3; round++) {
      await Promise.all(this.members.map(async (m) => Promise.all([m.keeper.idle(), m.presence.idle()])));
      await new Promise((resolve) => setImmediate(resolve));
    }
  }

  /** How many resources each running member holds (by its keeper), in join order. */
  counts(members = this.members): number[] {
    return members.map((m) => m.keeper.heldResources().length);
  }

  /** Resources whose lease nobody holds in the store. */
  async unowned(): Promise<string[]> {
    const free: string[] = [];
    for (const resource of this.wanted) if ((await this.members[0].leases.holder(resource)) === null) free.push(resource);
    return free;
  }

  async stopAll(): Promise<void> {
    for (const m of this.members) {
      await m.keeper.stop();
      await m.presence.stop();
    }
    const kv = await this.env.connect();
    for (const key of await kv.keys(CONTROLLER_PRESENCE_PREFIX)) await kv.delete(key);
  }
}

const shareOf = (m: Omit<Member, "keeper" | "lost">): KeeperShare => ({
  liveControllers: () => m.presence.liveControllers(),
  holder: (resource) => m.leases.holder(resource),
  standDown: () => m.presence.lost(),
});

/** Steps until `done` (checked after each step) or fails after `stepsMax`; returns the steps taken. */
async function stepUntil(
  cluster: Cluster,
  done: () => boolean | Promise<boolean>,
  stepsMax: number,
  what: string,
  each?: () => Promise<void>,
): Promise<number> {
  for (let steps = 1; steps <= stepsMax; steps++) {
    await cluster.step();
    await each?.();
    if (await done()) return steps;
  }
  throw new Error(`${what}: not within ${stepsMax} ticks (counts ${cluster.counts().join("/")})`);
}

/** Records, after each step, how many consecutive steps each resource has been without holder; returns the longest. */
function unownedTracker(cluster: Cluster): { check: () => Promise<void>; longestTicks: () => number } {
  const streak = new Map<string, number>();
  let longest = 0;
  return {
    check: async () => {
      const free = new Set(await cluster.unowned());
      for (const resource of cluster.wanted) {
        const run = free.has(resource) ? (streak.get(resource) ?? 0) + 1 : 0;
        streak.set(resource, run);
        longest = Math.max(longest, run);
      }
    },
    longestTicks: () => longest,
  };
}

const resources = (env: KvEnvironment, count: number) => Array.from({ length: count }, (_, i) => groupResource(env.unique(`g${i}`)));
const clearPresence = async (env: KvEnvironment) => {
  const kv = await env.connect();
  for (const key of await kv.keys(CONTROLLER_PRESENCE_PREFIX)) await kv.delete(key);
};

describeEachKv("LeaseKeeper with a fair share", (makeEnv) => {
  it("three keepers and six resources: each holds two after a few ticks, and it stays so", () =>
    withEnv(makeEnv, async (env) => {
      await clearPresence(env);
      const cluster = new Cluster(env, resources(env, 6));
      for (const name of ["a", "b", "c"]) await cluster.join(name);
      await cluster.idle();
      const tracker = unownedTracker(cluster);
      await stepUntil(cluster, () => cluster.counts().every((n) => n === 2), 8, "two each", tracker.check);
      const lostBefore = cluster.members.map((m) => m.lost.length);
      for (let i = 0; i < 6; i++) await cluster.step();
      assert.deepEqual(cluster.counts(), [2, 2, 2], "stable");
      assert.deepEqual(
        cluster.members.map((m) => m.lost.length),
        lostBefore,
        "nothing moves once balanced",
      );
      assert.deepEqual(await cluster.unowned(), []);
      assert.ok(tracker.longestTicks() <= 2, `a resource was unowned for ${tracker.longestTicks()} ticks`);
      await cluster.stopAll();
    }));

  it("a keeper that stops: the two others take its resources and hold three each", () =>
    withEnv(makeEnv, async (env) => {
      await clearPresence(env);
      const cluster = new Cluster(env, resources(env, 6));
      for (const name of ["a", "b", "c"]) await cluster.join(name);
      await stepUntil(cluster, () => cluster.counts().every((n) => n === 2), 8, "two each");
      const [a, b, c] = cluster.members;
      await c.keeper.stop();
      await c.presence.stop();
      cluster.members.pop();
      const tracker = unownedTracker(cluster);
      await stepUntil(cluster, () => cluster.counts([a, b]).every((n) => n === 3), 4, "three each", tracker.check);
      assert.deepEqual(await cluster.unowned(), []);
      assert.ok(tracker.longestTicks() <= 1, `a resource was unowned for ${tracker.longestTicks()} ticks`);
      await cluster.stopAll();
    }));

  it("a keeper that dies without releasing: its resources are owned again at most one tick after its leases expire", () =>
    withEnv(makeEnv, async (env) => {
      await clearPresence(env);
      const cluster = new Cluster(env, resources(env, 6));
      for (const name of ["a", "b", "c"]) await cluster.join(name);
      await stepUntil(cluster, () => cluster.counts().every((n) => n === 2), 8, "two each");
      const [a, b, c] = cluster.members;
      // It dies: its keeper first, its presence entry one renewal later (their timers run apart);
      // its leases and its entry stay in the store until they expire.
      const lostBefore = a.lost.length + b.lost.length;
      await c.keeper.stop({ release: false });
      await cluster.step();
      (c.presence as unknown as { timer: { cancel(): void } }).timer.cancel();
      cluster.members.pop();
      // Time passes in steps of a quarter tick: the survivors keep renewing (in real time too on Redis).
      const quarterMs = RENEW_MS / 4;
      let freeSteps = 0;
      let freeStepsMax = 0;
      for (let passed = 0; passed < TTL_MS + 2 * RENEW_MS; passed += quarterMs) {
        await env.expire(quarterMs);
        await cluster.idle();
        freeSteps = (await cluster.unowned()).length > 0 ? freeSteps + 1 : 0;
        freeStepsMax = Math.max(freeStepsMax, freeSteps);
      }
      assert.equal(a.lost.length + b.lost.length, lostBefore, "the survivors kept their leases");
      assert.deepEqual(await cluster.unowned(), []);
      // Its entry missed a renewal long before its leases expired: the survivors' share is already
      // three, and they take the leases at their next tick. On Redis the store expires keys in real
      // time, which runs apart from the fake clock of the ticks: there the bound is the lease TTL.
      const boundMs = env.backend === "memory" ? RENEW_MS : TTL_MS;
      assert.ok(freeStepsMax * quarterMs <= boundMs, `a resource was unowned for ${freeStepsMax * quarterMs} ms`);
      await stepUntil(cluster, () => cluster.counts([a, b]).every((n) => n === 3), 6, "three each");
      await cluster.stopAll();
    }));

  it("a keeper that joins gets its share within a bounded number of ticks, one lease given up per tick at most", () =>
    withEnv(makeEnv, async (env) => {
      await clearPresence(env);
      const cluster = new Cluster(env, resources(env, 6));
      const [a, b] = [await cluster.join("a"), await cluster.join("b")];
      await stepUntil(cluster, () => cluster.counts().every((n) => n === 3), 8, "three each");
      const lostBefore = [a.lost.length, b.lost.length];
      await cluster.join("c");
      const tracker = unownedTracker(cluster);
      let lostPerTickMax = 0;
      let previous = [...lostBefore];
      await stepUntil(
        cluster,
        () => cluster.counts().every((n) => n === 2),
        10,
        "two each after the join",
        async () => {
          await tracker.check();
          const now = [a.lost.length, b.lost.length];
          lostPerTickMax = Math.max(lostPerTickMax, ...now.map((n, i) => n - previous[i]));
          previous = now;
        },
      );
      assert.ok(lostPerTickMax <= 1, `a keeper gave up ${lostPerTickMax} leases in one tick`);
      assert.ok(tracker.longestTicks() <= 1, `a resource was unowned for ${tracker.longestTicks()} ticks`);
      await cluster.stopAll();
    }));

  it("a live controller that takes nothing (a stale presence): free resources are still taken within a TTL, and giving leases to it backs off", () =>
    withEnv(makeEnv, async (env) => {
      await clearPresence(env);
      const cluster = new Cluster(env, resources(env, 4));
      const ghost = env.unique("ghost");
      const kv = await env.connect();
      // A presence entry nobody renews within the test and no keeper behind it.
      await kv.set(controllerPresenceKey(ghost), JSON.stringify({ nonce: "n", startedAt: "2026-06-01T00:00:00.000Z", renewals: 0, schedules: true }));
      const a = await cluster.join("a");
      const tracker = unownedTracker(cluster);
      for (let i = 0; i < 4 * GIFT_BACKOFF_TICKS; i++) {
        await cluster.step();
        await tracker.check();
      }
      assert.ok(tracker.longestTicks() <= 3, `a resource was unowned for ${tracker.longestTicks()} ticks (3 ticks = one TTL)`);
      assert.ok(a.lost.length <= 4, `${a.lost.length} leases given up in ${4 * GIFT_BACKOFF_TICKS} ticks: giving must back off`);
      await cluster.stopAll();
    }));

  it("when the live controllers cannot be read, a keeper takes every free resource", () =>
    withEnv(makeEnv, async (env) => {
      await clearPresence(env);
      const cluster = new Cluster(env, resources(env, 4));
      const unreadable = (m: Omit<Member, "keeper" | "lost">): KeeperShare => ({
        ...shareOf(m),
        liveControllers: () => Promise.reject(new Error("store unreachable")),
      });
      await cluster.join("b"); // present, so the share would be two
      cluster.members[0].keeper.stop().catch(() => undefined);
      cluster.members.pop();
      const a = await cluster.join("a", unreadable);
      await cluster.step(0);
      assert.equal(a.keeper.heldResources().length, 4);
      await cluster.stopAll();
    }));

  it("a keeper whose controller id was taken over drops every lease without releasing it", () =>
    withEnv(makeEnv, async (env) => {
      await clearPresence(env);
      const cluster = new Cluster(env, resources(env, 2));
      const a = await cluster.join("a");
      await cluster.step(0);
      assert.equal(a.keeper.heldResources().length, 2);
      await a.kv.set(controllerPresenceKey(a.id), JSON.stringify({ nonce: "another", startedAt: "2026-06-01T00:00:00.000Z", renewals: 0, schedules: true }));
      await cluster.step();
      assert.equal(a.presence.lost(), true);
      assert.deepEqual(a.keeper.heldResources(), []);
      assert.equal(a.lost.length, 2);
      for (const resource of cluster.wanted) assert.equal((await a.leases.holder(resource))?.controllerId, a.id, "still stored: not released");
      await cluster.stopAll();
    }));
});

describe("FairShare plan", () => {
  const view = (over: Partial<Parameters<FairShare["plan"]>[0]> = {}) => ({
    self: "a",
    wanted: ["r1", "r2", "r3", "r4"],
    held: new Set<string>(),
    live: new Set(["a", "b"]),
    holders: new Map<string, string | null>([
      ["r1", null],
      ["r2", null],
      ["r3", null],
      ["r4", null],
    ]),
    complete: true,
    ...over,
  });

  it("share is ceil(wanted / live); free resources are candidates first, overdue after the patience", () => {
    const share = new FairShare();
    const first = share.plan(view());
    assert.equal(first.share, 2);
    assert.deepEqual(first.overdue, []);
    assert.equal(first.candidates.length, 4);
    // b holds nothing and is below its share: a waits one more tick before taking what b left.
    assert.deepEqual(share.plan(view()).overdue, []);
    assert.equal(share.plan(view()).overdue.length, 4);
  });

  it("a lease stored under this keeper's own id (a restart) is taken at once", () => {
    const plan = new FairShare().plan(view({ holders: new Map([["r1", "a"]]) }));
    assert.deepEqual(plan.overdue, ["r1"]);
  });

  it("gives one up only with two more than the fewest, a complete view and nothing free", () => {
    const held = new Set(["r1", "r2", "r3"]);
    const holders = new Map<string, string | null>([["r4", "b"]]);
    assert.equal(new FairShare().plan(view({ held, holders, complete: false })).release, null);
    assert.equal(
      new FairShare().plan(
        view({
          held: new Set(["r1", "r2"]),
          holders: new Map([
            ["r3", "b"],
            ["r4", "b"],
          ]),
        }),
      ).release,
      null,
    );
    assert.equal(new FairShare().plan(view({ held, holders: new Map([["r4", null]]) })).release, null);
    const plan = new FairShare().plan(view({ held, holders }));
    assert.ok(plan.release && held.has(plan.release.resource));
    assert.match(plan.release.reason, /held 3 \(share 2 of 4 over 2 controllers\), b held 1/);
  });
});
