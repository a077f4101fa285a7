import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { hashToken, NODE_TOKENS_COLLECTION } from "../../../src/domain/node-tokens/node-token-service.js";
import { startTestApp, type TestApp } from "../../support/http-app.js";

describe("node join token routes", () => {
  let t: TestApp;
  let admin: string;

  before(async () => {
    t = await startTestApp();
    admin = await t.tokenFor("ADMIN");
  });
  after(async () => t.close());

  test("create returns the value once; list and audit never carry it; the store keeps only the hash", async () => {
    const res = await t.request("POST", "/api/v1/admin/tokens", { token: admin, body: { nodeId: "node-7", ttl: "2h" } });
    assert.equal(res.status, 201);
    const { token, id } = res.json;
    assert.match(token, /^cnt_/);
    assert.equal(Date.parse(res.json.expiresAt) - Date.parse(res.json.createdAt), 7200_000);

    const list = await t.request("GET", "/api/v1/admin/tokens", { token: admin });
    assert.equal(list.status, 200);
    assert.equal(list.json[0].id, id);
    assert.equal(list.json[0].status, "ACTIVE");
    assert.equal(list.text.includes(token), false);
    assert.equal(list.text.includes(hashToken(token)), false);

    const record = (await t.audit.keyset({ cursor: "", pageSize: 1 })).data[0];
    assert.equal(record.action, "token.create");
    assert.equal(JSON.stringify(record).includes(token), false);

    const stored = await t.documents.collection(NODE_TOKENS_COLLECTION).get(id);
    assert.equal(stored?.hash, hashToken(token));
    assert.equal(JSON.stringify(stored).includes(token), false);
  });

  test("default ttl is 1h; bad ttl values are 422 naming the field", async () => {
    const res = await t.request("POST", "/api/v1/admin/tokens", { token: admin });
    assert.equal(res.status, 201);
    assert.equal(Date.parse(res.json.expiresAt) - Date.parse(res.json.createdAt), 3600_000);
    for (const [body, field] of [
      [{ ttl: "forever" }, "ttl"],
      [{ ttlSeconds: 5 }, "ttlSeconds"],
      [{ ttlSeconds: "abc" }, "ttlSeconds"],
      [{ nodeId: 42 }, "nodeId"],
      [{ secret: "x" }, "secret"],
    ] as const) {
      const bad = await t.request("POST", "/api/v1/admin/tokens", { token: admin, body });
      assert.equal(bad.status, 422, JSON.stringify(body));
      assert.ok(bad.json.error.message.startsWith(`${field}:`), bad.json.error.message);
    }
  });

  test("DELETE revokes (204), audits token.revoke; the token can no longer be consumed", async () => {
    const created = await t.request("POST", "/api/v1/admin/tokens", { token: admin, body: {} });
    const res = await t.request("DELETE", `/api/v1/admin/tokens/${created.json.id}`, { token: admin });
    assert.equal(res.status, 204);
    const record = (await t.audit.keyset({ cursor: "", pageSize: 1 })).data[0];
    assert.equal(record.action, "token.revoke");
    assert.equal(JSON.parse(record.before as string).status, "ACTIVE");
    const list = await t.request("GET", "/api/v1/admin/tokens", { token: admin });
    assert.equal(list.json.find((x: { id: string }) => x.id === created.json.id).status, "REVOKED");
    assert.deepEqual(await t.nodeTokens.consume(created.json.token, "n"), { ok: false, reason: "REVOKED" });
    const missing = await t.request("DELETE", "/api/v1/admin/tokens/ghost", { token: admin });
    assert.equal(missing.status, 404);
    assert.equal(missing.json.error.message, "Token not found: ghost");
  });

  test("VIEWER may not list tokens", async () => {
    const viewer = await t.tokenFor("VIEWER");
    assert.equal((await t.request("GET", "/api/v1/admin/tokens", { token: viewer })).status, 403);
  });
});
