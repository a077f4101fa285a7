import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { FakeClock } from "../support/fake-clock.js";
import { CrashLoopDetector, defaultCrashLoopOptions } from "../../src/scheduler/crash-loop.js";

const secondMs = 1_000;

describe("CrashLoopDetector", () => {
  test("3 crashes within 300 s trip once, with the window start", () => {
    const clock = new FakeClock(1_000_000);
    const detector = new CrashLoopDetector(defaultCrashLoopOptions, clock);
    assert.deepEqual(detector.recordCrash("lobby"), { tripped: false, crashCount: 1, windowStartMs: 1_000_000 });
    clock.advance(100 * secondMs);
    assert.equal(detector.recordCrash("lobby").tripped, false);
    clock.advance(199 * secondMs);
    assert.deepEqual(detector.recordCrash("lobby"), { tripped: true, crashCount: 3, windowStartMs: 1_000_000 });
    assert.equal(detector.crashCount("lobby"), 0, "tripping clears the window");
    clock.advance(secondMs);
    assert.equal(detector.recordCrash("lobby").tripped, false, "the next crash starts a new window");
  });

  test("crashes slide out of the window: exactly 300 s old no longer counts", () => {
    const clock = new FakeClock(0);
    const detector = new CrashLoopDetector(defaultCrashLoopOptions, clock);
    detector.recordCrash("lobby");
    clock.advance(150 * secondMs);
    detector.recordCrash("lobby");
    clock.advance(150 * secondMs);
    const third = detector.recordCrash("lobby");
    assert.deepEqual(third, { tripped: false, crashCount: 2, windowStartMs: 150 * secondMs });
    clock.advance(149 * secondMs);
    assert.equal(detector.recordCrash("lobby").tripped, true);
  });

  test("groups are independent; reset forgets a group's window", () => {
    const clock = new FakeClock(0);
    const detector = new CrashLoopDetector({ crashLoopThreshold: 2, crashLoopWindowMs: 60 * secondMs }, clock);
    detector.recordCrash("a");
    detector.recordCrash("b");
    detector.reset("a");
    assert.equal(detector.recordCrash("a").tripped, false);
    assert.equal(detector.recordCrash("b").tripped, true);
  });

  test("threshold 1 trips on every crash; bad settings are refused", () => {
    const detector = new CrashLoopDetector({ crashLoopThreshold: 1, crashLoopWindowMs: 1 }, new FakeClock(5));
    assert.deepEqual(detector.recordCrash("x"), { tripped: true, crashCount: 1, windowStartMs: 5 });
    assert.throws(() => new CrashLoopDetector({ crashLoopThreshold: 0, crashLoopWindowMs: 1 }, new FakeClock()));
    assert.throws(() => new CrashLoopDetector({ crashLoopThreshold: 3, crashLoopWindowMs: 0 }, new FakeClock()));
  });

  test("memory stays bounded: at most threshold times per group, quiet groups pruned", () => {
    const clock = new FakeClock(0);
    const detector = new CrashLoopDetector({ crashLoopThreshold: 1_000, crashLoopWindowMs: 10 * secondMs }, clock);
    for (let g = 0; g < 100; g++) detector.recordCrash(`g${g}`);
    assert.equal(detector.prune(), 100);
    clock.advance(10 * secondMs);
    assert.equal(detector.prune(), 0);
  });
});
