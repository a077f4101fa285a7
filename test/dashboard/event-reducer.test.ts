/**
 * The client-side event state (src/dashboard/live/event-reducer.ts): duplicates by sequence are
 * skipped, the recent list is newest first and bounded, noise types stay out of it, a resync
 * clears it, and instance rows are patched in place only when a state they show changed.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { describeEvent, initialLiveState, patchInstanceRows, RECENT_EVENTS_MAX, reduceEvents, reduceResync } from "../../src/dashboard/live/event-reducer.js";
import { event } from "./fakes.js";

const changed = (sequence: number, instanceId: string, newState: string) =>
  event(sequence, "INSTANCE_STATE_CHANGED", { instanceId, group: "lobby", nodeId: "n1", oldState: "STARTING", newState });

describe("event reducer", () => {
  test("applies events in order, skips duplicates and keeps the newest first", () => {
    let state = reduceEvents(initialLiveState, [event(1), event(2)]);
    state = reduceEvents(state, [event(2), event(3)]);
    assert.equal(state.latestSequence, 3);
    assert.deepEqual(
      state.recent.map((e) => e.sequence),
      [3, 2, 1],
    );
    assert.equal(reduceEvents(state, [event(1), event(3)]), state, "nothing new: the same state object");
  });

  test("the recent list is bounded and leaves out frequent metric events", () => {
    const many = Array.from({ length: RECENT_EVENTS_MAX * 2 }, (_, i) => event(i + 1));
    const state = reduceEvents(initialLiveState, [...many, event(1000, "INSTANCE_METRICS", { instanceId: "x" })]);
    assert.equal(state.recent.length, RECENT_EVENTS_MAX);
    assert.equal(state.recent[0].sequence, RECENT_EVENTS_MAX * 2);
    assert.equal(state.latestSequence, 1000, "a quiet event still moves the sequence");
  });

  test("a resync clears the recent list (it may have a gap) and counts", () => {
    const state = reduceResync(reduceEvents(initialLiveState, [event(1)]), "resync-required");
    assert.deepEqual(state.recent, []);
    assert.equal(state.resyncs, 1);
    assert.equal(state.lastResync, "resync-required");
    assert.equal(reduceResync(reduceEvents(initialLiveState, [event(1)]), "initial").recent.length, 1);
  });

  test("instance rows take their newest state; unrelated batches return the same array", () => {
    const rows = [
      { id: "a", state: "STARTING", group: "lobby" },
      { id: "b", state: "RUNNING", group: "lobby" },
    ];
    const patched = patchInstanceRows(rows, [changed(1, "a", "RUNNING"), changed(2, "a", "STOPPING"), changed(3, "zzz", "RUNNING")]);
    assert.deepEqual(
      patched.map((r) => r.state),
      ["STOPPING", "RUNNING"],
    );
    assert.equal(patched[1], rows[1], "untouched rows keep their identity");
    assert.equal(patchInstanceRows(rows, [event(4), changed(5, "b", "RUNNING")]), rows);
  });

  test("describes events in words", () => {
    assert.equal(describeEvent(changed(1, "lobby-1", "RUNNING")), "lobby-1 (lobby) STARTING → RUNNING");
    assert.equal(
      describeEvent(event(2, "INSTANCE_CRASHED", { instanceId: "x", group: "g", classification: "OUT_OF_MEMORY", exitCode: 137 })),
      "x (g) crashed: OUT_OF_MEMORY, exit 137",
    );
    assert.equal(describeEvent(event(3, "SOMETHING:ELSE", {})), "SOMETHING:ELSE");
  });
});
