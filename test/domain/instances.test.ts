import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { GroupService } from "../../src/domain/groups/group-service.js";
import { InstanceService, type InstanceFields } from "../../src/domain/instances/instance-service.js";
import { NodeService } from "../../src/domain/nodes/node-service.js";
import { OverviewService } from "../../src/domain/overview/overview-service.js";
import { apiError } from "./assertions.js";
import { openFixture } from "./domain-fixtures.js";

type Fixture = Awaited<ReturnType<typeof openFixture>>;

describe("InstanceService", () => {
  let fx: Fixture;
  let instances: InstanceService;

  const instance = (id: string, over: Partial<InstanceFields>): InstanceFields => ({
    id,
    group: "lobby",
    node: "node-a",
    state: "RUNNING",
    port: 30000,
    playerCount: 0,
    memoryMb: 1024,
    startedAt: "2026-01-15T11:59:00.000Z",
    deploymentRevision: 1,
    ...over,
  });

  before(async () => {
    fx = await openFixture();
    instances = new InstanceService(fx.store, fx.clock);
    await instances.save(instance("lobby-1", { playerCount: 4 }));
    await instances.save(instance("lobby-2", { node: "node-b", state: "STARTING", startedAt: null }));
    await instances.save(instance("bedwars-1", { group: "bedwars", playerCount: 8, port: 30101 }));
    await instances.save(instance("bedwars-2", { group: "bedwars", node: "node-b", state: "STOPPED", stoppedAt: "2026-01-15T11:59:30.000Z" }));
  });
  after(async () => fx.close());

  test("get returns the single form with uptimeMs computed from startedAt", async () => {
    assert.deepEqual(await instances.get("lobby-1"), {
      id: "lobby-1",
      group: "lobby",
      node: "node-a",
      state: "RUNNING",
      port: 30000,
      playerCount: 4,
      memoryMb: 1024,
      uptimeMs: 60_000,
      startedAt: "2026-01-15T11:59:00.000Z",
      deploymentRevision: 1,
    });
    fx.clock.advance(5000);
    assert.equal((await instances.get("lobby-1")).uptimeMs, 65_000);
    fx.clock.advance(-5000);
  });

  test("uptime is 0 before the start and frozen after the stop", async () => {
    assert.equal((await instances.get("lobby-2")).uptimeMs, 0);
    assert.equal((await instances.get("bedwars-2")).uptimeMs, 30_000);
  });

  test("an unknown id is 404 naming it", async () => {
    await assert.rejects(instances.get("nope"), apiError(404, "NOT_FOUND", /^Instance not found: nope$/));
  });

  test("list filters by group, node and state; empty values are ignored", async () => {
    const ids = async (filter: Parameters<InstanceService["list"]>[0]) => (await instances.list(filter)).map((i) => i.id);
    assert.deepEqual(await ids({}), ["bedwars-1", "bedwars-2", "lobby-1", "lobby-2"]);
    assert.deepEqual(await ids({ group: "lobby" }), ["lobby-1", "lobby-2"]);
    assert.deepEqual(await ids({ node: "node-b" }), ["bedwars-2", "lobby-2"]);
    assert.deepEqual(await ids({ state: "RUNNING" }), ["bedwars-1", "lobby-1"]);
    assert.deepEqual(await ids({ group: "bedwars", node: "node-b" }), ["bedwars-2"]);
    assert.deepEqual(await ids({ group: "", node: "", state: undefined }), ["bedwars-1", "bedwars-2", "lobby-1", "lobby-2"]);
    assert.equal("memoryMb" in (await instances.list({}))[0], false, "the list form omits memoryMb");
  });

  test("concurrent identical lists share one read and return equal results", async () => {
    const [a, b] = await Promise.all([instances.list({ group: "lobby" }), instances.list({ group: "lobby" })]);
    assert.deepEqual(a, b);
  });

  test("the overview counts nodes, live instances, their players and groups", async () => {
    const groups = new GroupService(fx.store, fx.events, fx.clock, instances);
    const nodes = new NodeService(fx.store, fx.events, fx.clock, instances);
    await groups.create({ name: "lobby", platform: "paper" });
    await groups.create({ name: "bedwars", platform: "paper" });
    await nodes.upsert("node-a", { host: "10.0.0.1" });
    const overview = new OverviewService(groups, instances, nodes);
    assert.deepEqual(await overview.get(), { nodeCount: 1, instanceCount: 3, playerCount: 12, groupCount: 2 });
  });
});
