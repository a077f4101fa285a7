import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import type { CloudEvent } from "../../../src/events/types.js";
import { startTestApp, type TestApp } from "../../support/http-app.js";

describe("node routes", () => {
  let t: TestApp;
  let operator: string;
  let viewer: string;
  const seen: CloudEvent[] = [];

  before(async () => {
    t = await startTestApp();
    operator = await t.tokenFor("OPERATOR");
    viewer = await t.tokenFor("VIEWER");
    await t.nodes.upsert("node-a", { host: "10.0.0.1" });
    await t.nodes.upsert("node-b", { host: "10.0.0.2", state: "OFFLINE" });
    t.events.subscribeAll((event) => void seen.push(event));
  });
  after(async () => t.close());

  const newestAudit = async () => (await t.audit.keyset({ cursor: "", pageSize: 1 })).data[0];

  test("list filters by state; an unknown state is 422 naming state", async () => {
    const all = await t.request("GET", "/api/v1/nodes", { token: viewer });
    assert.deepEqual(all.json.map((n: { id: string }) => n.id), ["node-a", "node-b"]);
    const offline = await t.request("GET", "/api/v1/nodes?state=OFFLINE", { token: viewer });
    assert.deepEqual(offline.json.map((n: { id: string }) => n.id), ["node-b"]);
    const bad = await t.request("GET", "/api/v1/nodes?state=SLEEPING", { token: viewer });
    assert.equal(bad.status, 422);
    assert.match(bad.json.error.message, /^state:/);
  });

  test("drain → DRAINING with NODE_DRAIN_REQUESTED and a node.drain audit record", async () => {
    const res = await t.request("POST", "/api/v1/nodes/node-a/drain", { token: operator });
    assert.equal(res.status, 200);
    assert.equal(res.json.state, "DRAINING");
    const record = await newestAudit();
    assert.equal(record.action, "node.drain");
    assert.equal(record.username, "operator-user");
    assert.equal(JSON.parse(record.before as string).state, "ONLINE");
    assert.equal(JSON.parse(record.after as string).state, "DRAINING");
    await t.events.flush();
    const event = seen.find((e) => e.type === "NODE_DRAIN_REQUESTED");
    assert.equal(event?.data.nodeId, "node-a");
    assert.equal(event?.data.shutdownAfterDrain, false);
  });

  test("undrain → ONLINE with NODE_DRAIN_COMPLETED; from another state 409 INVALID_STATE", async () => {
    const res = await t.request("POST", "/api/v1/nodes/node-a/undrain", { token: operator });
    assert.equal(res.status, 200);
    assert.equal(res.json.state, "ONLINE");
    assert.equal((await newestAudit()).action, "node.undrain");
    await t.events.flush();
    assert.ok(seen.some((e) => e.type === "NODE_DRAIN_COMPLETED" && e.data.nodeId === "node-a"));

    const again = await t.request("POST", "/api/v1/nodes/node-a/undrain", { token: operator });
    assert.equal(again.status, 409);
    assert.deepEqual(again.json.error, { code: "INVALID_STATE", message: "Node node-a is not DRAINING (state: ONLINE)", status: 409 });
  });

  test("get, 404 and permissions", async () => {
    const got = await t.request("GET", "/api/v1/nodes/node-b", { token: viewer });
    assert.equal(got.json.host, "10.0.0.2");
    const missing = await t.request("POST", "/api/v1/nodes/ghost/drain", { token: operator });
    assert.equal(missing.status, 404);
    assert.equal(missing.json.error.message, "Node not found: ghost");
    assert.equal((await t.request("POST", "/api/v1/nodes/node-b/drain", { token: viewer })).status, 403);
  });
});
