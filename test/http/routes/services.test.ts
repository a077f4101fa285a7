import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { startTestApp, type TestApp } from "../../support/http-app.js";

describe("instance routes (/api/v1/services)", () => {
  let t: TestApp;
  let viewer: string;

  before(async () => {
    t = await startTestApp();
    viewer = await t.tokenFor("VIEWER");
    const base = { port: 30000, playerCount: 1, memoryMb: 1024, startedAt: "2026-01-01T00:00:00.000Z", deploymentRevision: 3 };
    await t.instances.save({ ...base, id: "lobby-1", group: "lobby", node: "n1", state: "RUNNING" });
    await t.instances.save({ ...base, id: "lobby-2", group: "lobby", node: "n2", state: "STARTING" });
    await t.instances.save({ ...base, id: "pvp-1", group: "pvp", node: "n1", state: "RUNNING" });
  });
  after(async () => t.close());

  const ids = async (query: string) => {
    const res = await t.request("GET", `/api/v1/services${query}`, { token: viewer });
    assert.equal(res.status, 200, res.text);
    assert.ok(Array.isArray(res.json));
    return res.json.map((i: { id: string }) => i.id);
  };

  test("list filters by group, node and state; empty values are ignored", async () => {
    assert.deepEqual(await ids(""), ["lobby-1", "lobby-2", "pvp-1"]);
    assert.deepEqual(await ids("?group=lobby"), ["lobby-1", "lobby-2"]);
    assert.deepEqual(await ids("?node=n1"), ["lobby-1", "pvp-1"]);
    assert.deepEqual(await ids("?state=RUNNING&group=lobby"), ["lobby-1"]);
    assert.deepEqual(await ids("?group=&node=&state="), ["lobby-1", "lobby-2", "pvp-1"]);
    assert.deepEqual(await ids("?group=none"), []);
  });

  test("an unknown state is 422 naming state", async () => {
    const res = await t.request("GET", "/api/v1/services?state=FLYING", { token: viewer });
    assert.equal(res.status, 422);
    assert.match(res.json.error.message, /^state:/);
  });

  test("get returns the single form; unknown is 404 with the id", async () => {
    const res = await t.request("GET", "/api/v1/services/lobby-1", { token: viewer });
    assert.equal(res.status, 200);
    assert.equal(res.json.memoryMb, 1024);
    assert.equal(res.json.deploymentRevision, 3);
    assert.ok(res.json.uptimeMs > 0);
    const missing = await t.request("GET", "/api/v1/services/ghost", { token: viewer });
    assert.equal(missing.status, 404);
    assert.equal(missing.json.error.message, "Instance not found: ghost");
  });

  test("anonymous is 401", async () => {
    assert.equal((await t.request("GET", "/api/v1/services")).status, 401);
  });
});
