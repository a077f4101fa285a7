import { after, before, beforeEach, describe, test } from "node:test";
import assert from "node:assert/strict";
import { GroupService } from "../../src/domain/groups/group-service.js";
import { InstanceService } from "../../src/domain/instances/instance-service.js";
import { apiError } from "./assertions.js";
import { openFixture, RecordingEventBus } from "./domain-fixtures.js";

type Fixture = Awaited<ReturnType<typeof openFixture>>;

describe("GroupService", () => {
  let fx: Fixture;
  let groups: GroupService;
  let instances: InstanceService;
  let events: RecordingEventBus;
  let seq = 0;
  const fresh = () => `g${++seq}`;

  before(async () => {
    fx = await openFixture();
    instances = new InstanceService(fx.store, fx.clock);
    groups = new GroupService(fx.store, fx.events, fx.clock, instances);
  });
  after(async () => fx.close());
  beforeEach(() => {
    events = fx.events;
    events.published.length = 0;
  });

  test("create applies the client defaults and publishes GROUP_CREATED", async () => {
    const name = fresh();
    const group = await groups.create({ name, platform: "paper" });
    assert.deepEqual(
      { ...group, createdAt: undefined, updatedAt: undefined },
      {
        name,
        platform: "paper",
        platformVersion: null,
        jarFile: "server.jar",
        templates: [],
        scalingMode: "DYNAMIC",
        minInstances: 1,
        maxInstances: 10,
        maxPlayers: 100,
        memoryMb: 1024,
        routing: "LOWEST_PLAYERS",
        portRange: { start: 30000, end: 30100 },
        priority: 0,
        maintenance: false,
        static: false,
        updateStrategy: { type: "ROLLING", maxSurge: 1, maxUnavailable: 0 },
        parent: null,
        loadScaling: null,
        paused: false,
        schedulingIssue: null,
        stoppedInstances: [],
        runningInstances: 0,
        totalPlayers: 0,
        createdAt: undefined,
        updatedAt: undefined,
      },
    );
    assert.equal(group.createdAt, "2026-01-15T12:00:00.000Z");
    assert.deepEqual(events.published, [{ type: "GROUP_CREATED", data: { groupName: name } }]);
    assert.deepEqual(await groups.get(name), group);
  });

  test("a STATIC group is static", async () => {
    const group = await groups.create({ name: fresh(), platform: "paper", scalingMode: "STATIC" });
    assert.equal(group.static, true);
  });

  test("a duplicate name is 409 CONFLICT", async () => {
    const name = fresh();
    await groups.create({ name, platform: "paper" });
    await assert.rejects(groups.create({ name, platform: "velocity" }), apiError(409, "CONFLICT", new RegExp(`Group already exists: ${name}`)));
  });

  const invalid: [string, Record<string, unknown>, RegExp][] = [
    ["name starting with a dash", { name: "-lobby", platform: "paper" }, /^name:/],
    ["name with a space", { name: "lob by", platform: "paper" }, /^name:/],
    ["name of 65 characters", { name: "a".repeat(65), platform: "paper" }, /^name:/],
    ["missing name", { platform: "paper" }, /^name:/],
    ["missing platform", { name: "ok" }, /^platform:/],
    ["blank platform", { name: "ok", platform: "  " }, /^platform:/],
    ["negative minInstances", { name: "ok", platform: "paper", minInstances: -1 }, /^minInstances:/],
    ["minInstances above maxInstances", { name: "ok", platform: "paper", minInstances: 5, maxInstances: 2 }, /^minInstances:/],
    ["portRange start above end", { name: "ok", platform: "paper", portRange: { start: 30100, end: 30000 } }, /^portRange\.start:/],
    ["portRange start 0", { name: "ok", platform: "paper", portRange: { start: 0, end: 10 } }, /^portRange\.start:/],
    ["portRange end 65536", { name: "ok", platform: "paper", portRange: { start: 1, end: 65536 } }, /^portRange\.end:/],
    ["memoryMb 0", { name: "ok", platform: "paper", memoryMb: 0 }, /^memoryMb:/],
    ["unknown scalingMode", { name: "ok", platform: "paper", scalingMode: "ELASTIC" }, /^scalingMode:/],
    ["unknown routing", { name: "ok", platform: "paper", routing: "NEAREST" }, /^routing:/],
    ["bad template name", { name: "ok", platform: "paper", templates: ["Bad Name"] }, /^templates\.0:/],
    ["unknown key", { name: "ok", platform: "paper", colour: "red" }, /^colour:/],
    ["read-only aggregate", { name: "ok", platform: "paper", runningInstances: 3 }, /^runningInstances:/],
    ["unknown parent", { name: "ok", platform: "paper", parent: "nope" }, /^parent:/],
  ];
  for (const [label, body, field] of invalid) {
    test(`create rejects ${label} with 422 naming the field`, async () => {
      await assert.rejects(groups.create(body as never), apiError(422, "VALIDATION_ERROR", field));
      assert.equal(events.published.length, 0);
    });
  }

  test("PATCH changes only the given keys and publishes GROUP_UPDATED", async () => {
    const name = fresh();
    await groups.create({ name, platform: "paper" });
    fx.clock.advance(1000);
    events.published.length = 0;
    const { before: old, after: updated } = await groups.update(name, { maxInstances: 20, memoryMb: 2048, routing: "RANDOM" });
    assert.equal(old.maxInstances, 10);
    assert.equal(updated.maxInstances, 20);
    assert.equal(updated.memoryMb, 2048);
    assert.equal(updated.routing, "RANDOM");
    assert.equal(updated.minInstances, 1);
    assert.equal(updated.updatedAt, "2026-01-15T12:00:01.000Z");
    assert.deepEqual(events.published, [{ type: "GROUP_UPDATED", data: { groupName: name } }]);
    assert.deepEqual(await groups.get(name), updated);
  });

  test("PATCH of scalingMode STATIC makes the group static", async () => {
    const name = fresh();
    await groups.create({ name, platform: "paper" });
    const { after: updated } = await groups.update(name, { scalingMode: "STATIC" });
    assert.equal(updated.static, true);
  });

  test("PATCH of a key outside the list is 422 naming it", async () => {
    const name = fresh();
    await groups.create({ name, platform: "paper" });
    await assert.rejects(groups.update(name, { platform: "velocity" } as never), apiError(422, "VALIDATION_ERROR", /^platform:/));
  });

  test("PATCH re-checks the cross-field rules after the merge, naming the changed side", async () => {
    const name = fresh();
    await groups.create({ name, platform: "paper", minInstances: 3, maxInstances: 5 });
    await assert.rejects(groups.update(name, { maxInstances: 2 }), apiError(422, "VALIDATION_ERROR", /^maxInstances:/));
    await assert.rejects(groups.update(name, { minInstances: 6 }), apiError(422, "VALIDATION_ERROR", /^minInstances:/));
    await assert.rejects(groups.update(name, { memoryMb: 0 }), apiError(422, "VALIDATION_ERROR", /^memoryMb:/));
    assert.equal((await groups.get(name)).maxInstances, 5);
  });

  test("maintenance toggles publish GROUP_MAINTENANCE_CHANGED; an unchanged value publishes nothing", async () => {
    const name = fresh();
    await groups.create({ name, platform: "paper" });
    events.published.length = 0;
    await groups.update(name, { maintenance: true });
    assert.deepEqual(events.ofType("GROUP_MAINTENANCE_CHANGED"), [{ groupName: name, maintenance: true, message: `Group ${name} entered maintenance` }]);
    assert.equal(events.ofType("GROUP_UPDATED").length, 1);
    events.published.length = 0;
    await groups.update(name, { maintenance: true });
    assert.deepEqual(events.published, []);
    await groups.update(name, { maintenance: false });
    assert.deepEqual(events.ofType("GROUP_MAINTENANCE_CHANGED"), [{ groupName: name, maintenance: false, message: `Group ${name} left maintenance` }]);
  });

  test("PATCH and DELETE of an unknown group are 404 with the name", async () => {
    await assert.rejects(groups.update("ghost", { maxInstances: 3 }), apiError(404, "NOT_FOUND", /^Group not found: ghost$/));
    await assert.rejects(groups.delete("ghost"), apiError(404, "NOT_FOUND", /^Group not found: ghost$/));
    await assert.rejects(groups.get("ghost"), apiError(404, "NOT_FOUND", /^Group not found: ghost$/));
  });

  test("aggregates count RUNNING and DRAINING instances and their players", async () => {
    const name = fresh();
    await groups.create({ name, platform: "paper" });
    const base = { group: name, node: "n1", port: 30000, memoryMb: 1024, startedAt: "2026-01-15T11:00:00.000Z", deploymentRevision: 1 };
    await instances.save({ ...base, id: `${name}-1`, state: "RUNNING", playerCount: 5 });
    await instances.save({ ...base, id: `${name}-2`, state: "DRAINING", playerCount: 2 });
    await instances.save({ ...base, id: `${name}-3`, state: "STARTING", playerCount: 0 });
    await instances.save({ ...base, id: `${name}-4`, state: "STOPPED", playerCount: 9 });
    const group = await groups.get(name);
    assert.equal(group.runningInstances, 2);
    assert.equal(group.totalPlayers, 7);
    const listed = (await groups.list()).find((g) => g.name === name);
    assert.deepEqual(listed && Object.keys(listed).sort(), [
      "maintenance",
      "maxInstances",
      "maxPlayers",
      "minInstances",
      "name",
      "platform",
      "platformVersion",
      "runningInstances",
      "scalingMode",
      "static",
      "totalPlayers",
    ]);
    assert.equal(listed?.runningInstances, 2);
    assert.equal(listed?.totalPlayers, 7);
  });

  test("delete removes the group, returns it and publishes GROUP_DELETED", async () => {
    const name = fresh();
    await groups.create({ name, platform: "paper" });
    events.published.length = 0;
    const removed = await groups.delete(name);
    assert.equal(removed.name, name);
    assert.deepEqual(events.published, [{ type: "GROUP_DELETED", data: { groupName: name } }]);
    assert.equal(await groups.exists(name), false);
  });

  test("concurrent PATCHes of one group both apply", async () => {
    const name = fresh();
    await groups.create({ name, platform: "paper" });
    await Promise.all([groups.update(name, { maxInstances: 30 }), groups.update(name, { memoryMb: 4096 })]);
    const group = await groups.get(name);
    assert.equal(group.maxInstances, 30);
    assert.equal(group.memoryMb, 4096);
  });
});
