import { describe, test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import type { NodeState } from "../../src/domain/nodes/node-schemas.js";
import {
  buildPlacementIndex,
  lowestFreePort,
  placeInstance,
  PlacementIndex,
  type PlacementGroup,
  type PlacementInstance,
  type PlacementNode,
} from "../../src/scheduler/placement.js";

const lobby: PlacementGroup = { name: "lobby", memoryMb: 1024, portRange: { start: 30000, end: 30100 } };

function node(id: string, over: Partial<PlacementNode> = {}): PlacementNode {
  return { id, state: "ONLINE", cordoned: false, totalMemoryMb: 8192, usedMemoryMb: 0, ...over };
}

function live(group: string, nodeId: string, port: number, memoryMb = 1024): PlacementInstance {
  return { group, node: nodeId, port, memoryMb, state: "RUNNING" };
}

/** Places `count` instances one after another, recording each in the index as the host would. */
function placeMany(group: PlacementGroup, nodes: PlacementNode[], index: PlacementIndex, count: number) {
  const placed: PlacementInstance[] = [];
  for (let i = 0; i < count; i++) {
    const result = placeInstance({ group }, nodes, index);
    if (!result.ok) return { placed, failure: result };
    const instance = live(group.name, result.nodeId, result.port, group.memoryMb);
    index.add(instance);
    placed.push(instance);
  }
  return { placed, failure: null };
}

describe("placeInstance", () => {
  test("only ONLINE, uncordoned nodes are candidates", () => {
    const nodes = [
      node("a", { state: "DRAINING" }),
      node("b", { state: "UNREACHABLE" }),
      node("c", { state: "OFFLINE" }),
      node("d", { cordoned: true }),
      node("e"),
    ];
    const result = placeInstance({ group: lobby }, nodes, buildPlacementIndex([]));
    assert.deepEqual(result, { ok: true, nodeId: "e", port: 30000, freeMemoryMb: 8192 });
  });

  test("no ONLINE node: the reason counts the nodes by state", () => {
    const nodes = [node("a", { state: "DRAINING" }), node("b", { state: "UNREACHABLE" }), node("c", { state: "UNREACHABLE" })];
    const result = placeInstance({ group: lobby }, nodes, buildPlacementIndex([]));
    assert.equal(result.ok, false);
    assert.equal(!result.ok && result.code, "NO_ONLINE_NODE");
    assert.equal(!result.ok && result.message, "no ONLINE node (1 DRAINING, 2 UNREACHABLE)");
    const none = placeInstance({ group: lobby }, [], buildPlacementIndex([]));
    assert.equal(!none.ok && none.message, "no ONLINE node (no node registered)");
  });

  test("every ONLINE node cordoned", () => {
    const result = placeInstance({ group: lobby }, [node("a", { cordoned: true }), node("b", { state: "OFFLINE" })], buildPlacementIndex([]));
    assert.equal(!result.ok && result.code, "ALL_CORDONED");
    assert.equal(!result.ok && result.message, "every ONLINE node is cordoned (1)");
  });

  test("a node whose daemon is shutting down is skipped; with no other, the reason says so", () => {
    const index = buildPlacementIndex([]);
    const placed = placeInstance({ group: lobby }, [node("a", { shuttingDown: true }), node("b", { totalMemoryMb: 2048 })], index);
    assert.deepEqual(placed, { ok: true, nodeId: "b", port: 30000, freeMemoryMb: 2048 });
    const none = placeInstance({ group: lobby }, [node("a", { shuttingDown: true }), node("b", { cordoned: true })], index);
    assert.equal(!none.ok && none.code, "NODES_SHUTTING_DOWN");
    assert.equal(!none.ok && none.message, "every ONLINE node is shutting down or cordoned (1 shutting down, 1 cordoned)");
    const alone = placeInstance({ group: lobby }, [node("local", { shuttingDown: true })], index);
    assert.equal(!alone.ok && alone.message, "every ONLINE node is shutting down or cordoned (1 shutting down)");
  });

  test("memory must fit; the reason names the largest free node", () => {
    const nodes = [node("node-a", { totalMemoryMb: 2048 }), node("node-b", { totalMemoryMb: 1024, usedMemoryMb: 900 })];
    const index = buildPlacementIndex([live("other", "node-a", 30000, 1536)]);
    const result = placeInstance({ group: lobby }, nodes, index);
    assert.equal(!result.ok && result.code, "INSUFFICIENT_MEMORY");
    assert.equal(!result.ok && result.message, "insufficient memory: needs 1024 MB, largest free 512 MB on node-a");
  });

  test("reported usage above the reservations counts against free memory", () => {
    const nodes = [node("a", { totalMemoryMb: 4096, usedMemoryMb: 3500 }), node("b", { totalMemoryMb: 2048 })];
    const result = placeInstance({ group: lobby }, nodes, buildPlacementIndex([]));
    assert.equal(result.ok && result.nodeId, "b");
  });

  test("ports: lowest free port of the range on the chosen node; exhausted everywhere is a reason", () => {
    const small: PlacementGroup = { name: "duel", memoryMb: 10, portRange: { start: 30000, end: 30001 } };
    const nodes = [node("a"), node("b")];
    const index = buildPlacementIndex([live("x", "a", 30000, 10)]);
    const { placed, failure } = placeMany(small, nodes, index, 5);
    assert.deepEqual(
      placed.map((p) => `${p.node}:${p.port}`),
      ["b:30000", "a:30001", "b:30001"],
    );
    assert.equal(failure?.code, "PORTS_EXHAUSTED");
    assert.equal(failure?.message, "port range 30000-30001 exhausted on every candidate node (2)");
  });

  test("a node whose range is exhausted is skipped for the next best", () => {
    const nodes = [node("a", { totalMemoryMb: 100_000 }), node("b")];
    const index = buildPlacementIndex([live("x", "a", 30000), live("x", "a", 30001)]);
    const result = placeInstance({ group: { ...lobby, portRange: { start: 30000, end: 30001 } } }, nodes, index);
    assert.equal(result.ok && result.nodeId, "b");
  });

  test("spread: fewest instances of the group first, then most free memory, then node id", () => {
    const nodes = [node("c"), node("b", { totalMemoryMb: 16384 }), node("a")];
    const { placed } = placeMany(lobby, nodes, buildPlacementIndex([]), 6);
    assert.deepEqual(
      placed.map((p) => p.node),
      ["b", "a", "c", "b", "a", "c"],
    );
  });

  test("finished instances reserve nothing; remove() releases memory, port and count", () => {
    const crashed: PlacementInstance = { ...live("lobby", "a", 30000, 8192), state: "CRASHED" };
    const index = buildPlacementIndex([crashed]);
    const first = placeInstance({ group: lobby }, [node("a")], index);
    assert.deepEqual(first, { ok: true, nodeId: "a", port: 30000, freeMemoryMb: 8192 });
    const big = live("lobby", "a", 30000, 8192);
    index.add(big);
    assert.equal(placeInstance({ group: lobby }, [node("a")], index).ok, false);
    index.remove(big);
    assert.equal(index.groupCount("a", "lobby"), 0);
    assert.equal(placeInstance({ group: lobby }, [node("a")], index).ok, true);
  });

  test("property: never a non-ONLINE or cordoned node, never overcommitted, never a duplicate port", () => {
    const states: NodeState[] = ["ONLINE", "DRAINING", "UNREACHABLE", "OFFLINE"];
    const nodeArb = fc.record({
      state: fc.constantFrom(...states),
      cordoned: fc.boolean(),
      totalMemoryMb: fc.integer({ min: 0, max: 16_384 }),
      usedMemoryMb: fc.integer({ min: 0, max: 4096 }),
    });
    const groupArb = fc.record({
      name: fc.constantFrom("lobby", "bedwars", "duels"),
      memoryMb: fc.integer({ min: 256, max: 4096 }),
      start: fc.integer({ min: 30000, max: 30010 }),
      width: fc.integer({ min: 0, max: 8 }),
    });
    fc.assert(
      fc.property(fc.array(nodeArb, { minLength: 0, maxLength: 8 }), fc.array(groupArb, { minLength: 1, maxLength: 40 }), (specs, requests) => {
        const nodes = specs.map((s, i) => node(`n${i}`, s));
        const byId = new Map(nodes.map((n) => [n.id, n]));
        const index = buildPlacementIndex([]);
        const reserved = new Map<string, number>();
        const ports = new Set<string>();
        for (const r of requests) {
          const group: PlacementGroup = { name: r.name, memoryMb: r.memoryMb, portRange: { start: r.start, end: r.start + r.width } };
          const result = placeInstance({ group }, nodes, index);
          if (!result.ok) continue;
          const target = byId.get(result.nodeId);
          assert.ok(target);
          assert.equal(target.state, "ONLINE");
          assert.equal(target.cordoned, false);
          const after = (reserved.get(target.id) ?? 0) + group.memoryMb;
          assert.ok(after <= target.totalMemoryMb, "reservations never exceed total memory");
          assert.ok(target.totalMemoryMb - Math.max(after - group.memoryMb, target.usedMemoryMb) >= group.memoryMb);
          assert.ok(result.port >= group.portRange.start && result.port <= group.portRange.end);
          const key = `${target.id}:${result.port}`;
          assert.ok(!ports.has(key), `duplicate port ${key}`);
          ports.add(key);
          reserved.set(target.id, after);
          index.add(live(group.name, target.id, result.port, group.memoryMb));
        }
      }),
      { numRuns: 300, seed: 42 },
    );
  });

  test("property: an index kept up to date with add/remove matches one rebuilt from the survivors", () => {
    const instanceArb = fc.record({
      group: fc.constantFrom("lobby", "bedwars"),
      node: fc.constantFrom("a", "b", "c"),
      port: fc.integer({ min: 30000, max: 30005 }),
      memoryMb: fc.integer({ min: 1, max: 2048 }),
      removed: fc.boolean(),
    });
    fc.assert(
      fc.property(fc.array(instanceArb, { maxLength: 30 }), (specs) => {
        // Unique (node, port) pairs, as placement guarantees.
        const seen = new Set<string>();
        const instances = specs.filter((s) => !seen.has(`${s.node}:${s.port}`) && seen.add(`${s.node}:${s.port}`));
        const incremental = buildPlacementIndex([]);
        for (const s of instances) incremental.add(live(s.group, s.node, s.port, s.memoryMb));
        for (const s of instances) if (s.removed) incremental.remove(live(s.group, s.node, s.port, s.memoryMb));
        const rebuilt = buildPlacementIndex(instances.filter((s) => !s.removed).map((s) => live(s.group, s.node, s.port, s.memoryMb)));
        for (const nodeId of ["a", "b", "c"]) {
          assert.equal(incremental.reservedMemoryMb(nodeId), rebuilt.reservedMemoryMb(nodeId));
          for (const group of ["lobby", "bedwars"]) assert.equal(incremental.groupCount(nodeId, group), rebuilt.groupCount(nodeId, group));
          for (let port = 30000; port <= 30005; port++) assert.equal(incremental.portUsed(nodeId, port), rebuilt.portUsed(nodeId, port));
        }
      }),
      { numRuns: 300, seed: 11 },
    );
  });

  test("property: with room everywhere, a group's instances spread within 1 across eligible nodes", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            state: fc.constantFrom<NodeState>("ONLINE", "ONLINE", "DRAINING", "OFFLINE"),
            cordoned: fc.boolean(),
            extraMb: fc.integer({ min: 0, max: 8192 }),
          }),
          { minLength: 1, maxLength: 10 },
        ),
        fc.integer({ min: 1, max: 60 }),
        (specs, count) => {
          const group: PlacementGroup = { name: "lobby", memoryMb: 64, portRange: { start: 30000, end: 30100 } };
          const nodes = specs.map((s, i) => node(`n${i}`, { state: s.state, cordoned: s.cordoned, totalMemoryMb: 64 * 100 + s.extraMb }));
          const eligible = nodes.filter((n) => n.state === "ONLINE" && !n.cordoned);
          const index = buildPlacementIndex([]);
          const { placed, failure } = placeMany(group, nodes, index, count);
          if (eligible.length === 0) {
            assert.ok(failure);
            return;
          }
          assert.equal(placed.length, count);
          const counts = eligible.map((n) => index.groupCount(n.id, "lobby"));
          assert.ok(Math.max(...counts) - Math.min(...counts) <= 1, `counts ${counts.join(",")}`);
        },
      ),
      { numRuns: 300, seed: 7 },
    );
  });

  test("nodes on one machine share its ports, also when the machine is learnt after the instances were added (rehost)", () => {
    const hosts = new Map<string, string>();
    const index = new PlacementIndex((nodeId) => hosts.get(nodeId) ?? nodeId);
    const group: PlacementGroup = { name: "lobby", memoryMb: 64, portRange: { start: 30000, end: 30005 } };
    index.add({ group: "lobby", node: "a", port: 30000, memoryMb: 64, state: "RUNNING" });
    assert.equal(lowestFreePort(group, "b", index), 30000, "unknown machines: separate port spaces");
    hosts.set("a", "vm");
    hosts.set("b", "vm");
    hosts.set("c", "other");
    assert.equal(lowestFreePort(group, "b", index), 30000, "a's ports still count under its old machine");
    index.rehost("a");
    assert.equal(lowestFreePort(group, "b", index), 30001, "b shares a's machine");
    assert.equal(lowestFreePort(group, "a", index), 30001, "and a its own port");
    assert.equal(lowestFreePort(group, "c", index), 30000, "c is another machine");
    index.remove({ group: "lobby", node: "a", port: 30000, memoryMb: 64, state: "RUNNING" });
    assert.equal(lowestFreePort(group, "b", index), 30000, "freed for the whole machine");
  });
});

describe("start pacing (startSlotsFull)", () => {
  const full = (ids: string[]) => (nodeId: string) => ids.includes(nodeId);

  test("a node whose start slots are full is passed over for one that has a slot", () => {
    const result = placeInstance({ group: lobby, startSlotsFull: full(["a"]) }, [node("a"), node("b", { usedMemoryMb: 4096 })], buildPlacementIndex([]));
    assert.equal(result.ok && result.nodeId, "b");
  });

  test("only nodes with full start slots could take it: START_SLOTS_BUSY, a wait", () => {
    const nodes = [node("a"), node("b"), node("c", { totalMemoryMb: 512 })];
    const result = placeInstance({ group: lobby, startSlotsFull: full(["a", "b"]) }, nodes, buildPlacementIndex([]));
    assert.equal(result.ok, false);
    assert.equal(!result.ok && result.code, "START_SLOTS_BUSY");
    assert.equal(!result.ok && result.code === "START_SLOTS_BUSY" && result.busyNodes, 2);
  });

  test("a node that could never take it is not a wait: the real reason is kept", () => {
    const tiny = [node("a", { totalMemoryMb: 512 })];
    const memory = placeInstance({ group: lobby, startSlotsFull: full(["a"]) }, tiny, buildPlacementIndex([]));
    assert.equal(!memory.ok && memory.code, "INSUFFICIENT_MEMORY");
    const onePort: PlacementGroup = { ...lobby, portRange: { start: 30000, end: 30000 } };
    const taken = buildPlacementIndex([live("lobby", "a", 30000)]);
    const ports = placeInstance({ group: onePort, startSlotsFull: full(["a"]) }, [node("a")], taken);
    assert.equal(!ports.ok && ports.code, "PORTS_EXHAUSTED");
  });

  test("without startSlotsFull every node takes instances as before", () => {
    const result = placeInstance({ group: lobby }, [node("a")], buildPlacementIndex([]));
    assert.equal(result.ok && result.nodeId, "a");
  });
});
