import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { Prng } from "../raft/sim/prng.js";
import { HistoryRecorder, checkLinearizable, type Operation } from "./linearizability.js";

function put(clientId: number, key: string, value: string, callMs: number, returnMs: number | null): Operation {
  return { clientId, kind: "put", key, value, callMs, returnMs };
}

function get(clientId: number, key: string, output: string | null, callMs: number, returnMs: number | null): Operation {
  return { clientId, kind: "get", key, callMs, returnMs, output };
}

function cas(
  clientId: number,
  key: string,
  expected: string | null,
  value: string,
  output: boolean | undefined,
  callMs: number,
  returnMs: number | null,
): Operation {
  return { clientId, kind: "cas", key, expected, value, callMs, returnMs, output };
}

function assertLinearizable(history: Operation[]): void {
  const result = checkLinearizable(history);
  assert.deepEqual(result, { ok: true });
}

function assertNotLinearizable(history: Operation[], key = "x"): string {
  const result = checkLinearizable(history);
  assert.equal(result.ok, false, "expected a violation");
  if (result.ok !== false) throw new Error("unreachable");
  assert.equal(result.key, key);
  return result.explanation;
}

describe("checkLinearizable: sequential histories", () => {
  it("accepts an empty history and reads of an absent key", () => {
    assertLinearizable([]);
    assertLinearizable([get(1, "x", null, 0, 1)]);
  });

  it("accepts a read of the last completed write", () => {
    assertLinearizable([put(1, "x", "a", 0, 1), put(1, "x", "b", 2, 3), get(2, "x", "b", 4, 5)]);
  });

  it("rejects a stale read after a completed write", () => {
    const explanation = assertNotLinearizable([put(1, "x", "a", 0, 1), put(1, "x", "b", 2, 3), get(2, "x", "a", 4, 5)]);
    assert.match(explanation, /get\("x"\) → "a"/);
    assert.match(explanation, /but the value is "b"/);
  });

  it("rejects a lost write", () => {
    assertNotLinearizable([put(1, "x", "a", 0, 1), get(2, "x", null, 2, 3)]);
  });

  it("rejects a read of a value never written", () => {
    assertNotLinearizable([put(1, "x", "a", 0, 1), get(2, "x", "zzz", 2, 3)]);
  });

  it("checks compare-and-set against the current value", () => {
    assertLinearizable([cas(1, "x", null, "a", true, 0, 1), cas(2, "x", null, "b", false, 2, 3), cas(2, "x", "a", "b", true, 4, 5), get(1, "x", "b", 6, 7)]);
    assertNotLinearizable([put(1, "x", "a", 0, 1), cas(2, "x", "a", "b", false, 2, 3)]);
    assertNotLinearizable([put(1, "x", "a", 0, 1), cas(2, "x", null, "b", true, 2, 3)]);
    assertNotLinearizable([cas(1, "x", null, "a", true, 0, 1), get(2, "x", null, 2, 3)]);
  });
});

describe("checkLinearizable: concurrency", () => {
  it("accepts reads that overlap a write seeing either value, in a consistent order", () => {
    assertLinearizable([put(1, "x", "a", 0, 10), get(2, "x", null, 1, 2), get(2, "x", "a", 3, 4), get(3, "x", "a", 5, 6)]);
  });

  it("rejects a read going back in time while a write is in flight", () => {
    assertNotLinearizable([put(1, "x", "a", 0, 10), get(2, "x", "a", 1, 2), get(3, "x", null, 3, 4)]);
  });

  it("accepts concurrent writes seen in either order", () => {
    const writes = [put(1, "x", "a", 0, 5), put(2, "x", "b", 1, 6)];
    assertLinearizable([...writes, get(3, "x", "a", 7, 8)]);
    assertLinearizable([...writes, get(3, "x", "b", 7, 8)]);
    assertNotLinearizable([...writes, get(3, "x", "a", 7, 8), get(3, "x", "b", 9, 10)]);
  });

  it("rejects two concurrent compare-and-sets from the same value both succeeding", () => {
    assertNotLinearizable([cas(1, "x", null, "a", true, 0, 5), cas(2, "x", null, "b", true, 1, 6)]);
    assertLinearizable([cas(1, "x", null, "a", true, 0, 5), cas(2, "x", null, "b", false, 1, 6)]);
  });

  it("accepts a chain of compare-and-sets linearized against their real-time overlap", () => {
    assertLinearizable([cas(1, "x", "a", "b", true, 0, 10), put(2, "x", "a", 1, 2), get(3, "x", "b", 11, 12)]);
  });

  it("treats operations touching at one instant as concurrent", () => {
    assertLinearizable([put(1, "x", "a", 0, 5), get(2, "x", null, 5, 6)]);
  });
});

describe("checkLinearizable: operations with unknown outcome", () => {
  it("accepts a timed-out write that took effect", () => {
    assertLinearizable([put(1, "x", "a", 0, null), get(2, "x", "a", 100, 101)]);
  });

  it("accepts a timed-out write that never took effect", () => {
    assertLinearizable([put(1, "x", "a", 0, null), get(2, "x", null, 100, 101)]);
  });

  it("rejects a timed-out write becoming visible and then disappearing", () => {
    assertNotLinearizable([put(1, "x", "a", 0, null), get(2, "x", "a", 100, 101), get(2, "x", null, 102, 103)]);
  });

  it("rejects a timed-out write taking effect before it was called", () => {
    assertNotLinearizable([get(2, "x", "a", 0, 1), put(1, "x", "a", 2, null)]);
  });

  it("accepts a timed-out compare-and-set either way, with its effect decided by the value", () => {
    const pending = cas(1, "x", null, "a", undefined, 0, null);
    assertLinearizable([pending, get(2, "x", "a", 10, 11)]);
    assertLinearizable([pending, get(2, "x", null, 10, 11)]);
    assertNotLinearizable([put(3, "x", "b", 0, 1), { ...pending, callMs: 2 }, get(2, "x", "a", 10, 11)]);
  });

  it("needs a timed-out write that no one read to explain a failed compare-and-set", () => {
    assertLinearizable([put(1, "x", "a", 0, 1), put(2, "x", "b", 2, null), cas(3, "x", "a", "c", false, 5, 6)]);
    assertNotLinearizable([put(1, "x", "a", 0, 1), put(2, "x", "b", 7, null), cas(3, "x", "a", "c", false, 5, 6)]);
  });

  it("stays fast with many timed-out writes nobody observed", () => {
    const history: Operation[] = [put(0, "x", "seen", 0, 1)];
    for (let i = 1; i <= 200; i++) history.push(put(i, "x", `lost${i}`, 2, null));
    for (let i = 0; i < 50; i++) history.push(get(999, "x", "seen", 3 + 2 * i, 4 + 2 * i));
    assert.deepEqual(checkLinearizable(history, { timeoutMs: 2_000 }), { ok: true });
  });

  it("ignores reads with unknown outcome", () => {
    assertLinearizable([put(1, "x", "a", 0, 1), get(2, "x", "nonsense", 2, null)]);
  });
});

describe("checkLinearizable: keys, bounds and input", () => {
  it("checks every key on its own and names the failing key", () => {
    const history = [put(1, "x", "a", 0, 1), put(1, "y", "b", 0, 1), get(2, "x", "a", 2, 3), get(2, "y", "a", 2, 3)];
    assertNotLinearizable(history, "y");
  });

  it("answers unknown when the search exceeds its time bound", () => {
    const history: Operation[] = [];
    for (let i = 0; i < 12; i++) history.push(put(i, "x", `v${i}`, 0, 100));
    history.push(get(99, "x", "never-written", 101, 102));
    assert.deepEqual(checkLinearizable(history, { timeoutMs: 0 }), { ok: "unknown" });
    assert.equal(checkLinearizable(history).ok, false);
  });

  it("rejects malformed operations", () => {
    assert.throws(() => checkLinearizable([put(1, "x", "a", 5, 4)]), TypeError);
    assert.throws(() => checkLinearizable([{ clientId: 1, kind: "get", key: "x", callMs: 0, returnMs: 1 }]), TypeError);
    assert.throws(() => checkLinearizable([cas(1, "x", null, "a", undefined, 0, 1)]), TypeError);
  });
});

describe("HistoryRecorder", () => {
  it("records completed, timed-out and discarded operations", () => {
    const recorder = new HistoryRecorder();
    const a = recorder.invoke(1, "put", "x", { value: "a" }, 0);
    const b = recorder.invoke(2, "get", "x", {}, 1);
    const c = recorder.invoke(3, "cas", "x", { expected: null, value: "c" }, 2);
    const d = recorder.invoke(4, "put", "x", { value: "d" }, 3);
    recorder.complete(a, undefined, 5);
    recorder.complete(b, "a", 6);
    recorder.timeout(c);
    recorder.discard(d);
    assert.equal(recorder.isSettled(a), true);
    assert.throws(() => recorder.complete(a, undefined, 7));
    const history = recorder.history();
    assert.equal(history.length, 3);
    assert.deepEqual(history[2], { clientId: 3, kind: "cas", key: "x", expected: null, value: "c", callMs: 2, returnMs: null });
    assert.deepEqual(checkLinearizable(history), { ok: true });
  });
});

/** Exhaustive reference: tries every order that respects real time (small histories only). */
function bruteForceLinearizable(history: readonly Operation[]): boolean {
  const n = history.length;
  const placed = new Array<boolean>(n).fill(false);
  const state = new Map<string, string | null>();
  const mustPrecede = history.map((b) => history.map((a) => a.returnMs !== null && a.returnMs < b.callMs));
  const completedCount = history.filter((op) => op.returnMs !== null).length;

  function search(placedCompleted: number): boolean {
    if (placedCompleted === completedCount) return true;
    for (let i = 0; i < n; i++) {
      if (placed[i]) continue;
      if (mustPrecede[i].some((before, j) => before && !placed[j])) continue;
      const op = history[i];
      const current = state.get(op.key) ?? null;
      const pending = op.returnMs === null;
      let next = current;
      if (op.kind === "put") next = op.value ?? null;
      else if (op.kind === "get") {
        if (!pending && op.output !== current) continue;
      } else {
        const swaps = current === op.expected;
        if (!pending && op.output !== swaps) continue;
        if (swaps) next = op.value ?? null;
      }
      placed[i] = true;
      state.set(op.key, next);
      const found = search(placedCompleted + (pending ? 0 : 1));
      state.set(op.key, current);
      placed[i] = false;
      if (found) return true;
    }
    return false;
  }
  return search(0);
}

/**
 * A random small history: operations run against a real register at a random instant inside their
 * interval, some outcomes are lost (and maybe never applied), and some outputs are then corrupted.
 */
function randomHistory(prng: Prng): Operation[] {
  const count = prng.between(1, 7);
  const keys = prng.chance(0.5) ? ["x"] : ["x", "y"];
  const values = ["a", "b", "c"];
  const drafts = Array.from({ length: count }, (_, i) => {
    const callMs = prng.int(20);
    const returnMs = callMs + prng.int(12);
    return {
      i,
      op: {
        clientId: i,
        kind: prng.pick(["put", "get", "cas"] as const),
        key: prng.pick(keys),
        callMs,
        returnMs,
      } as Operation,
      atMs: callMs + prng.nextFloat() * (returnMs - callMs),
      applied: true,
    };
  });
  for (const { op } of drafts) {
    if (op.kind !== "get") op.value = prng.pick(values);
    if (op.kind === "cas") op.expected = prng.chance(0.3) ? null : prng.pick(values);
  }
  const register = new Map<string, string | null>();
  for (const draft of [...drafts].sort((a, b) => a.atMs - b.atMs)) {
    const { op } = draft;
    const lost = prng.chance(0.15);
    if (lost) {
      op.returnMs = null;
      draft.applied = prng.chance(0.5);
      if (!draft.applied) continue;
    }
    const current = register.get(op.key) ?? null;
    if (op.kind === "put") register.set(op.key, op.value ?? null);
    else if (op.kind === "get") op.output = current;
    else {
      const swaps = current === op.expected;
      if (swaps) register.set(op.key, op.value ?? null);
      if (!lost) op.output = swaps;
    }
  }
  if (prng.chance(0.5)) {
    const completedReads = drafts.filter(({ op }) => op.returnMs !== null && op.kind !== "put");
    if (completedReads.length > 0) {
      const { op } = prng.pick(completedReads);
      if (op.kind === "get") op.output = prng.pick([null, ...values]);
      else op.output = !op.output;
    }
  }
  if (prng.chance(0.2)) {
    const { op } = prng.pick(drafts);
    if (op.returnMs !== null) op.callMs = Math.max(0, op.callMs - prng.int(5));
  }
  return drafts.map(({ op }) => op);
}

describe("checkLinearizable: randomized cross-check", () => {
  const historiesCount = 3_000;

  it(`agrees with an exhaustive search on ${historiesCount} small random histories`, () => {
    const prng = new Prng(20261122);
    const verdicts = { linearizable: 0, violation: 0 };
    for (let n = 0; n < historiesCount; n++) {
      const history = randomHistory(prng);
      const expected = bruteForceLinearizable(history);
      const result = checkLinearizable(history);
      assert.notEqual(result.ok, "unknown");
      assert.equal(result.ok, expected, `history ${n}: ${JSON.stringify(history)}`);
      verdicts[expected ? "linearizable" : "violation"]++;
    }
    // Both verdicts must be well represented, or the cross-check proves little.
    assert.ok(verdicts.linearizable > historiesCount / 5, JSON.stringify(verdicts));
    assert.ok(verdicts.violation > historiesCount / 10, JSON.stringify(verdicts));
  });
});
