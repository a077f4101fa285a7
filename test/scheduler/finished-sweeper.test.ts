// The finished sweeper alone, on the real services and the fake clock: finished records older than
// the retention go (from the store and the live view), a STATIC group's slot records and another
// controller's records stay, every stored group is tracked, and a deleted group is untracked once
// its instances finished. The sweep runs on the clock's interval.
import assert from "node:assert/strict";
import { after, before, beforeEach, describe, test } from "node:test";
import { isoFromMs } from "../../src/domain/shared/time.js";
import { ScopeLostError } from "../../src/scheduler/scopes.js";
import { FinishedSweeper } from "../../src/scheduler/finished-sweeper.js";
import { LiveInstances } from "../../src/scheduler/live-instances.js";
import { instanceRecord, openSchedulerFixture, type SchedulerFixture } from "./support.js";

const retentionMs = 600_000;

describe("finished sweeper", () => {
  let fx: SchedulerFixture;
  let live: LiveInstances;
  let tracked: Set<string>;
  let untracked: string[];
  let owned: Set<string>;
  let pending: Promise<unknown>[];
  let sweeper: FinishedSweeper;
  let n = 0;
  let suffix = "";

  before(async () => {
    fx = await openSchedulerFixture("cloud-sweeper-");
  });
  after(() => fx.close());

  beforeEach(() => {
    suffix = String(++n);
    live = new LiveInstances();
    tracked = new Set();
    untracked = [];
    owned = new Set();
    pending = [];
    sweeper = new FinishedSweeper({
      groups: fx.groups,
      instances: fx.instances,
      scopes: { track: (g) => void tracked.add(g), untrack: (g) => void untracked.push(g) },
      live,
      clock: fx.clock,
      finishedRetentionMs: retentionMs,
      evaluationIntervalMs: 15_000,
      isOwned: (g) => owned.has(g),
      ensureCurrent: async (g) => {
        if (!owned.has(g)) throw new ScopeLostError(`group:${g}`);
      },
      track: (work) => void pending.push(work),
    });
  });

  async function finished(id: string, group: string, state: "STOPPED" | "CRASHED", endedAgoMs: number): Promise<void> {
    const record = instanceRecord({ id, group, node: "node-a", state, stoppedAt: isoFromMs(fx.clock.nowMs() - endedAgoMs) });
    await fx.instances.save(record);
    live.put(record);
  }
  const ids = async (group: string) => (await fx.instances.findDocs({ group })).map((d) => d.id).sort();

  test("a delete is fenced: a scope lost after the read deletes nothing, a record written since the read stays", async () => {
    const dyn = `fenced${suffix}`;
    await fx.groups.create({ name: dyn, platform: "simulated", scalingMode: "DYNAMIC", minInstances: 0, maxInstances: 4 });
    await finished(`${dyn}-old`, dyn, "STOPPED", retentionMs + 1);
    await finished(`${dyn}-rewritten`, dyn, "STOPPED", retentionMs + 1);
    owned.add(dyn);
    const stale = new FinishedSweeper({
      groups: fx.groups,
      instances: {
        findRevisioned: (filter) => fx.instances.findRevisioned(filter),
        findDocs: (filter) => fx.instances.findDocs(filter),
        removeIf: async (id, rev) => {
          // Between the sweeper's read and its delete, the record is written again (a STATIC-like reuse, a repair).
          if (id === `${dyn}-rewritten`) await fx.instances.save((await fx.instances.getDoc(id))!);
          return fx.instances.removeIf(id, rev);
        },
      },
      scopes: { track: () => undefined, untrack: () => undefined },
      live,
      clock: fx.clock,
      finishedRetentionMs: retentionMs,
      evaluationIntervalMs: 15_000,
      isOwned: () => true,
      ensureCurrent: async (g) => {
        if (!owned.has(g)) throw new ScopeLostError(`group:${g}`);
      },
      track: () => undefined,
    });
    await stale.sweep();
    assert.deepEqual(await ids(dyn), [`${dyn}-rewritten`]);
    await finished(`${dyn}-later`, dyn, "STOPPED", retentionMs + 1);
    owned.delete(dyn); // the scope moved; the in-memory view has not caught up yet
    await stale.sweep();
    assert.deepEqual(await ids(dyn), [`${dyn}-later`, `${dyn}-rewritten`], "the check after the read refused the delete");
  });

  test("finished records past the retention go, from the store and the live view; STATIC slots and others' records stay", async () => {
    const dyn = `dyn${suffix}`;
    const stat = `stat${suffix}`;
    const others = `others${suffix}`;
    await fx.groups.create({ name: dyn, platform: "simulated", scalingMode: "DYNAMIC", minInstances: 0, maxInstances: 4 });
    await fx.groups.create({ name: stat, platform: "simulated", scalingMode: "STATIC", minInstances: 2 });
    await fx.groups.create({ name: others, platform: "simulated", scalingMode: "DYNAMIC", minInstances: 0, maxInstances: 4 });
    owned.add(dyn).add(stat);
    await finished(`${dyn}-old`, dyn, "CRASHED", retentionMs + 1);
    await finished(`${dyn}-stopped-old`, dyn, "STOPPED", retentionMs);
    await finished(`${dyn}-recent`, dyn, "STOPPED", retentionMs - 1);
    await finished(`${stat}-1`, stat, "CRASHED", 10 * retentionMs);
    await finished(`${stat}-extra`, stat, "CRASHED", 10 * retentionMs);
    await finished(`${others}-old`, others, "CRASHED", 10 * retentionMs);
    await fx.instances.save(instanceRecord({ id: `${dyn}-live`, group: dyn, node: "node-a", state: "RUNNING" }));
    await sweeper.sweep();
    assert.deepEqual(await ids(dyn), [`${dyn}-live`, `${dyn}-recent`]);
    assert.equal(live.get(`${dyn}-old`), undefined);
    assert.deepEqual(await ids(stat), [`${stat}-1`], "the slot's record says where its directory is");
    assert.deepEqual(await ids(others), [`${others}-old`], "another controller sweeps its groups");
    assert.ok(
      [dyn, stat, others].every((g) => tracked.has(g)),
      "every stored group is tracked",
    );
  });

  test("a deleted group: its records are anyone's to sweep, its scope untracked once its instance records finished", async () => {
    const gone = `gone${suffix}`;
    await fx.groups.create({ name: gone, platform: "simulated", scalingMode: "DYNAMIC", minInstances: 0, maxInstances: 4 });
    await finished(`${gone}-a`, gone, "STOPPED", retentionMs + 1);
    const stopping = instanceRecord({ id: `${gone}-b`, group: gone, node: "node-a", state: "STOPPING" });
    await fx.instances.save(stopping);
    live.put(stopping);
    await fx.groups.delete(gone);
    sweeper.groupDeleted(gone);
    await sweeper.sweep();
    assert.deepEqual(await ids(gone), [`${gone}-b`]);
    assert.deepEqual(untracked, [], "an instance is still stopping");
    // Stopped by whichever controller held the scope: the records decide, not this controller's view.
    await fx.instances.save({ ...stopping, state: "STOPPED", stoppedAt: new Date(fx.clock.nowMs()).toISOString() });
    await sweeper.sweep();
    assert.deepEqual(untracked, [gone]);
    await sweeper.sweep();
    assert.deepEqual(untracked, [gone], "once");
  });

  test("the sweep runs every evaluation interval of the clock until stopped", async () => {
    const dyn = `tick${suffix}`;
    await fx.groups.create({ name: dyn, platform: "simulated", scalingMode: "DYNAMIC", minInstances: 0, maxInstances: 4 });
    owned.add(dyn);
    sweeper.start();
    await finished(`${dyn}-1`, dyn, "CRASHED", retentionMs - 20_000);
    await fx.clock.advanceAsync(15_000);
    await Promise.all(pending);
    assert.deepEqual(await ids(dyn), [`${dyn}-1`], "not old enough at the first sweep");
    await fx.clock.advanceAsync(15_000);
    await Promise.all(pending);
    assert.deepEqual(await ids(dyn), [], "gone at the second");
    assert.equal(pending.length, 2);
    sweeper.stop();
    await fx.clock.advanceAsync(60_000);
    assert.equal(pending.length, 2, "no sweep after stop");
  });
});
