// The cross-controller event bridge: buses of several controllers over one memory store or one real
// Redis; every bridged event reaches each peer once and nothing comes back.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { EventBridge, peerEventSource, peerOf } from "../../src/coordination/event-bridge.js";
import { EVENT_BRIDGE_CHANNEL } from "../../src/coordination/keys.js";
import { createEventBus, type ControllerEventBus } from "../../src/events/bus.js";
import { BRIDGED_EVENT_TYPES, EventTypes } from "../../src/events/event-types.js";
import type { CloudEvent } from "../../src/events/types.js";
import { MemoryKvStore } from "../../src/store/memory/memory-kv-store.js";
import type { KvStore } from "../../src/store/ports.js";
import { describeEachKv, recordingLogger, withEnv, type KvEnvironment } from "./support.js";
import { eventually } from "../support/wait.js";

/** Upper bound for a message to cross the store; waits poll, they never sleep this long on success. */
const DELIVERY_TIMEOUT_MS = 5_000;

interface Controller {
  id: string;
  bus: ControllerEventBus;
  bridge: EventBridge;
  seen: CloudEvent[];
}

async function controller(env: KvEnvironment, id: string, channel: string): Promise<Controller> {
  const { logger } = recordingLogger();
  const bus = createEventBus({ logger, clock: env.clock });
  const seen: CloudEvent[] = [];
  bus.subscribeAll((event) => {
    seen.push(event);
  });
  const bridge = new EventBridge({ kv: await env.connect(), bus, controllerId: id, logger, channel });
  await bridge.start();
  return { id, bus, bridge, seen };
}

/**
 * Waits until everything `from` published so far has crossed to `to`: a marker published after
 * it arrives after it (the store delivers one publisher's messages in order).
 */
async function settle(from: Controller, to: Controller): Promise<void> {
  const marker = `marker-${Math.random()}`;
  from.bus.publish(EventTypes.GROUP_DELETED, { groupName: marker });
  await eventually(() => to.seen.some((event) => event.data.groupName === marker), `marker from ${from.id} at ${to.id}`, {
    timeoutMs: DELIVERY_TIMEOUT_MS,
    intervalMs: 2,
  });
  await to.bus.flush();
}

const samplePayloads: Record<string, Record<string, unknown>> = {
  NODE_CONNECTED: { nodeId: "n1", sessionId: "s1", timestamp: "2026-06-01T00:00:00.000Z" },
  NODE_DISCONNECTED: { nodeId: "n1", reason: "stream closed", timestamp: "2026-06-01T00:00:01.000Z" },
  NODE_STATUS: { nodeId: "n1", cpuUsage: 0.25, usedMemoryMb: 512, totalMemoryMb: 4096, lastHeartbeatAt: "2026-06-01T00:00:02.000Z" },
  INSTANCE_STATE_CHANGED: { instanceId: "lobby-1", group: "lobby", nodeId: "n1", oldState: "STARTING", newState: "RUNNING" },
  PLAYER_CONNECTED: { uuid: "u1", name: "alice", instanceId: "lobby-1", group: "lobby" },
  PLAYER_DISCONNECTED: { uuid: "u1", name: "alice", instanceId: "lobby-1", group: "lobby" },
  GROUP_CREATED: { groupName: "lobby" },
  GROUP_UPDATED: { groupName: "lobby" },
  GROUP_DELETED: { groupName: "lobby" },
};

describeEachKv("EventBridge", (makeEnv) => {
  it("carries each of the nine event types to the peer once, tagged with the publisher, with no echo", () =>
    withEnv(makeEnv, async (env) => {
      const channel = `${EVENT_BRIDGE_CHANNEL}:${env.unique("t")}`;
      const a = await controller(env, "c-a", channel);
      const b = await controller(env, "c-b", channel);
      try {
        assert.equal(BRIDGED_EVENT_TYPES.size, 9);
        for (const type of BRIDGED_EVENT_TYPES) a.bus.publish(type, samplePayloads[type]);
        await settle(a, b);
        await settle(b, a); // any echo of a's events by b would arrive at a before b's marker
        const arrived = b.seen.filter((event) => peerOf(event) === "c-a" && !String(event.data.groupName ?? "").startsWith("marker-"));
        assert.deepEqual(
          arrived.map((event) => event.type),
          [...BRIDGED_EVENT_TYPES],
        );
        for (const event of arrived) {
          assert.equal(event.source, peerEventSource("c-a"));
          assert.equal(event.source, "peer:c-a");
          assert.deepEqual(event.data, samplePayloads[event.type]);
          const original = a.seen.find((local) => local.type === event.type && local.source === "controller")!;
          assert.equal(event.timestamp, original.timestamp, "the publisher's timestamp is kept");
        }
        const atA = a.seen.filter((event) => !String(event.data.groupName ?? "").startsWith("marker-"));
        assert.equal(atA.length, 9, "a saw its own events once and nothing came back");
        assert.ok(atA.every((event) => event.source === "controller"));
      } finally {
        await Promise.all([a.bridge.stop(), b.bridge.stop()]);
      }
    }));

  it("does not bridge other event types", () =>
    withEnv(makeEnv, async (env) => {
      const channel = `${EVENT_BRIDGE_CHANNEL}:${env.unique("t")}`;
      const a = await controller(env, "c-a", channel);
      const b = await controller(env, "c-b", channel);
      try {
        a.bus.publish(EventTypes.INSTANCE_CONSOLE_OUTPUT, { instanceId: "lobby-1", line: "hello", timestampMs: 1 });
        a.bus.publish(EventTypes.TEMPLATE_UPDATED, { templateName: "base", oldHash: null, newHash: "ab" });
        a.bus.publish("SNAPSHOT:CREATED", { id: "s1" });
        await settle(a, b);
        assert.deepEqual(
          b.seen.filter((event) => peerOf(event) !== null).map((event) => event.type),
          [EventTypes.GROUP_DELETED],
          "only the marker",
        );
      } finally {
        await Promise.all([a.bridge.stop(), b.bridge.stop()]);
      }
    }));

  it("three controllers: each event reaches both peers exactly once and nothing loops", () =>
    withEnv(makeEnv, async (env) => {
      const channel = `${EVENT_BRIDGE_CHANNEL}:${env.unique("t")}`;
      const controllers = [await controller(env, "c-a", channel), await controller(env, "c-b", channel), await controller(env, "c-c", channel)];
      const [a, b, c] = controllers;
      try {
        a.bus.publish(EventTypes.PLAYER_CONNECTED, samplePayloads.PLAYER_CONNECTED);
        b.bus.publish(EventTypes.GROUP_CREATED, { groupName: "bedwars" });
        for (const from of controllers) for (const to of controllers) if (from !== to) await settle(from, to);
        const count = (at: Controller, type: string, source: string) => at.seen.filter((event) => event.type === type && event.source === source).length;
        assert.equal(count(b, EventTypes.PLAYER_CONNECTED, "peer:c-a"), 1);
        assert.equal(count(c, EventTypes.PLAYER_CONNECTED, "peer:c-a"), 1);
        assert.equal(count(a, EventTypes.PLAYER_CONNECTED, "controller"), 1);
        assert.equal(a.seen.filter((event) => event.type === EventTypes.PLAYER_CONNECTED).length, 1, "no echo at the publisher");
        assert.equal(count(a, EventTypes.GROUP_CREATED, "peer:c-b"), 1);
        assert.equal(count(c, EventTypes.GROUP_CREATED, "peer:c-b"), 1);
        assert.equal(b.seen.filter((event) => event.type === EventTypes.GROUP_CREATED).length, 1);
        for (const at of controllers) {
          assert.ok(
            at.seen.every((event) => peerOf(event) !== at.id),
            `${at.id} never receives its own events from the channel`,
          );
        }
      } finally {
        await Promise.all(controllers.map((each) => each.bridge.stop()));
      }
    }));

  it("never forwards an event that came from a peer, and ignores its own and unreadable messages", () =>
    withEnv(makeEnv, async (env) => {
      const channel = `${EVENT_BRIDGE_CHANNEL}:${env.unique("t")}`;
      const a = await controller(env, "c-a", channel);
      const b = await controller(env, "c-b", channel);
      const raw = await env.connect();
      const onChannel: string[] = [];
      const unsubscribe = await raw.subscribe(channel, (message) => onChannel.push(message));
      try {
        a.bus.publishEvent({ type: EventTypes.GROUP_UPDATED, source: peerEventSource("c-z"), timestamp: "", data: { groupName: "relayed" } });
        const message = (origin: string, extra: Record<string, unknown> = {}) =>
          JSON.stringify({
            v: 1,
            origin,
            type: EventTypes.GROUP_UPDATED,
            timestamp: "2026-06-01T00:00:00.000Z",
            data: { groupName: `from-${origin}` },
            ...extra,
          });
        await raw.publish(channel, message("c-b")); // claims to be b: b drops it, a takes it
        await raw.publish(channel, "not json");
        await raw.publish(channel, message("c-x", { v: 2 }));
        await raw.publish(channel, message("c-x", { type: EventTypes.TEMPLATE_UPDATED }));
        await raw.publish(channel, message("c-x", { data: null }));
        await raw.publish(channel, message("c|x"));
        await settle(b, a);
        await eventually(() => a.bridge.rejectedMessages === 5 && b.bridge.rejectedMessages === 5, "rejected messages counted", {
          timeoutMs: DELIVERY_TIMEOUT_MS,
          intervalMs: 2,
        });
        assert.ok(!onChannel.some((m) => m.includes("relayed")), "the peer event was not sent again");
        assert.deepEqual(
          a.seen.filter((event) => event.data.groupName === "from-c-b").map((event) => event.source),
          ["peer:c-b"],
        );
        assert.equal(b.seen.filter((event) => event.data.groupName === "from-c-b").length, 0, "b ignores messages of its own origin");
      } finally {
        await unsubscribe();
        await Promise.all([a.bridge.stop(), b.bridge.stop()]);
      }
    }));

  it("stops both ways and leaves no subscription behind", () =>
    withEnv(makeEnv, async (env) => {
      const channel = `${EVENT_BRIDGE_CHANNEL}:${env.unique("t")}`;
      const a = await controller(env, "c-a", channel);
      const b = await controller(env, "c-b", channel);
      const c = await controller(env, "c-c", channel);
      try {
        assert.equal(a.bus.subscriptionCount, 1 + 9);
        await a.bridge.stop();
        assert.equal(a.bus.subscriptionCount, 1);
        a.bus.publish(EventTypes.GROUP_CREATED, { groupName: "after-stop-a" });
        b.bus.publish(EventTypes.GROUP_CREATED, { groupName: "after-stop-b" });
        await settle(b, c);
        await sleep(20);
        await a.bus.flush();
        assert.ok(!a.seen.some((event) => event.data.groupName === "after-stop-b"), "a no longer receives");
        assert.ok(!c.seen.some((event) => event.data.groupName === "after-stop-a"), "a no longer sends");
        assert.ok(c.seen.some((event) => event.data.groupName === "after-stop-b"));
      } finally {
        await Promise.all([b.bridge.stop(), c.bridge.stop()]);
      }
    }));
});

describe("EventBridge bounds", () => {
  it("drops and counts events beyond the in-flight bound while the store does not answer", async () => {
    const { logger, records } = recordingLogger();
    const inner = new MemoryKvStore();
    const pending: (() => void)[] = [];
    const stalled: KvStore = Object.assign(Object.create(inner) as KvStore, {
      publish: () => new Promise<void>((resolve) => pending.push(resolve)),
    });
    const bus = createEventBus({ logger });
    const bridge = new EventBridge({ kv: stalled, bus, controllerId: "c-a", logger, outboundInFlightEventsMax: 2 });
    await bridge.start();
    for (let i = 0; i < 5; i++) bus.publish(EventTypes.GROUP_UPDATED, { groupName: `g${i}` });
    await bus.flush();
    assert.equal(pending.length, 2);
    assert.equal(bridge.droppedEvents, 3);
    assert.ok(records.some((r) => r.level === "WARN" && /dropped 1 so far/.test(r.message)));
    for (const resolve of pending.splice(0)) resolve();
    await bridge.flush();
    bus.publish(EventTypes.GROUP_UPDATED, { groupName: "again" });
    await bus.flush();
    assert.equal(pending.length, 1, "room again once the store answered");
    pending[0]();
    await bridge.stop();
    await inner.close();
  });

  it("counts failed publishes and keeps going", async () => {
    const { logger, records } = recordingLogger();
    const inner = new MemoryKvStore();
    let fail = true;
    const flaky: KvStore = Object.assign(Object.create(inner) as KvStore, {
      publish: (channel: string, message: string) => (fail ? Promise.reject(new Error("connection lost")) : inner.publish(channel, message)),
    });
    const bus = createEventBus({ logger });
    const bridge = new EventBridge({ kv: flaky, bus, controllerId: "c-a", logger });
    await bridge.start();
    bus.publish(EventTypes.GROUP_UPDATED, { groupName: "lost" });
    await bus.flush();
    await bridge.flush();
    assert.equal(bridge.failedEvents, 1);
    assert.ok(records.some((r) => r.level === "WARN" && /publishing failed/.test(r.message)));
    fail = false;
    bus.publish(EventTypes.GROUP_UPDATED, { groupName: "sent" });
    await bus.flush();
    await bridge.flush();
    assert.equal(bridge.failedEvents, 1);
    await bridge.stop();
    await inner.close();
  });
});
