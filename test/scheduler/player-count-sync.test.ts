// The owner follows the player registry: every interval, and at once for the instances it is told
// of, it reads the counts of the instances it supervises and applies those that differ from its
// view; instances another controller supervises are left to it; a failed read waits for the next
// pass.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { InstanceState } from "../../src/domain/instances/instance-schemas.js";
import { LiveInstances } from "../../src/scheduler/live-instances.js";
import { PlayerCountSync } from "../../src/scheduler/player-count-sync.js";
import { SupervisedInstances } from "../../src/scheduler/supervised-instances.js";
import { FakeClock } from "../support/fake-clock.js";
import { recordingLogger } from "./support.js";

describe("PlayerCountSync", () => {
  const setup = () => {
    const clock = new FakeClock(Date.parse("2026-06-01T12:00:00Z"));
    const live = new LiveInstances();
    const supervised = new SupervisedInstances();
    const registry = new Map<string, number>();
    const applied: string[] = [];
    const reads: string[][] = [];
    let failReads = false;
    const logger = recordingLogger();
    const add = (id: string, playerCount: number, owned: boolean, state: InstanceState = "RUNNING") => {
      live.put({ id, group: "lobby", node: "a", port: 30000 + live.size, memoryMb: 256, state, playerCount });
      if (owned) supervised.follow(id, state);
    };
    const sync = new PlayerCountSync({
      supervised,
      live,
      clock,
      logger,
      intervalMs: 2_000,
      counts: async (ids) => {
        reads.push([...ids]);
        if (failReads) throw new Error("registry unreachable");
        return new Map(ids.filter((id) => registry.has(id)).map((id) => [id, registry.get(id)!]));
      },
      apply: async (id, count) => {
        applied.push(`${id}=${count}`);
        live.setPlayerCount(id, count);
      },
    });
    return { clock, registry, applied, reads, add, sync, logger, fail: (v: boolean) => (failReads = v) };
  };

  test("each interval applies the owned instances whose registry count differs from the view", async () => {
    const { clock, registry, applied, reads, add, sync } = setup();
    add("own-1", 3, true);
    add("own-2", 2, true, "DRAINING");
    add("own-3", 1, true);
    add("peer-1", 5, false);
    registry.set("own-1", 3).set("own-2", 0).set("peer-1", 7);
    sync.start();
    await clock.advanceAsync(1_999);
    assert.deepEqual(applied, []);
    await clock.advanceAsync(1);
    await sync.sweep();
    assert.deepEqual(applied.sort(), ["own-2=0"], "own-1 agrees; own-3 is unknown to the registry (left as it is); peer-1 is not ours");
    assert.ok(!reads.flat().includes("peer-1"));
    await clock.advanceAsync(2_000);
    await sync.sweep();
    registry.set("own-3", 0);
    await clock.advanceAsync(2_000);
    await sync.sweep();
    assert.deepEqual(applied.sort(), ["own-2=0", "own-3=0"], "own-3's roster, once known, is applied");
    await sync.stop();
  });

  test("refresh reads only the named instances supervised here; a failed pass is logged and the next one repairs", async () => {
    const { registry, applied, reads, add, sync, logger, fail } = setup();
    add("own-1", 0, true);
    add("peer-1", 0, false);
    registry.set("own-1", 4).set("peer-1", 4);
    await sync.refresh(["own-1", "peer-1", "gone"]);
    assert.deepEqual(reads, [["own-1"]]);
    assert.deepEqual(applied, ["own-1=4"]);
    registry.set("own-1", 1);
    fail(true);
    await sync.sweep();
    assert.equal(logger.warnings.length, 1);
    fail(false);
    await sync.sweep();
    assert.deepEqual(applied, ["own-1=4", "own-1=1"]);
  });
});
