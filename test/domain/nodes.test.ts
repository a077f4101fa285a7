import { after, before, beforeEach, describe, test } from "node:test";
import assert from "node:assert/strict";
import { InstanceService } from "../../src/domain/instances/instance-service.js";
import { defaultDrainOptions, NodeService } from "../../src/domain/nodes/node-service.js";
import { apiError } from "./assertions.js";
import { openFixture } from "./domain-fixtures.js";

type Fixture = Awaited<ReturnType<typeof openFixture>>;

describe("NodeService", () => {
  let fx: Fixture;
  let nodes: NodeService;
  let instances: InstanceService;

  before(async () => {
    fx = await openFixture();
    instances = new InstanceService(fx.store, fx.clock);
    nodes = new NodeService(fx.store, fx.events, fx.clock, instances);
    await nodes.upsert("node-a", { host: "10.0.0.1", totalMemoryMb: 16384, version: "0.1.0", labels: { zone: "eu" } });
    await nodes.upsert("node-b", { host: "10.0.0.2", state: "OFFLINE" });
    await nodes.upsert("node-c", { host: "10.0.0.3", state: "UNREACHABLE" });
    const base = { group: "lobby", port: 30000, playerCount: 0, memoryMb: 512, startedAt: null, deploymentRevision: 1 };
    await instances.save({ ...base, id: "i1", node: "node-a", state: "RUNNING" });
    await instances.save({ ...base, id: "i2", node: "node-a", state: "CRASHED" });
  });
  after(async () => fx.close());
  beforeEach(() => {
    fx.events.published.length = 0;
  });

  test("get returns the record with the live instance count", async () => {
    const node = await nodes.get("node-a");
    assert.equal(node.state, "ONLINE");
    assert.equal(node.host, "10.0.0.1");
    assert.equal(node.instanceCount, 1);
    assert.deepEqual(node.labels, { zone: "eu" });
    assert.equal(node.registeredAt, "2026-01-15T12:00:00.000Z");
    assert.equal(node.drainRequestedAt, null);
    await assert.rejects(nodes.get("ghost"), apiError(404, "NOT_FOUND", /^Node not found: ghost$/));
  });

  test("list filters by state", async () => {
    assert.deepEqual((await nodes.list()).map((n) => n.id), ["node-a", "node-b", "node-c"]);
    assert.deepEqual((await nodes.list("OFFLINE")).map((n) => n.id), ["node-b"]);
    assert.deepEqual((await nodes.list("DRAINING")).map((n) => n.id), []);
  });

  test("drain moves any state to DRAINING and publishes NODE_DRAIN_REQUESTED once", async () => {
    const { before: old, after: drained, changed } = await nodes.drain("node-b");
    assert.equal(old.state, "OFFLINE");
    assert.equal(drained.state, "DRAINING");
    assert.equal(changed, true);
    assert.deepEqual(fx.events.published, [
      {
        type: "NODE_DRAIN_REQUESTED",
        data: {
          nodeId: "node-b",
          shutdownAfterDrain: false,
          drainTimeoutSeconds: defaultDrainOptions.drainTimeoutSeconds,
          kickMessage: defaultDrainOptions.kickMessage,
          timestamp: "2026-01-15T12:00:00.000Z",
        },
      },
    ]);
    const again = await nodes.drain("node-b");
    assert.equal(again.changed, false);
    assert.equal(fx.events.published.length, 1, "draining a DRAINING node publishes nothing");
    assert.equal((await nodes.get("node-b")).state, "DRAINING");
  });

  test("undrain moves DRAINING to ONLINE and publishes NODE_DRAIN_COMPLETED", async () => {
    await nodes.drain("node-a");
    fx.events.published.length = 0;
    fx.clock.advance(2000);
    const { before: old, after: online } = await nodes.undrain("node-a");
    assert.equal(old.state, "DRAINING");
    assert.equal(online.state, "ONLINE");
    assert.equal(online.drainRequestedAt, null);
    assert.deepEqual(fx.events.published, [{ type: "NODE_DRAIN_COMPLETED", data: { nodeId: "node-a", timestamp: "2026-01-15T12:00:02.000Z" } }]);
  });

  test("undrain from any other state is 409 INVALID_STATE and changes nothing", async () => {
    for (const id of ["node-a", "node-c"]) {
      const state = (await nodes.get(id)).state;
      await assert.rejects(nodes.undrain(id), apiError(409, "INVALID_STATE", new RegExp(`^Node ${id} is not DRAINING \\(state: ${state}\\)$`)));
      assert.equal((await nodes.get(id)).state, state);
    }
    assert.deepEqual(fx.events.published, []);
    await assert.rejects(nodes.undrain("ghost"), apiError(404, "NOT_FOUND", /^Node not found: ghost$/));
    await assert.rejects(nodes.drain("ghost"), apiError(404, "NOT_FOUND", /^Node not found: ghost$/));
  });

  test("upsert keeps the registration time and stored fields not given", async () => {
    fx.clock.advance(60_000);
    const updated = await nodes.upsert("node-c", { host: "10.0.0.3", usedMemoryMb: 100, lastHeartbeatAt: "2026-01-15T12:01:00.000Z" });
    assert.equal(updated.registeredAt, "2026-01-15T12:00:00.000Z");
    assert.equal(updated.state, "UNREACHABLE");
    assert.equal(updated.usedMemoryMb, 100);
  });
});
