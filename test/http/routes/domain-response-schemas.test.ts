import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { FormatRegistry } from "@sinclair/typebox";
import { Value } from "@sinclair/typebox/value";
import { startTestApp, type TestApp } from "../../support/http-app.js";

const isoDateTime = (value: string) => /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/.test(value) && !Number.isNaN(Date.parse(value));

describe("domain routes answer what their response schemas declare", () => {
  let t: TestApp;
  let admin: string;
  const ids: Record<string, string> = {};

  before(async () => {
    if (!FormatRegistry.Has("date-time")) FormatRegistry.Set("date-time", isoDateTime);
    t = await startTestApp();
    admin = await t.tokenFor("ADMIN");
    await t.groups.create({ name: "lobby", platform: "paper", platformVersion: "1.21" });
    await t.nodes.upsert("n1", { host: "10.0.0.1", lastHeartbeatAt: new Date().toISOString() });
    await t.instances.save({
      id: "lobby-1",
      group: "lobby",
      node: "n1",
      state: "RUNNING",
      port: 30000,
      playerCount: 2,
      memoryMb: 1024,
      startedAt: new Date().toISOString(),
      deploymentRevision: 1,
    });
    ids.crash = (
      await t.crashes.record({ instanceId: "lobby-1", group: "lobby", nodeId: "n1", exitCode: 1, classification: "UNKNOWN", logTail: [], uptimeMs: 5 })
    ).id;
  });
  after(async () => t.close());

  const check = async (method: string, routePath: string, url: string, body?: unknown) => {
    const res = await t.request(method, url, { token: admin, body });
    const def = t.registry.routes.find((r) => r.def.method === method.toLowerCase() && r.def.path === routePath)?.def;
    assert.ok(def?.response, `${method} ${routePath} declares a response`);
    assert.equal(res.status, def.successStatus ?? 200, res.text);
    const first = Value.Errors(def.response, res.json).First();
    assert.equal(first, undefined, `${method} ${url}: ${first?.path} ${first?.message}`);
    return res.json;
  };

  test("every JSON route of the domain modules", async () => {
    await check("GET", "/api/v1/groups", "/api/v1/groups");
    await check("GET", "/api/v1/groups/:name", "/api/v1/groups/lobby");
    await check("POST", "/api/v1/groups", "/api/v1/groups", { name: "pvp", platform: "paper" });
    await check("PATCH", "/api/v1/groups/:name", "/api/v1/groups/pvp", { maintenance: true });
    await check("GET", "/api/v1/services", "/api/v1/services");
    await check("GET", "/api/v1/services/:id", "/api/v1/services/lobby-1");
    await check("GET", "/api/v1/crashes", "/api/v1/crashes");
    await check("GET", "/api/v1/crashes/:id", `/api/v1/crashes/${ids.crash}`);
    await check("GET", "/api/v1/nodes", "/api/v1/nodes");
    await check("GET", "/api/v1/nodes/:id", "/api/v1/nodes/n1");
    await check("POST", "/api/v1/nodes/:id/drain", "/api/v1/nodes/n1/drain");
    await check("POST", "/api/v1/nodes/:id/undrain", "/api/v1/nodes/n1/undrain");
    await check("POST", "/api/v1/admin/tokens", "/api/v1/admin/tokens", { ttl: "1h" });
    await check("GET", "/api/v1/admin/tokens", "/api/v1/admin/tokens");
    await check("GET", "/api/v1/overview", "/api/v1/overview");
  });
});
