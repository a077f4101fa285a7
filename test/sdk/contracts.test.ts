// The wire contracts the plugin SDK and the controller share (src/sdk/contracts/) are declared once;
// these tests hold the run-time lists to the spec's text and to every place that spells the fields
// out again at run time (the route's schema, the event's field list, the plugin stream's filter), and
// check what the metrics service keeps and publishes. The types themselves cannot drift: the
// compile-time checks in the contracts, event-types.ts and routes/plugin.ts fail `npm run typecheck`.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { EVENT_FIELDS, isBuiltInEventType } from "../../src/events/event-types.js";
import { createEventBus } from "../../src/events/bus.js";
import type { CloudEvent } from "../../src/events/types.js";
import { MetricsPayloadSchema } from "../../src/http/routes/plugin.js";
import { InstanceMetricsService } from "../../src/plugin-api/instance-metrics.js";
import { PLUGIN_STREAM_EVENT_TYPES } from "../../src/plugin-api/plugin-stream.js";
import { MAINTENANCE_EVENT_TYPES, PLAYER_EVENT_TYPES } from "../../src/sdk/contracts/plugin-events.js";
import { METRICS_FIELDS_NOT_IN_EVENT, METRICS_PAYLOAD_FIELDS, WORLD_METRICS_FIELDS, type MetricsPayload } from "../../src/sdk/contracts/plugin-metrics.js";
import { MemoryKvStore } from "../../src/store/memory/memory-kv-store.js";
import { FakeClock } from "../support/fake-clock.js";
import { eventually } from "../support/wait.js";

// Spec document 3, "Plugin-side objects", the metrics payload row, in its order.
const SPEC_METRICS_PAYLOAD =
  "tps1m tps5m tps15m msptAvg heapUsedMb heapMaxMb heapCommittedMb gcCollections gcTimeMs threadCount daemonThreadCount playerCount maxPlayers worldCount totalEntities totalChunks worlds serverVersion pluginCount uptimeMs".split(
    " ",
  );
const SPEC_WORLD = ["name", "environment", "entityCount", "chunkCount", "playerCount"];
// Spec document 3, "Built-in event types and fields", the INSTANCE_METRICS row.
const SPEC_INSTANCE_METRICS_EVENT =
  "instanceId group tps1m tps5m tps15m msptAvg heapUsedMb heapMaxMb gcCollections gcTimeMs threadCount playerCount maxPlayers worldCount totalEntities totalChunks worlds serverVersion pluginCount".split(
    " ",
  );

const quiet = { name: "test", trace: () => undefined, debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined };

const report: MetricsPayload = {
  tps1m: 19.5,
  tps5m: 19.8,
  tps15m: 19.9,
  msptAvg: 31.2,
  heapUsedMb: 700,
  heapMaxMb: 2048,
  heapCommittedMb: 1024,
  gcCollections: 12,
  gcTimeMs: 340,
  threadCount: 40,
  daemonThreadCount: 17,
  playerCount: 1,
  maxPlayers: 50,
  worldCount: 1,
  totalEntities: 300,
  totalChunks: 900,
  worlds: [{ name: "world", environment: "NORMAL", entityCount: 300, chunkCount: 900, playerCount: 1 }],
  serverVersion: "1.21",
  pluginCount: 3,
  uptimeMs: 60_000,
};

describe("the plugin metrics payload, declared once", () => {
  it("names the spec's fields in the spec's order, and the route's schema accepts exactly them", () => {
    assert.deepEqual([...METRICS_PAYLOAD_FIELDS], SPEC_METRICS_PAYLOAD);
    assert.deepEqual([...WORLD_METRICS_FIELDS], SPEC_WORLD);
    assert.deepEqual(Object.keys(MetricsPayloadSchema.properties), SPEC_METRICS_PAYLOAD);
    assert.deepEqual(Object.keys(MetricsPayloadSchema.properties.worlds.items.properties), SPEC_WORLD);
  });

  it("INSTANCE_METRICS carries the instance, its group and the payload without heapCommittedMb, daemonThreadCount and uptimeMs", () => {
    assert.deepEqual([...METRICS_FIELDS_NOT_IN_EVENT].sort(), ["daemonThreadCount", "heapCommittedMb", "uptimeMs"]);
    const derived = ["instanceId", "group", ...METRICS_PAYLOAD_FIELDS.filter((f) => !(METRICS_FIELDS_NOT_IN_EVENT as readonly string[]).includes(f))];
    assert.deepEqual(derived, SPEC_INSTANCE_METRICS_EVENT);
    assert.deepEqual([...EVENT_FIELDS.INSTANCE_METRICS], SPEC_INSTANCE_METRICS_EVENT);
  });

  it("the metrics service keeps every field of a report (daemonThreadCount too) and publishes the event's fields only", async () => {
    const kv = new MemoryKvStore({});
    const events = createEventBus({ logger: quiet });
    const published: CloudEvent[] = [];
    events.subscribeAll((event) => void published.push(event));
    const metrics = new InstanceMetricsService(kv, events, new FakeClock(1_700_000_000_000));
    const instance = { instanceId: "lobby-1", group: "lobby" };
    const snapshot = await metrics.record(instance, report);
    assert.deepEqual(Object.keys(snapshot).sort(), ["instanceId", "group", ...SPEC_METRICS_PAYLOAD, "reportedAt"].sort());
    assert.equal(snapshot.daemonThreadCount, 17);
    assert.deepEqual(await metrics.latest("lobby-1"), snapshot);
    const event = await eventually(() => published.find((e) => e.type === "INSTANCE_METRICS"), "INSTANCE_METRICS published");
    assert.deepEqual(Object.keys(event.data).sort(), [...SPEC_INSTANCE_METRICS_EVENT].sort());
    assert.deepEqual(event.data, {
      ...instance,
      ...Object.fromEntries(SPEC_INSTANCE_METRICS_EVENT.slice(2).map((f) => [f, report[f as keyof MetricsPayload]])),
    });
  });

  it("a report without the JVM-only fields (a proxy's) is kept with zeros, not refused", async () => {
    const metrics = new InstanceMetricsService(new MemoryKvStore({}), createEventBus({ logger: quiet }), new FakeClock(0));
    const snapshot = await metrics.record({ instanceId: "proxy-1", group: "proxy" }, { playerCount: 4 });
    assert.equal(snapshot.playerCount, 4);
    assert.equal(snapshot.daemonThreadCount, 0);
    assert.equal(snapshot.tps1m, 0);
  });
});

describe("the plugin stream's event types, declared once", () => {
  it("are built-in types of the controller's bus, and exactly what the controller's plugin stream lets through", () => {
    for (const type of [...PLAYER_EVENT_TYPES, ...MAINTENANCE_EVENT_TYPES]) assert.ok(isBuiltInEventType(type), type);
    assert.deepEqual([...PLAYER_EVENT_TYPES], ["PLAYER_CONNECTED", "PLAYER_DISCONNECTED", "PLAYER_TRANSFER", "PLAYER_JOURNEY"]);
    assert.deepEqual([...PLUGIN_STREAM_EVENT_TYPES].sort(), [...PLAYER_EVENT_TYPES, ...MAINTENANCE_EVENT_TYPES].sort());
  });
});
