import { describe, test } from "node:test";
import assert from "node:assert/strict";
import type { InstanceState } from "../../src/domain/instances/instance-schemas.js";
import { LiveInstances, type LiveInstance } from "../../src/scheduler/live-instances.js";

function instance(id: string, node: string, state: InstanceState, port = 30000): LiveInstance {
  return { id, group: "lobby", node, port, memoryMb: 256, state, playerCount: 0 };
}

describe("LiveInstances start slots", () => {
  test("SCHEDULED, PREPARING and STARTING count as starting on their node until RUNNING or finished", () => {
    const live = new LiveInstances();
    live.put(instance("i1", "a", "SCHEDULED", 30000));
    live.put(instance("i2", "a", "SCHEDULED", 30001));
    live.put(instance("i3", "b", "RUNNING", 30000));
    assert.equal(live.startingOn("a"), 2);
    assert.equal(live.startingOn("b"), 0);
    live.setState("i1", "PREPARING");
    live.setState("i1", "STARTING");
    assert.equal(live.startingOn("a"), 2, "moving between starting states keeps the slot");
    live.setState("i1", "RUNNING");
    assert.equal(live.startingOn("a"), 1);
    live.setState("i2", "CRASHED");
    assert.equal(live.startingOn("a"), 0);
    live.setState("i3", "STOPPING");
    assert.equal(live.startingOn("b"), 0);
  });

  test("remove and put again release and retake the slot", () => {
    const live = new LiveInstances();
    live.put(instance("i1", "a", "STARTING"));
    live.put(instance("i1", "a", "PREPARING"));
    assert.equal(live.startingOn("a"), 1, "a second put replaces the first");
    live.remove("i1");
    assert.equal(live.startingOn("a"), 0);
    live.put(instance("i2", "a", "SCHEDULED"));
    live.removeGroup("lobby");
    assert.equal(live.startingOn("a"), 0);
  });
});
