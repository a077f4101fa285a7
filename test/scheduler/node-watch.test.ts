// The node watch alone, on the fake clock and the real node service: the gateway's CONNECTED and
// DISCONNECTED drive the node actors, which keep only the grace period; a node unreachable past it
// is written OFFLINE and its supervised instances get NODE_LOST, but only when no controller holds
// a session of it. A disconnect of an older session than the newest connected changes nothing.
// A connected node has no timer.
import assert from "node:assert/strict";
import { after, before, beforeEach, describe, test } from "node:test";
import type { InstanceEvent } from "../../actors/instance/transitions.js";
import { LiveInstances } from "../../src/scheduler/live-instances.js";
import { NodeWatch } from "../../src/scheduler/node-watch.js";
import { SupervisedInstances } from "../../src/scheduler/supervised-instances.js";
import { instanceRecord, openSchedulerFixture, recordingLogger, type SchedulerFixture } from "./support.js";

const graceMs = 30_000;

describe("node watch", () => {
  let fx: SchedulerFixture;
  let live: LiveInstances;
  let supervised: SupervisedInstances;
  let pending: Promise<unknown>[];
  let calls: string[];
  let watch: NodeWatch;
  /** Nodes some controller holds a session of (the registry's answer). */
  let sessions: Set<string>;
  let node = "";
  let n = 0;

  before(async () => {
    fx = await openSchedulerFixture("cloud-node-watch-");
  });
  after(() => fx.close());

  beforeEach(async () => {
    node = `node-${++n}`;
    live = new LiveInstances();
    supervised = new SupervisedInstances();
    pending = [];
    calls = [];
    sessions = new Set();
    watch = new NodeWatch({
      nodes: fx.nodes,
      live,
      supervised,
      clock: fx.clock,
      logger: recordingLogger(),
      nodeTimeouts: { offlineGraceMs: graceMs },
      toInstance: (id: string, event: InstanceEvent) => void calls.push(`${id} ${event.type}`),
      invalidateNodes: () => void calls.push("invalidate"),
      reconnected: (nodeId) => void calls.push(`reconnected ${nodeId}`),
      hostSeen: () => undefined,
      sessionHeld: async (nodeId) => sessions.has(nodeId),
      capacityAdded: () => void calls.push("capacity"),
      track: (work) => void pending.push(work),
    });
  });

  async function settled(): Promise<void> {
    while (pending.length > 0) await pending.shift();
  }
  async function advance(ms: number): Promise<void> {
    await fx.clock.advanceAsync(ms);
    await settled();
  }
  /** What the gateway does when the node's last session ends: the record, then the event. */
  async function disconnect(nodeId: string): Promise<void> {
    await fx.nodes.upsert(nodeId, { host: nodeId, state: "UNREACHABLE" });
    watch.event(nodeId, { type: "DISCONNECTED" });
  }
  function place(id: string, nodeId: string, follow: boolean): void {
    live.put(instanceRecord({ id, group: "lobby", node: nodeId, state: "RUNNING" }));
    if (follow) supervised.follow(id, "RUNNING");
  }

  test("a node actor per registered node, in its recorded state; a connected node runs no timer", async () => {
    await fx.nodes.upsert(node, { host: "host-1", state: "ONLINE" });
    await fx.nodes.upsert(`${node}-drained`, { host: "host-1", state: "DRAINING" });
    await watch.start();
    assert.equal(watch.stateOf(node), "ONLINE");
    assert.equal(watch.stateOf(`${node}-drained`), "DRAINING");
    assert.equal(fx.clock.pendingTimers(), 0, "liveness is the gateway's: no heartbeat window here");
    watch.stop();
  });

  test("unreachable past the grace period: OFFLINE, and only the supervised instances on the node are replaced", async () => {
    await fx.nodes.upsert(node, { host: node, state: "ONLINE" });
    await watch.start();
    place("lobby-1", node, true);
    place("lobby-2", node, true);
    place("hub-1", node, false);
    place("lobby-3", "elsewhere", true);
    await disconnect(node);
    assert.equal(watch.stateOf(node), "UNREACHABLE");
    await advance(graceMs - 1);
    assert.deepEqual(calls, ["invalidate"], "nothing replaced within the grace period");
    await advance(1);
    assert.equal(watch.stateOf(node), "OFFLINE");
    assert.equal((await fx.nodes.get(node)).state, "OFFLINE");
    assert.deepEqual(calls, ["invalidate", "lobby-1 NODE_LOST", "lobby-2 NODE_LOST", "invalidate"]);
    await advance(10 * graceMs);
    assert.equal(calls.length, 4, "replaced once");
    watch.stop();
  });

  test("back within the grace period: nothing replaced; what waited for the node is sent", async () => {
    await fx.nodes.upsert(node, { host: node, state: "ONLINE" });
    await watch.start();
    place("lobby-1", node, true);
    await disconnect(node);
    await advance(graceMs - 1);
    await fx.nodes.upsert(node, { host: node, state: "ONLINE" });
    watch.event(node, { type: "CONNECTED" });
    await advance(10 * graceMs);
    assert.equal(watch.stateOf(node), "ONLINE");
    assert.deepEqual(calls, ["invalidate", "invalidate", `reconnected ${node}`, "capacity"]);
    assert.equal(fx.clock.pendingTimers(), 0);
    watch.stop();
  });

  test("a node first heard of by its CONNECTED is read from its record; a deleted one is ignored", async () => {
    await watch.start();
    await fx.nodes.upsert(node, { host: "host-9", state: "ONLINE" });
    watch.event(node, { type: "CONNECTED" });
    watch.event("never-registered", { type: "CONNECTED" });
    await settled();
    assert.equal(watch.stateOf(node), "ONLINE");
    assert.equal(watch.stateOf("never-registered"), undefined);
    watch.event(node, { type: "DRAIN" });
    watch.event(node, { type: "UNDRAIN" });
    assert.equal(watch.stateOf(node), "ONLINE");
    assert.equal(calls.filter((c) => c === "capacity").length, 3, "two connects and an undrain");
    watch.stop();
  });

  test("a controller that starts during an outage gives the node the whole grace period from then", async () => {
    await fx.nodes.upsert(node, { host: node, state: "UNREACHABLE" });
    place("lobby-1", node, true);
    await watch.start();
    assert.equal(watch.stateOf(node), "UNREACHABLE");
    await advance(graceMs);
    assert.equal((await fx.nodes.get(node)).state, "OFFLINE");
    assert.ok(calls.includes("lobby-1 NODE_LOST"));
    watch.stop();
  });

  test("the end of an older session than the newest connected one is ignored: the node stays ONLINE", async () => {
    await fx.nodes.upsert(node, { host: node, state: "ONLINE" });
    await watch.start();
    place("lobby-1", node, true);
    watch.event(node, { type: "CONNECTED" }, 4);
    watch.event(node, { type: "CONNECTED" }, 5); // the daemon moved to another controller
    watch.event(node, { type: "DISCONNECTED" }, 4); // the frozen holder of session 4 resumed
    await advance(10 * graceMs);
    assert.equal(watch.stateOf(node), "ONLINE");
    assert.ok(!calls.some((c) => c.endsWith("NODE_LOST")), JSON.stringify(calls));
    watch.event(node, { type: "DISCONNECTED" }, 5);
    assert.equal(watch.stateOf(node), "UNREACHABLE", "the newest session's end counts");
    watch.stop();
  });

  test("a grace period that ends while a controller holds a session of the node: no NODE_LOST, back ONLINE, reconciled", async () => {
    await fx.nodes.upsert(node, { host: node, state: "ONLINE" });
    await watch.start();
    place("lobby-1", node, true);
    await disconnect(node);
    sessions.add(node); // connected elsewhere; this controller missed it
    await advance(graceMs);
    assert.equal(watch.stateOf(node), "ONLINE");
    assert.equal((await fx.nodes.get(node)).state, "UNREACHABLE", "the record is the gateway's to change");
    assert.ok(!calls.some((c) => c.endsWith("NODE_LOST")), JSON.stringify(calls));
    assert.ok(calls.includes(`reconnected ${node}`), "its instances are checked against what it runs");
    watch.stop();
  });

  test("a record ONLINE again when the grace period ends (the connect was missed here): nothing replaced", async () => {
    await fx.nodes.upsert(node, { host: node, state: "ONLINE" });
    await watch.start();
    place("lobby-1", node, true);
    await disconnect(node);
    await fx.nodes.upsert(node, { host: node, state: "ONLINE" });
    await advance(graceMs);
    assert.equal((await fx.nodes.get(node)).state, "ONLINE");
    assert.ok(!calls.some((c) => c.endsWith("NODE_LOST")), JSON.stringify(calls));
    assert.equal(watch.stateOf(node), "ONLINE");
    watch.stop();
  });

  test("a node another controller already wrote OFFLINE: the instances supervised here are still replaced", async () => {
    await fx.nodes.upsert(node, { host: node, state: "ONLINE" });
    await watch.start();
    place("lobby-1", node, true);
    await disconnect(node);
    await fx.nodes.upsert(node, { host: node, state: "OFFLINE" });
    await advance(graceMs);
    assert.ok(calls.includes("lobby-1 NODE_LOST"));
    watch.stop();
  });

  test("stopped: no actor, no timer, and nodes seen later start none", async () => {
    await fx.nodes.upsert(node, { host: node, state: "ONLINE" });
    await watch.start();
    await disconnect(node);
    assert.equal(fx.clock.pendingTimers(), 1, "the grace period");
    watch.stop();
    assert.equal(fx.clock.pendingTimers(), 0);
    watch.seen([{ id: `${node}-late`, host: "h", state: "ONLINE", cordoned: false, drainRequestedAt: null }]);
    assert.equal(watch.stateOf(`${node}-late`), undefined);
  });
});
