// Unit tests of the Raft library's small pure parts and of RawNode behaviour that scenario files
// do not show well: randomized election timeouts, codecs, pure conf changes, quorum arithmetic,
// typed errors.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { decodeConfChange, decodeMessage, encodeConfChange, encodeMessage } from "../../raft/codec.js";
import { enterJoint, leaveJoint, simpleChange } from "../../raft/confchange/changer.js";
import { restoreConfig } from "../../raft/confchange/restore.js";
import { RaftAssertionError, RaftError } from "../../raft/errors.js";
import { MemoryStorage } from "../../raft/memory-storage.js";
import { jointCommittedIndex, jointVoteResult } from "../../raft/quorum/joint.js";
import { majorityCommittedIndex, majorityVoteResult } from "../../raft/quorum/majority.js";
import { Raft } from "../../raft/raft.js";
import { RawNode } from "../../raft/raw-node.js";
import { Inflights } from "../../raft/tracker/inflights.js";
import { configToConfState } from "../../raft/tracker/tracker.js";
import type { ConfState, Message } from "../../raft/types.js";
import { committedEntriesDurable } from "../../raft/util.js";

const threeVoters: ConfState = { voters: ["a", "b", "c"], learners: [], votersOutgoing: [], learnersNext: [], autoLeave: false };

/** A small deterministic generator (mulberry32) standing in for the host's seeded randomness. */
function seeded(seed: number): (n: number) => number {
  let state = seed >>> 0;
  return (n) => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return Math.floor((((t ^ (t >>> 14)) >>> 0) / 4294967296) * n);
  };
}

/** A brand-new member whose bootstrap Ready (the initial configuration) has been handled. */
function node(id: string, random: (n: number) => number, electionTick = 10): RawNode {
  const storage = new MemoryStorage(threeVoters);
  const n = new RawNode({ id, electionTick, heartbeatTick: 1, storage, random });
  const rd = n.ready();
  storage.append([...rd.entries]);
  if (rd.hardState !== null) storage.setHardState(rd.hardState);
  for (const e of rd.committedEntries) n.applyConfChange(decodeConfChange(e.data));
  n.advance(rd);
  return n;
}

describe("randomized election timeout", () => {
  it("falls in [electionTick, 2*electionTick) and varies with the seed", () => {
    const seen = new Set<number>();
    for (let seed = 1; seed <= 200; seed++) {
      const n = node("a", seeded(seed));
      let ticks = 0;
      while (n.status().softState.role === "follower") {
        n.tick();
        ticks++;
        assert.ok(ticks < 20, "no election within 2*electionTick");
      }
      assert.ok(ticks >= 10 && ticks < 20, `timeout ${ticks}`);
      seen.add(ticks);
    }
    assert.ok(seen.size >= 8, `only ${seen.size} distinct timeouts`);
  });

  it("asserts when the injected random leaves [0, n)", () => {
    assert.throws(() => node("a", (n) => n), RaftAssertionError);
  });
});

describe("bootstrap", () => {
  it("writes the initial configuration of a brand-new member into the log, committed", () => {
    const storage = new MemoryStorage(threeVoters);
    const n = new RawNode({ id: "a", electionTick: 10, heartbeatTick: 1, storage, random: () => 0 });
    const rd = n.ready();
    assert.deepEqual(rd.hardState, { term: 1, vote: null, commit: 3 });
    assert.deepEqual(
      rd.entries.map((e) => [e.term, e.index, e.type]),
      [
        [1, 1, "conf-change"],
        [1, 2, "conf-change"],
        [1, 3, "conf-change"],
      ],
    );
    assert.deepEqual(
      rd.committedEntries.map((e) => decodeConfChange(e.data).changes),
      [[{ type: "add-voter", nodeId: "a" }], [{ type: "add-voter", nodeId: "b" }], [{ type: "add-voter", nodeId: "c" }]],
    );
    assert.equal(rd.mustSync, true);
  });
});

describe("RawNode errors", () => {
  it("refuses an unusable configuration with INVALID_CONFIG", () => {
    assert.throws(
      () => node("a", () => 0, 1),
      (e: unknown) => e instanceof RaftError && e.code === "INVALID_CONFIG",
    );
    assert.throws(
      () => node("", () => 0),
      (e: unknown) => e instanceof RaftError && e.code === "INVALID_CONFIG",
    );
  });

  it("refuses local message types in step()", () => {
    const n = node("a", () => 0);
    const hup: Message = {
      type: "hup",
      from: "a",
      to: "a",
      term: 0,
      logTerm: 0,
      index: 0,
      entries: [],
      commit: 0,
      snapshot: null,
      reject: false,
      rejectHint: 0,
      context: new Uint8Array(),
    };
    assert.throws(
      () => n.step(hup),
      (e: unknown) => e instanceof RaftError && e.code === "STEP_LOCAL_MESSAGE",
    );
  });

  it("throws NOT_LEADER for a proposal or read without a known leader", () => {
    const n = node("a", () => 0);
    assert.throws(
      () => n.propose(new Uint8Array([1])),
      (e: unknown) => e instanceof RaftError && e.code === "NOT_LEADER",
    );
    assert.throws(
      () => n.readIndex(new Uint8Array([1])),
      (e: unknown) => e instanceof RaftError && e.code === "NOT_LEADER",
    );
  });

  it("asserts when ready() is called twice without advance()", () => {
    const n = node("a", () => 0);
    n.campaign();
    n.ready();
    assert.throws(() => n.ready(), RaftAssertionError);
  });
});

describe("messages sent before the Ready is persisted (thesis §10.2.1)", () => {
  /** Handles a Ready completely: persist, then apply, then advance; returns it. */
  function handle(n: RawNode, storage: MemoryStorage): ReturnType<RawNode["ready"]> {
    const rd = n.ready();
    storage.append([...rd.entries]);
    if (rd.hardState !== null) storage.setHardState(rd.hardState);
    for (const e of rd.committedEntries) if (e.type === "conf-change") n.applyConfChange(decodeConfChange(e.data));
    n.advance(rd);
    return rd;
  }

  it("sends nothing early from a Ready that changes term or vote", () => {
    // A single voter with a learner elects itself and takes a proposal before its next Ready: the
    // append to the learner carries the new term, which is not durable yet.
    const storage = new MemoryStorage({ voters: ["a"], learners: ["l"], votersOutgoing: [], learnersNext: [], autoLeave: false });
    const n = new RawNode({ id: "a", electionTick: 10, heartbeatTick: 1, storage, random: () => 0 });
    handle(n, storage);
    n.campaign();
    n.propose(new Uint8Array([1]));
    const rd = handle(n, storage);
    assert.equal(rd.hardState?.term, 2);
    assert.ok(rd.messages.some((m) => m.type === "app" && m.to === "l"));
    assert.equal(rd.messagesBeforePersist, 0);
  });

  it("puts a leader's appends first and its vote answers after the write", () => {
    const storage = new MemoryStorage(threeVoters);
    const n = new RawNode({ id: "a", electionTick: 10, heartbeatTick: 1, storage, random: () => 0 });
    handle(n, storage);
    n.campaign();
    handle(n, storage); // pre-vote
    n.step({
      type: "pre-vote-resp",
      from: "b",
      to: "a",
      term: 2,
      logTerm: 0,
      index: 0,
      entries: [],
      commit: 0,
      snapshot: null,
      reject: false,
      rejectHint: 0,
      context: new Uint8Array(),
    });
    handle(n, storage); // vote requests with the durable term 2
    n.step({
      type: "vote",
      from: "c",
      to: "a",
      term: 2,
      logTerm: 1,
      index: 3,
      entries: [],
      commit: 0,
      snapshot: null,
      reject: false,
      rejectHint: 0,
      context: new Uint8Array(),
    });
    n.step({
      type: "vote-resp",
      from: "b",
      to: "a",
      term: 2,
      logTerm: 0,
      index: 0,
      entries: [],
      commit: 0,
      snapshot: null,
      reject: false,
      rejectHint: 0,
      context: new Uint8Array(),
    });
    const rd = n.ready();
    assert.equal(n.status().softState.role, "leader");
    assert.deepEqual(
      rd.messages.map((m) => `${m.type}>${m.to}`),
      ["app>b", "app>c", "vote-resp>c"],
    );
    assert.equal(rd.messagesBeforePersist, 2);
    assert.equal(rd.messages[2]?.reject, true);
  });

  it("never sends a follower's acknowledgement early", () => {
    const storage = new MemoryStorage(threeVoters);
    const n = new RawNode({ id: "b", electionTick: 10, heartbeatTick: 1, storage, random: () => 0 });
    handle(n, storage);
    const entry = { term: 1, index: 4, type: "normal" as const, data: new Uint8Array([1]) };
    n.step({
      type: "app",
      from: "a",
      to: "b",
      term: 1,
      logTerm: 1,
      index: 3,
      entries: [entry],
      commit: 3,
      snapshot: null,
      reject: false,
      rejectHint: 0,
      context: new Uint8Array(),
    });
    const rd = n.ready();
    assert.deepEqual(
      rd.messages.map((m) => m.type),
      ["app-resp"],
    );
    assert.equal(rd.messagesBeforePersist, 0);
  });

  it("counts the leader's own entries towards a commit only after advance()", () => {
    const storage = new MemoryStorage({ voters: ["a"], learners: [], votersOutgoing: [], learnersNext: [], autoLeave: false });
    const n = new RawNode({ id: "a", electionTick: 10, heartbeatTick: 1, storage, random: () => 0 });
    handle(n, storage);
    n.campaign();
    handle(n, storage);
    handle(n, storage);
    const commitBefore = n.status().hardState.commit;
    n.propose(new Uint8Array([7]));
    const rd = n.ready();
    assert.equal(rd.entries.length, 1);
    assert.equal(n.status().hardState.commit, commitBefore, "committed before the write was durable");
    storage.append([...rd.entries]);
    n.advance(rd);
    assert.equal(n.status().hardState.commit, rd.entries[0]!.index);
  });

  it("tells which committed entries were durable before their Ready", () => {
    const e = (index: number) => ({ term: 1, index, type: "normal" as const, data: new Uint8Array() });
    const rd = (committed: number[], entries: number[]) => ({
      softState: null,
      hardState: null,
      snapshot: null,
      messages: [],
      messagesBeforePersist: 0,
      readStates: [],
      mustSync: false,
      committedEntries: committed.map(e),
      entries: entries.map(e),
    });
    assert.equal(committedEntriesDurable(rd([4, 5], [6])), true);
    assert.equal(committedEntriesDurable(rd([4, 5], [])), true);
    assert.equal(committedEntriesDurable(rd([4, 5], [5, 6])), false);
    assert.equal(committedEntriesDurable(rd([], [])), false);
  });
});

describe("role transitions", () => {
  it("asserts on an illegal transition (follower straight to leader, leader to candidate)", () => {
    const r = new Raft({ id: "a", electionTick: 10, heartbeatTick: 1, storage: new MemoryStorage(threeVoters), random: () => 0 });
    assert.throws(() => r.becomeLeader(), RaftAssertionError);
    r.becomeCandidate();
    r.becomeLeader();
    assert.throws(() => r.becomeCandidate(), RaftAssertionError);
    assert.throws(() => r.becomePreCandidate(), RaftAssertionError);
  });
});

describe("codec", () => {
  it("round-trips a message with entries and a snapshot", () => {
    const m: Message = {
      type: "app",
      from: "ctl-1",
      to: "ctl-2",
      term: 2 ** 40,
      logTerm: 7,
      index: 123456789,
      entries: [
        { term: 7, index: 123456790, type: "normal", data: new Uint8Array([1, 2, 3]) },
        { term: 7, index: 123456791, type: "conf-change", data: encodeConfChange({ changes: [{ type: "add-voter", nodeId: "ctl-4" }] }) },
      ],
      commit: 99,
      snapshot: {
        metadata: { index: 5, term: 1, confState: { ...threeVoters, votersOutgoing: ["a"], learnersNext: ["x"], autoLeave: true } },
        data: new Uint8Array([9]),
      },
      reject: true,
      rejectHint: 42,
      context: new TextEncoder().encode("ctx"),
    };
    assert.deepEqual(decodeMessage(encodeMessage(m)), m);
  });

  it("round-trips conf changes, with and without context", () => {
    const a = {
      changes: [
        { type: "add-learner" as const, nodeId: "n4" },
        { type: "remove-node" as const, nodeId: "n1" },
      ],
      transition: "joint-explicit" as const,
      context: new Uint8Array([7]),
    };
    assert.deepEqual(decodeConfChange(encodeConfChange(a)), a);
    assert.deepEqual(decodeConfChange(encodeConfChange({ changes: [] })), { changes: [], transition: "auto" });
  });

  it("rejects malformed bytes with MALFORMED_MESSAGE", () => {
    const bytes = encodeMessage({
      type: "heartbeat",
      from: "a",
      to: "b",
      term: 1,
      logTerm: 0,
      index: 0,
      entries: [],
      commit: 0,
      snapshot: null,
      reject: false,
      rejectHint: 0,
      context: new Uint8Array(),
    });
    for (const bad of [bytes.slice(0, bytes.length - 1), new Uint8Array([...bytes, 0]), new Uint8Array([9]), new Uint8Array([1, 200])]) {
      assert.throws(
        () => decodeMessage(bad),
        (e: unknown) => e instanceof RaftError && e.code === "MALFORMED_MESSAGE",
      );
    }
  });
});

describe("quorum", () => {
  it("computes the majority commit index, learners never counted", () => {
    const acked = new Map([
      ["a", 5],
      ["b", 3],
      ["c", 1],
      ["learner", 9],
    ]);
    assert.equal(
      majorityCommittedIndex(new Set(["a", "b", "c"]), (id) => acked.get(id)),
      3,
    );
    assert.equal(
      majorityCommittedIndex(new Set(["a", "b", "c", "d"]), (id) => acked.get(id)),
      1,
    );
    assert.equal(
      jointCommittedIndex({ incoming: new Set(["a", "b", "c"]), outgoing: new Set(["c", "d", "learner"]) }, (id) => acked.get(id)),
      1,
    );
  });

  it("decides votes: won, lost, pending; a joint vote needs both halves", () => {
    const votes = new Map([
      ["a", true],
      ["b", false],
    ]);
    const v = (id: string): boolean | undefined => votes.get(id);
    assert.equal(majorityVoteResult(new Set(["a", "b", "c"]), v), "pending");
    assert.equal(majorityVoteResult(new Set(["a"]), v), "won");
    assert.equal(majorityVoteResult(new Set(["b", "c"]), v), "lost");
    assert.equal(jointVoteResult({ incoming: new Set(["a"]), outgoing: new Set(["b", "c"]) }, v), "lost");
    assert.equal(jointVoteResult({ incoming: new Set(["a"]), outgoing: new Set() }, v), "won");
  });
});

describe("confchange", () => {
  const base = restoreConfig(threeVoters, 10, 4);

  it("returns a new configuration and leaves its input untouched", () => {
    const before = configToConfState(base.config);
    const after = simpleChange({ ...base, lastIndex: 10, inflightMsgsMax: 4 }, [{ type: "add-voter", nodeId: "d" }]);
    assert.deepEqual(configToConfState(base.config), before);
    assert.equal(base.progress.has("d"), false);
    assert.deepEqual(configToConfState(after.config).voters, ["a", "b", "c", "d"]);
  });

  it("refuses more than one voter change without a joint configuration", () => {
    assert.throws(
      () =>
        simpleChange({ ...base, lastIndex: 10, inflightMsgsMax: 4 }, [
          { type: "add-voter", nodeId: "d" },
          { type: "remove-node", nodeId: "a" },
        ]),
      (e: unknown) => e instanceof RaftError && e.code === "INVALID_CONF_CHANGE",
    );
  });

  it("demotes an outgoing voter through learnersNext and restores a joint state exactly", () => {
    const joint = enterJoint({ ...base, lastIndex: 10, inflightMsgsMax: 4 }, true, [
      { type: "add-learner", nodeId: "a" },
      { type: "add-voter", nodeId: "d" },
    ]);
    const cs = configToConfState(joint.config);
    assert.deepEqual(cs, { voters: ["b", "c", "d"], learners: [], votersOutgoing: ["a", "b", "c"], learnersNext: ["a"], autoLeave: true });
    assert.deepEqual(configToConfState(restoreConfig(cs, 10, 4).config), cs);
    const left = leaveJoint({ ...joint, lastIndex: 10, inflightMsgsMax: 4 });
    assert.deepEqual(configToConfState(left.config), { voters: ["b", "c", "d"], learners: ["a"], votersOutgoing: [], learnersNext: [], autoLeave: false });
    assert.throws(
      () => leaveJoint({ ...left, lastIndex: 10, inflightMsgsMax: 4 }),
      (e: unknown) => e instanceof RaftError && e.code === "INVALID_CONF_CHANGE",
    );
  });

  it("refuses to remove every voter", () => {
    assert.throws(
      () =>
        enterJoint(
          { ...base, lastIndex: 10, inflightMsgsMax: 4 },
          false,
          ["a", "b", "c"].map((id) => ({ type: "remove-node" as const, nodeId: id })),
        ),
      (e: unknown) => e instanceof RaftError && e.code === "INVALID_CONF_CHANGE",
    );
  });
});

describe("inflights", () => {
  it("bounds the messages in flight and frees them in order", () => {
    const f = new Inflights(2);
    f.add(3);
    f.add(5);
    assert.equal(f.full(), true);
    assert.throws(() => f.add(6), RaftAssertionError);
    f.freeLE(4);
    assert.equal(f.size, 1);
    f.freeFirstOne();
    assert.equal(f.size, 0);
  });
});
