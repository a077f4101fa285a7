// MemoryStorage: the shared storage contract plus what is particular to the memory implementation.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { MemoryStorage } from "../../raft/memory-storage.js";
import { RaftAssertionError } from "../../raft/errors.js";
import { runStorageContract } from "./storage-contract.js";

runStorageContract("MemoryStorage", async () => ({ storage: new MemoryStorage(), close: async () => {} }));

describe("MemoryStorage", () => {
  it("reports the initial configuration given to a brand-new node", () => {
    const s = new MemoryStorage({ voters: ["a", "b"], learners: [], votersOutgoing: [], learnersNext: [], autoLeave: false });
    assert.deepEqual(s.initialState().confState.voters, ["a", "b"]);
  });

  it("asserts on a gap in appended entries", () => {
    const s = new MemoryStorage();
    assert.throws(() => s.append([{ index: 3, term: 1, type: "normal", data: new Uint8Array() }]), RaftAssertionError);
  });

  it("asserts on compacting beyond the last index", () => {
    const s = new MemoryStorage();
    s.append([{ index: 1, term: 1, type: "normal", data: new Uint8Array() }]);
    assert.throws(() => s.compact(2), RaftAssertionError);
  });
});
