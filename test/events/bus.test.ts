import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { FakeClock } from "../support/fake-clock.js";
import { createEventBus } from "../../src/events/bus.js";
import { BUILT_IN_EVENT_TYPES, EVENT_FIELDS, EventTypes, isBuiltInEventType, type EventPayloads } from "../../src/events/event-types.js";
import type { CloudEvent } from "../../src/events/types.js";
import type { Logger } from "../../src/logs/types.js";

function recordingLogger() {
  const entries: { level: string; message: string; err?: unknown }[] = [];
  const at = (level: string) => (message: string, err?: unknown) => entries.push({ level, message, err });
  const logger: Logger = { name: "cloud.events", trace: at("TRACE"), debug: at("DEBUG"), info: at("INFO"), warn: at("WARN"), error: at("ERROR") };
  return { logger, entries };
}

function bus(opts: { queueEventsMax?: number } = {}) {
  const { logger, entries } = recordingLogger();
  const clock = new FakeClock(Date.UTC(2026, 0, 1));
  return { bus: createEventBus({ logger, clock, ...opts }), entries, clock };
}

describe("event bus", () => {
  it("delivers asynchronously, never during publish", async () => {
    const { bus: events } = bus();
    const seen: string[] = [];
    events.subscribe(EventTypes.GROUP_CREATED, (e) => {
      seen.push(e.data.groupName as string);
    });
    events.publish(EventTypes.GROUP_CREATED, { groupName: "lobby" });
    assert.deepEqual(seen, [], "no delivery on the publisher's stack");
    await Promise.resolve();
    assert.deepEqual(seen, [], "not even in the same microtask checkpoint");
    await events.flush();
    assert.deepEqual(seen, ["lobby"]);
  });

  it("builds the event: type, source (default controller), UTC timestamp from the clock, data", async () => {
    const { bus: events } = bus();
    const got: CloudEvent[] = [];
    events.subscribeAll((e) => {
      got.push(e);
    });
    events.publish("GROUP_DELETED", { groupName: "a" });
    events.publish("GROUP_DELETED", { groupName: "b" }, "controller-2");
    events.publishEvent({ type: "shop:purchase", source: "instance-1", timestamp: "", data: null as never });
    await events.flush();
    assert.deepEqual(got[0], { type: "GROUP_DELETED", source: "controller", timestamp: "2026-01-01T00:00:00.000Z", data: { groupName: "a" } });
    assert.equal(got[1].source, "controller-2");
    assert.deepEqual(got[2].data, {}, "null payload becomes empty");
    assert.equal(got[2].timestamp, "2026-01-01T00:00:00.000Z", "missing timestamp becomes now");
    assert.ok(Object.isFrozen(got[0]));
  });

  it("isolates handlers: a throwing or rejecting handler is logged and the others still run", async () => {
    const { bus: events, entries } = bus();
    const seen: string[] = [];
    events.subscribe("NODE_CONNECTED", () => {
      throw new Error("sync boom");
    });
    events.subscribe("NODE_CONNECTED", async () => {
      throw new Error("async boom");
    });
    events.subscribe("NODE_CONNECTED", (e) => {
      seen.push(e.data.nodeId as string);
    });
    events.publish("NODE_CONNECTED", { nodeId: "n1", sessionId: "s", timestamp: "t" });
    events.publish("NODE_CONNECTED", { nodeId: "n2", sessionId: "s", timestamp: "t" });
    await events.flush();
    assert.deepEqual(seen, ["n1", "n2"]);
    const errors = entries.filter((e) => e.level === "ERROR");
    assert.equal(errors.length, 4);
    assert.match(errors[0].message, /Event handler for NODE_CONNECTED failed/);
    assert.deepEqual(new Set(errors.map((e) => (e.err as Error).message)), new Set(["sync boom", "async boom"]));
  });

  it("does not block other handlers on a slow async handler", async () => {
    const { bus: events } = bus();
    const order: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    events.subscribe("X", async () => {
      await gate;
      order.push("slow");
    });
    events.subscribe("X", () => {
      order.push("fast");
    });
    events.publish("X", {});
    const flushed = events.flush();
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(order, ["fast"]);
    release();
    await flushed;
    assert.deepEqual(order, ["fast", "slow"]);
  });

  it("stops delivering after unsubscribe, including events already queued", async () => {
    const { bus: events } = bus();
    let count = 0;
    const handle = events.subscribe("GROUP_UPDATED", () => {
      count++;
    });
    events.publish("GROUP_UPDATED", { groupName: "a" });
    await events.flush();
    events.publish("GROUP_UPDATED", { groupName: "a" });
    handle.unsubscribe();
    events.publish("GROUP_UPDATED", { groupName: "a" });
    await events.flush();
    assert.equal(count, 1);
    assert.equal(events.subscriptionCount, 0);
    handle.unsubscribe(); // idempotent
  });

  it("subscribe(type) gets only that type; subscribeAll gets everything", async () => {
    const { bus: events } = bus();
    const typed: string[] = [];
    const all: string[] = [];
    events.subscribe("GROUP_CREATED", (e) => {
      typed.push(e.type);
    });
    events.subscribeAll((e) => {
      all.push(e.type);
    });
    events.publish("GROUP_CREATED", { groupName: "a" });
    events.publish("GROUP_DELETED", { groupName: "a" });
    events.publish("shop:purchase", { item: 1 });
    await events.flush();
    assert.deepEqual(typed, ["GROUP_CREATED"]);
    assert.deepEqual(all, ["GROUP_CREATED", "GROUP_DELETED", "shop:purchase"]);
  });

  it("subscribeByType delivers only custom events with that type string", async () => {
    const { bus: events } = bus();
    const custom: string[] = [];
    events.subscribeByType("shop:purchase", (e) => {
      custom.push(e.type);
    });
    events.subscribeByType("GROUP_CREATED", (e) => {
      custom.push(`builtin ${e.type}`);
    });
    events.publish("shop:purchase", {});
    events.publish("shop:refund", {});
    events.publish("GROUP_CREATED", { groupName: "a" });
    await events.flush();
    assert.deepEqual(custom, ["shop:purchase"]);
  });

  it("on(type) ANDs where() and field() filters", async () => {
    const { bus: events } = bus();
    const seen: string[] = [];
    events
      .on("INSTANCE_STATE_CHANGED")
      .field("group", "lobby")
      .where((e) => e.data.newState === "RUNNING")
      .subscribe((e) => {
        seen.push(e.data.instanceId as string);
      });
    const change = (instanceId: string, group: string, newState: string) =>
      events.publish("INSTANCE_STATE_CHANGED", { instanceId, group, nodeId: "n", oldState: "STARTING", newState });
    change("lobby-1", "lobby", "RUNNING");
    change("lobby-2", "lobby", "STOPPED");
    change("bw-1", "bedwars", "RUNNING");
    events.publish("GROUP_CREATED", { group: "lobby", newState: "RUNNING" });
    await events.flush();
    assert.deepEqual(seen, ["lobby-1"]);
  });

  it("builders are immutable: a branch does not add filters to its parent", async () => {
    const { bus: events } = bus();
    const seen: string[] = [];
    const base = events.on("X");
    base.field("k", 1);
    base.subscribe((e) => {
      seen.push(String(e.data.k));
    });
    events.publish("X", { k: 2 });
    await events.flush();
    assert.deepEqual(seen, ["2"]);
  });

  it("a throwing filter is logged and isolated", async () => {
    const { bus: events, entries } = bus();
    let delivered = 0;
    events
      .on("X")
      .where(() => {
        throw new Error("bad filter");
      })
      .subscribe(() => {
        delivered += 100;
      });
    events.subscribe("X", () => {
      delivered++;
    });
    events.publish("X", {});
    await events.flush();
    assert.equal(delivered, 1);
    assert.equal(entries.filter((e) => e.level === "ERROR").length, 1);
  });

  it("delivers events published from a handler", async () => {
    const { bus: events } = bus();
    const seen: string[] = [];
    events.subscribe("A", () => events.publish("B", {}));
    events.subscribe("B", (e) => {
      seen.push(e.type);
    });
    events.publish("A", {});
    await events.flush();
    assert.deepEqual(seen, ["B"]);
  });

  it("bounds the queue: beyond the maximum new events are dropped and logged", async () => {
    const { bus: events, entries } = bus({ queueEventsMax: 3 });
    let count = 0;
    events.subscribeAll(() => {
      count++;
    });
    for (let i = 0; i < 5; i++) events.publish("X", { i });
    assert.equal(events.pendingEvents, 3);
    assert.equal(events.droppedEvents, 2);
    await events.flush();
    assert.equal(count, 3);
    assert.equal(entries.filter((e) => e.level === "WARN").length, 1);
  });

  it("delivers many events in order", async () => {
    const { bus: events } = bus();
    const seen: number[] = [];
    events.subscribe("N", (e) => {
      seen.push(e.data.i as number);
    });
    for (let i = 0; i < 5000; i++) events.publish("N", { i });
    await events.flush();
    assert.equal(seen.length, 5000);
    assert.ok(seen.every((v, i) => v === i));
  });

  it("rejects an empty type", () => {
    const { bus: events } = bus();
    assert.throws(() => events.publish("", {}), TypeError);
  });
});

describe("built-in event types", () => {
  it("lists every type of spec document 3 exactly once, keyed by its own name", () => {
    const expected = [
      "NODE_CONNECTED",
      "NODE_DISCONNECTED",
      "NODE_STATUS",
      "NODE_HEARTBEAT_STALE",
      "NODE_HEARTBEAT_RESUMED",
      "NODE_DRAIN_REQUESTED",
      "NODE_DRAIN_COMPLETED",
      "NODE_CACHE_STATUS",
      "INSTANCE_STATE_CHANGED",
      "INSTANCE_CRASHED",
      "INSTANCE_DRAINING",
      "INSTANCE_CONSOLE_OUTPUT",
      "INSTANCE_METRICS",
      "GROUP_CREATED",
      "GROUP_UPDATED",
      "GROUP_DELETED",
      "GROUP_AGGREGATES_UPDATED",
      "GROUP_MAINTENANCE_CHANGED",
      "GROUP_CRASH_LOOP",
      "DEPLOYMENT_CREATED",
      "DEPLOYMENT_COMPLETED",
      "PLAYER_CONNECTED",
      "PLAYER_DISCONNECTED",
      "PLAYER_TRANSFER",
      "PLAYER_JOURNEY",
      "TEMPLATE_UPDATED",
      "MAINTENANCE_UPDATED",
      "MODULE_LOADED",
      "MODULE_UNLOADED",
      "MODULE_FRONTEND_RELOADED",
      "CAPABILITY_REGISTERED",
      "CAPABILITY_UNREGISTERED",
      "CAPABILITY_PROVIDER_CHANGED",
      "CLUSTER_CONFIG_CHANGED",
      "CHOREOGRAPHY_OVERLAY_ACTIVATED",
      "CHOREOGRAPHY_OVERLAY_DEACTIVATED",
    ];
    assert.deepEqual([...BUILT_IN_EVENT_TYPES].sort(), [...expected].sort());
    for (const [key, value] of Object.entries(EventTypes)) assert.equal(key, value);
    assert.deepEqual(Object.keys(EVENT_FIELDS).sort(), [...expected].sort());
    assert.ok(isBuiltInEventType("GROUP_CREATED"));
    assert.ok(!isBuiltInEventType("shop:purchase"));
  });

  it("names the spec's fields for a few representative types", () => {
    assert.deepEqual(EVENT_FIELDS.NODE_DRAIN_REQUESTED, ["nodeId", "shutdownAfterDrain", "drainTimeoutSeconds", "kickMessage", "timestamp"]);
    assert.deepEqual(EVENT_FIELDS.GROUP_MAINTENANCE_CHANGED, ["groupName", "maintenance", "message"]);
    assert.deepEqual(EVENT_FIELDS.INSTANCE_CRASHED, ["instanceId", "group", "nodeId", "exitCode", "classification", "logTail", "uptimeMs"]);
    const payload: EventPayloads["GROUP_MAINTENANCE_CHANGED"] = { groupName: "lobby", maintenance: true, message: null };
    const asRecord: Record<string, unknown> = payload; // payloads are publishable as-is
    assert.equal(asRecord.groupName, "lobby");
  });
});
