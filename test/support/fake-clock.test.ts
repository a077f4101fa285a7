import { strict as assert } from "node:assert";
import { test } from "node:test";
import { FakeClock } from "./fake-clock.js";

test("fake clock: timers run in due order at their due time, intervals repeat, cancel stops them", () => {
  const clock = new FakeClock(1_000);
  const seen: string[] = [];
  clock.setTimeout(() => seen.push(`b@${clock.nowMs()}`), 20);
  clock.setTimeout(() => seen.push(`a@${clock.nowMs()}`), 10);
  const tick = clock.setInterval(() => seen.push(`i@${clock.nowMs()}`), 15);
  const never = clock.setTimeout(() => seen.push("never"), 5);
  never.cancel();
  clock.advance(9);
  assert.deepEqual(seen, []);
  clock.advance(21);
  assert.deepEqual(seen, ["a@1010", "i@1015", "b@1020", "i@1030"]);
  tick.cancel();
  clock.advance(100);
  assert.equal(seen.length, 4);
  assert.equal(clock.nowMs(), 1_130);
  assert.equal(clock.pendingTimers(), 0);
});

test("fake clock: a timer set by a callback runs in the same advance when due within it", () => {
  const clock = new FakeClock();
  const seen: number[] = [];
  clock.setTimeout(() => {
    seen.push(clock.nowMs());
    clock.setTimeout(() => seen.push(clock.nowMs()), 10);
  }, 10);
  clock.advance(25);
  assert.deepEqual(seen, [10, 20]);
});

test("fake clock: advanceAsync lets awaited work between timers run", async () => {
  const clock = new FakeClock();
  const seen: number[] = [];
  const sleep = (ms: number) => new Promise<void>((resolve) => clock.setTimeout(resolve, ms));
  const loop = (async () => {
    for (let i = 0; i < 3; i++) {
      await sleep(100);
      seen.push(clock.nowMs());
    }
  })();
  await clock.advanceAsync(300);
  await loop;
  assert.deepEqual(seen, [100, 200, 300]);
});
