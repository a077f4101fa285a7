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
    assert.deepEqual(
      all.json.map((n: { id: string }) => n.id),
      ["node-a", "node-b"],
    );
    const offline = await t.request("GET", "/api/v1/nodes?state=OFFLINE", { token: viewer });
    assert.deepEqual(
      offline.json.map((n: { id: string }) => n.id),
      ["node-b"],
    );
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

  const auditCount = async () => (await t.audit.keyset({ cursor: "", pageSize: 1000 })).data.length;
  const envelope = (status: number, code: string, message: string) => ({ code, message, status });

  test("cordon sets cordoned (state kept) with a node.cordon audit record; cordoning again is 200 and unchanged", async () => {
    await t.nodes.upsert("node-c", { host: "10.0.0.3", state: "UNREACHABLE" });
    const res = await t.request("POST", "/api/v1/nodes/node-c/cordon", { token: operator });
    assert.equal(res.status, 200);
    assert.deepEqual([res.json.cordoned, res.json.state], [true, "UNREACHABLE"]);
    const record = await newestAudit();
    assert.deepEqual([record.action, record.resourceType, record.resourceId, record.username], ["node.cordon", "node", "node-c", "operator-user"]);
    assert.equal(JSON.parse(record.before as string).cordoned, false);
    assert.equal(JSON.parse(record.after as string).cordoned, true);
    const again = await t.request("POST", "/api/v1/nodes/node-c/cordon", { token: operator });
    assert.deepEqual([again.status, again.json.cordoned], [200, true]);
    assert.equal((await t.request("GET", "/api/v1/nodes/node-c", { token: viewer })).json.cordoned, true);
  });

  test("uncordon clears cordoned with a node.uncordon audit record; a node not cordoned is 409 INVALID_STATE", async () => {
    const res = await t.request("POST", "/api/v1/nodes/node-c/uncordon", { token: operator });
    assert.deepEqual([res.status, res.json.cordoned, res.json.state], [200, false, "UNREACHABLE"]);
    const record = await newestAudit();
    assert.equal(record.action, "node.uncordon");
    assert.equal(JSON.parse(record.before as string).cordoned, true);
    assert.equal(JSON.parse(record.after as string).cordoned, false);
    const audits = await auditCount();
    const again = await t.request("POST", "/api/v1/nodes/node-c/uncordon", { token: operator });
    assert.equal(again.status, 409);
    assert.deepEqual(again.json.error, envelope(409, "INVALID_STATE", "Node node-c is not cordoned"));
    assert.equal(await auditCount(), audits, "a refused call is not audited");
  });

  test("revoke-cert marks the certificate revoked with a node.revoke-cert audit record; again is 200 with the first time", async () => {
    const res = await t.request("POST", "/api/v1/nodes/node-c/revoke-cert", { token: operator });
    assert.equal(res.status, 200);
    assert.equal(res.json.certificateRevoked, true);
    assert.ok(Date.parse(res.json.certificateRevokedAt) > 0);
    const record = await newestAudit();
    assert.equal(record.action, "node.revoke-cert");
    assert.deepEqual([JSON.parse(record.before as string).certificateRevoked, JSON.parse(record.after as string).certificateRevoked], [false, true]);
    const again = await t.request("POST", "/api/v1/nodes/node-c/revoke-cert", { token: operator });
    assert.deepEqual([again.status, again.json.certificateRevokedAt], [200, res.json.certificateRevokedAt]);
    const listed = (await t.request("GET", "/api/v1/nodes", { token: viewer })).json.find((n: { id: string }) => n.id === "node-c");
    assert.equal(listed.certificateRevoked, true);
  });

  test("unrevoke-cert lifts the revocation with a node.unrevoke-cert audit record; not revoked is 409 INVALID_STATE", async () => {
    const res = await t.request("POST", "/api/v1/nodes/node-c/unrevoke-cert", { token: operator });
    assert.deepEqual([res.status, res.json.certificateRevoked, res.json.certificateRevokedAt], [200, false, null]);
    const record = await newestAudit();
    assert.equal(record.action, "node.unrevoke-cert");
    assert.equal(JSON.parse(record.before as string).certificateRevoked, true);
    assert.equal(JSON.parse(record.after as string).certificateRevoked, false);
    const again = await t.request("POST", "/api/v1/nodes/node-c/unrevoke-cert", { token: operator });
    assert.equal(again.status, 409);
    assert.deepEqual(again.json.error, envelope(409, "INVALID_STATE", "The certificate of node node-c is not revoked"));
  });

  test("delete answers 204 with a node.delete audit record (before, no after); the node is gone", async () => {
    const res = await t.request("DELETE", "/api/v1/nodes/node-c", { token: operator });
    assert.equal(res.status, 204);
    assert.equal(res.text, "");
    const record = await newestAudit();
    assert.deepEqual([record.action, record.resourceId], ["node.delete", "node-c"]);
    assert.equal(JSON.parse(record.before as string).id, "node-c");
    assert.equal("after" in record, false);
    assert.deepEqual(JSON.parse(record.details as string), { force: false });
    const gone = await t.request("GET", "/api/v1/nodes/node-c", { token: viewer });
    assert.deepEqual(gone.json.error, envelope(404, "NOT_FOUND", "Node not found: node-c"));
  });

  test("delete: 409 INVALID_STATE while ONLINE, 409 CONFLICT with live instances unless force=true, 422 for a bad force", async () => {
    const audits = await auditCount();
    const online = await t.request("DELETE", "/api/v1/nodes/node-a?force=true", { token: operator });
    assert.equal(online.status, 409);
    const onlineMessage = "Node node-a is ONLINE: only an UNREACHABLE or OFFLINE node can be deleted (stop its daemon or revoke its certificate first)";
    assert.deepEqual(online.json.error, envelope(409, "INVALID_STATE", onlineMessage));

    await t.nodes.upsert("node-d", { host: "10.0.0.4", state: "OFFLINE" });
    const instance = { group: "lobby", port: 30000, playerCount: 0, memoryMb: 512, startedAt: null, deploymentRevision: 1 };
    await t.instances.save({ ...instance, id: "d-1", node: "node-d", state: "RUNNING" });
    const busy = await t.request("DELETE", "/api/v1/nodes/node-d", { token: operator });
    assert.equal(busy.status, 409);
    assert.deepEqual(busy.json.error, envelope(409, "CONFLICT", "Node node-d has 1 live instance; pass force=true to delete it anyway"));
    const bad = await t.request("DELETE", "/api/v1/nodes/node-d?force=maybe", { token: operator });
    assert.equal(bad.status, 422);
    assert.match(bad.json.error.message, /^force:/);
    assert.equal(await auditCount(), audits, "refused deletes are not audited");

    const forced = await t.request("DELETE", "/api/v1/nodes/node-d?force=true", { token: operator });
    assert.equal(forced.status, 204);
    const record = await newestAudit();
    assert.equal(record.action, "node.delete");
    assert.deepEqual(JSON.parse(record.details as string), { force: true });
  });

  test("every new route: 404 for an unknown node, 403 for VIEWER (nothing changes, nothing audited)", async () => {
    const routes: [string, string][] = [
      ["POST", "/cordon"],
      ["POST", "/uncordon"],
      ["POST", "/revoke-cert"],
      ["POST", "/unrevoke-cert"],
      ["DELETE", ""],
    ];
    const audits = await auditCount();
    for (const [method, suffix] of routes) {
      const missing = await t.request(method, `/api/v1/nodes/ghost${suffix}`, { token: operator });
      assert.equal(missing.status, 404, `${method} ${suffix}`);
      assert.deepEqual(missing.json.error, envelope(404, "NOT_FOUND", "Node not found: ghost"));
      const denied = await t.request(method, `/api/v1/nodes/node-b${suffix}`, { token: viewer });
      assert.equal(denied.status, 403, `${method} ${suffix} as VIEWER`);
      assert.deepEqual(denied.json.error, envelope(403, "FORBIDDEN", "Missing permission: nodes.manage"));
    }
    assert.equal(await auditCount(), audits);
    const nodeB = (await t.request("GET", "/api/v1/nodes/node-b", { token: viewer })).json;
    assert.deepEqual([nodeB.cordoned, nodeB.certificateRevoked], [false, false]);
  });
});
