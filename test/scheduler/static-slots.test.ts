import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { freeSlots, slotId, slotNumber, type SlotRecord } from "../../src/scheduler/static-slots.js";

const rec = (id: string, state: SlotRecord["state"], node = "node-a"): SlotRecord => ({ id, state, node });

describe("STATIC slots", () => {
  test("slot ids are <group>-<n> with n from 1, no leading zero", () => {
    assert.equal(slotId("hub", 3), "hub-3");
    assert.equal(slotNumber("hub", "hub-3"), 3);
    assert.equal(slotNumber("hub", "hub-12"), 12);
    for (const id of ["hub-0", "hub-03", "hub-", "hub-1a2b3c4d", "hubx-1", "lobby-1", "hub-1-2"]) assert.equal(slotNumber("hub", id), null, id);
    assert.equal(slotNumber("my-hub", "my-hub-2"), 2, "a group name with a dash");
  });

  test("a finished slot is refilled under its own id on the node of its record", () => {
    const records = [rec("hub-1", "CRASHED", "node-b"), rec("hub-2", "RUNNING"), rec("hub-3", "STOPPED", "node-c")];
    assert.deepEqual(freeSlots("hub", 3, records, new Set(), 5), [
      { id: "hub-1", home: "node-b" },
      { id: "hub-3", home: "node-c" },
    ]);
  });

  test("a slot still stopping or draining is not free: no second process, no new id meanwhile", () => {
    const records = [rec("hub-1", "STOPPING"), rec("hub-2", "DRAINING"), rec("hub-3", "RUNNING")];
    assert.deepEqual(freeSlots("hub", 3, records, new Set(), 3), []);
  });

  test("a slot an operator stopped stays stopped; a slot that never ran has no home", () => {
    const records = [rec("hub-1", "STOPPED"), rec("hub-2", "RUNNING")];
    assert.deepEqual(freeSlots("hub", 4, records, new Set(["hub-1"]), 4), [
      { id: "hub-3", home: null },
      { id: "hub-4", home: null },
    ]);
  });

  test("only slots 1 to minInstances, lowest first, at most the count asked", () => {
    const records = [rec("hub-3", "CRASHED", "node-c")];
    assert.deepEqual(freeSlots("hub", 2, records, new Set(), 5), [
      { id: "hub-1", home: null },
      { id: "hub-2", home: null },
    ]);
    assert.deepEqual(freeSlots("hub", 3, records, new Set(), 1), [{ id: "hub-1", home: null }]);
    assert.deepEqual(freeSlots("hub", 0, records, new Set(), 1), []);
  });
});
