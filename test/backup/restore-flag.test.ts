// The restore maintenance flag is held like a lock: the restoring controller's work gets a signal
// that fires when the flag is lost (flushed from the key-value store, or not renewed within its
// TTL), and an interrupted restore raises no generation and writes nothing more. Over the
// in-memory store on a fake clock.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { RESTORE_GENERATION_KEY, RESTORE_MAINTENANCE_KEY, RestoreCoordination } from "../../src/backup/restore-coordination.js";
import { ApiError } from "../../src/shared/errors.js";
import { MemoryKvStore } from "../../src/store/memory/memory-kv-store.js";
import { FakeClock } from "../support/fake-clock.js";
import { recordingLogger } from "../scheduler/support.js";

const ttlMs = 6_000;

function coordination(kv: MemoryKvStore, clock: FakeClock) {
  const hooks = { paused: 0, resumed: 0 };
  const restore = new RestoreCoordination({
    kv,
    controllerId: "c1",
    clock,
    logger: recordingLogger(),
    quietTimeoutMs: 1_000,
    maintenanceTtlMs: ttlMs,
    hooks: {
      pause: async () => void hooks.paused++,
      resume: async () => void hooks.resumed++,
      reloadAuth: () => undefined,
    },
  });
  return { restore, hooks };
}

describe("restore maintenance flag", () => {
  it("a restore keeps its flag for many TTLs while it works, and lifts it after", async () => {
    const clock = new FakeClock(1_000_000);
    const kv = new MemoryKvStore({ clock });
    const { restore, hooks } = coordination(kv, clock);
    let signal!: AbortSignal;
    let finish!: () => void;
    const running = restore.run("b1", async (s) => {
      signal = s;
      await new Promise<void>((resolve) => (finish = resolve));
      return "restored";
    });
    while (!signal) await clock.advanceAsync(10);
    for (let i = 0; i < 10; i++) await clock.advanceAsync(ttlMs / 2);
    assert.equal(signal.aborted, false);
    assert.notEqual(await kv.get(RESTORE_MAINTENANCE_KEY), null);
    finish();
    assert.equal(await running, "restored");
    assert.equal(await kv.get(RESTORE_MAINTENANCE_KEY), null);
    assert.equal(await kv.get(RESTORE_GENERATION_KEY), "1");
    assert.deepEqual(hooks, { paused: 1, resumed: 1 });
  });

  it("a flag lost under the restore (a flushed store) fires the work's signal: the restore stops with 503 RESTORE_INTERRUPTED and raises no generation", async () => {
    const clock = new FakeClock(1_000_000);
    const kv = new MemoryKvStore({ clock });
    const { restore } = coordination(kv, clock);
    const batchesWritten: number[] = [];
    let entered = false;
    const running = restore.run("b2", async (signal) => {
      entered = true;
      // An import in batches that checks the signal before each one, as applyBundle does.
      for (let batch = 0; batch < 100; batch++) {
        signal.throwIfAborted();
        batchesWritten.push(batch);
        await new Promise<void>((resolve) => clock.setTimeout(resolve, 100));
      }
    });
    const outcome = running.then(
      () => null,
      (err: unknown) => err,
    );
    while (!entered) await clock.advanceAsync(10);
    await clock.advanceAsync(500);
    await kv.delete(RESTORE_MAINTENANCE_KEY);
    const deleted = batchesWritten.length;
    for (let i = 0; i < 40; i++) await clock.advanceAsync(100);
    const err = await outcome;
    assert.ok(err instanceof ApiError, String(err));
    assert.equal(err.status, 503);
    assert.equal(err.code, "RESTORE_INTERRUPTED");
    assert.ok(batchesWritten.length <= deleted + ttlMs / 3 / 100 + 1, `stopped within one renewal interval (${deleted} → ${batchesWritten.length} batches)`);
    assert.ok(batchesWritten.length < 100);
    assert.equal(await kv.get(RESTORE_GENERATION_KEY), null, "an interrupted restore raises no generation");
  });
});
