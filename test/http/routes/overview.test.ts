import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { startTestApp, type TestApp } from "../../support/http-app.js";

describe("overview route", () => {
  let t: TestApp;

  before(async () => {
    t = await startTestApp();
  });
  after(async () => t.close());

  test("counts nodes, live instances, players and groups", async () => {
    const viewer = await t.tokenFor("VIEWER");
    await t.groups.create({ name: "lobby", platform: "paper" });
    await t.nodes.upsert("n1", { host: "10.0.0.1" });
    const base = { group: "lobby", node: "n1", port: 30000, memoryMb: 512, startedAt: null, deploymentRevision: 1 };
    await t.instances.save({ ...base, id: "a", state: "RUNNING", playerCount: 0 });
    await t.instances.save({ ...base, id: "b", state: "STOPPED", playerCount: 0 });
    // Players are counted by the registry the plugin routes feed.
    for (const n of [1, 2, 3]) await t.players.join({ instanceId: "a", group: "lobby", proxy: false }, `00000000-0000-4000-8000-00000000000${n}`, `p${n}`);
    const res = await t.request("GET", "/api/v1/overview", { token: viewer });
    assert.equal(res.status, 200);
    assert.deepEqual(res.json, { nodeCount: 1, instanceCount: 1, playerCount: 3, groupCount: 1 });
  });
});
