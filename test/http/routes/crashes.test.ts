import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { startTestApp, type TestApp } from "../../support/http-app.js";

describe("crash routes", () => {
  let t: TestApp;
  let viewer: string;
  let firstId: string;

  before(async () => {
    t = await startTestApp();
    viewer = await t.tokenFor("VIEWER");
    const nowMs = Date.now();
    const report = { exitCode: 1, classification: "OUT_OF_MEMORY", logTail: ["boom"], uptimeMs: 10 };
    firstId = (await t.crashes.record({ ...report, instanceId: "lobby-1", group: "lobby", nodeId: "n1", timestampMs: nowMs - 3 * 3600_000 })).id;
    await t.crashes.record({ ...report, instanceId: "lobby-2", group: "lobby", nodeId: "n2", timestampMs: nowMs - 2 * 3600_000 });
    await t.crashes.record({ ...report, instanceId: "pvp-1", group: "pvp", nodeId: "n1", timestampMs: nowMs - 3600_000 });
  });
  after(async () => t.close());

  const instanceIds = async (query: string) => {
    const res = await t.request("GET", `/api/v1/crashes${query}`, { token: viewer });
    assert.equal(res.status, 200, res.text);
    return res.json.map((c: { instanceId: string }) => c.instanceId);
  };

  test("list is newest first and filters by group, node and from", async () => {
    assert.deepEqual(await instanceIds(""), ["pvp-1", "lobby-2", "lobby-1"]);
    assert.deepEqual(await instanceIds("?group=lobby"), ["lobby-2", "lobby-1"]);
    assert.deepEqual(await instanceIds("?node=n1"), ["pvp-1", "lobby-1"]);
    const from = new Date(Date.now() - 2.5 * 3600_000).toISOString();
    assert.deepEqual(await instanceIds(`?from=${encodeURIComponent(from)}`), ["pvp-1", "lobby-2"]);
    assert.deepEqual(await instanceIds("?group=&node=&from="), ["pvp-1", "lobby-2", "lobby-1"]);
  });

  test("an invalid from is 422 naming from", async () => {
    const res = await t.request("GET", "/api/v1/crashes?from=last-week", { token: viewer });
    assert.equal(res.status, 422);
    assert.equal(res.json.error.code, "VALIDATION_ERROR");
    assert.match(res.json.error.message, /^from:/);
  });

  test("get returns the record with both field spellings; unknown is 404", async () => {
    const res = await t.request("GET", `/api/v1/crashes/${firstId}`, { token: viewer });
    assert.equal(res.status, 200);
    assert.equal(res.json.nodeId, "n1");
    assert.equal(res.json.node, "n1");
    assert.equal(res.json.crashedAt, res.json.timestamp);
    const missing = await t.request("GET", "/api/v1/crashes/ghost", { token: viewer });
    assert.equal(missing.status, 404);
    assert.equal(missing.json.error.message, "Crash not found: ghost");
  });
});
