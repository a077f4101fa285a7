import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import type { CloudEvent } from "../../../src/events/types.js";
import { startTestApp, type TestApp } from "../../support/http-app.js";

describe("group routes", () => {
  let t: TestApp;
  let admin: string;
  let viewer: string;
  const seen: CloudEvent[] = [];

  before(async () => {
    t = await startTestApp();
    admin = await t.tokenFor("ADMIN");
    viewer = await t.tokenFor("VIEWER");
    t.events.subscribeAll((event) => void seen.push(event));
  });
  after(async () => t.close());

  const newestAudit = async () => (await t.audit.keyset({ cursor: "", pageSize: 1 })).data[0];

  test("POST creates with defaults (201), GET returns the full record, the list the list form", async () => {
    const created = await t.request("POST", "/api/v1/groups", { token: admin, body: { name: "lobby", platform: "paper", jarFile: "server.jar" } });
    assert.equal(created.status, 201);
    assert.equal(created.json.name, "lobby");
    assert.equal(created.json.scalingMode, "DYNAMIC");
    assert.deepEqual(created.json.portRange, { start: 30000, end: 30100 });
    assert.equal(created.json.runningInstances, 0);

    const got = await t.request("GET", "/api/v1/groups/lobby", { token: viewer });
    assert.equal(got.status, 200);
    assert.deepEqual(got.json, created.json);

    const list = await t.request("GET", "/api/v1/groups", { token: viewer });
    assert.equal(list.status, 200);
    assert.ok(Array.isArray(list.json), "list routes return bare arrays");
    const item = list.json.find((g: { name: string }) => g.name === "lobby");
    assert.equal(item.jarFile, undefined, "the list form omits the full-record fields");
    assert.equal(item.static, false);

    const record = await newestAudit();
    assert.equal(record.action, "group.create");
    assert.equal(record.username, "admin");
    assert.equal(record.resourceType, "group");
    assert.equal(record.resourceId, "lobby");
    assert.equal(record.before, undefined);
    assert.equal(JSON.parse(record.after as string).name, "lobby");

    await t.events.flush();
    assert.ok(seen.some((e) => e.type === "GROUP_CREATED" && e.data.groupName === "lobby"));
  });

  test("a duplicate name is 409 CONFLICT in the envelope", async () => {
    await t.request("POST", "/api/v1/groups", { token: admin, body: { name: "dup", platform: "paper" } });
    const res = await t.request("POST", "/api/v1/groups", { token: admin, body: { name: "dup", platform: "paper" } });
    assert.equal(res.status, 409);
    assert.deepEqual(res.json, { error: { code: "CONFLICT", message: "Group already exists: dup", status: 409 } });
  });

  const invalid: [string, Record<string, unknown>, string][] = [
    ["bad name", { name: "no spaces", platform: "paper" }, "name"],
    ["missing platform", { name: "x1" }, "platform"],
    ["min above max", { name: "x2", platform: "paper", minInstances: 4, maxInstances: 3 }, "minInstances"],
    ["negative min", { name: "x3", platform: "paper", minInstances: -1 }, "minInstances"],
    ["port start above end", { name: "x4", platform: "paper", portRange: { start: 40000, end: 30000 } }, "portRange.start"],
    ["port end beyond 65535", { name: "x5", platform: "paper", portRange: { start: 30000, end: 70000 } }, "portRange.end"],
    ["memoryMb zero", { name: "x6", platform: "paper", memoryMb: 0 }, "memoryMb"],
    ["unknown scalingMode", { name: "x7", platform: "paper", scalingMode: "AUTO" }, "scalingMode"],
    ["string for an int", { name: "x8", platform: "paper", maxInstances: "ten" }, "maxInstances"],
  ];
  for (const [label, body, field] of invalid) {
    test(`POST with ${label} is 422 VALIDATION_ERROR naming ${field}`, async () => {
      const res = await t.request("POST", "/api/v1/groups", { token: admin, body });
      assert.equal(res.status, 422);
      assert.equal(res.json.error.code, "VALIDATION_ERROR");
      assert.ok(res.json.error.message.startsWith(`${field}:`), res.json.error.message);
    });
  }

  test("PATCH updates the listed keys, audits before/after and publishes maintenance changes", async () => {
    await t.request("POST", "/api/v1/groups", { token: admin, body: { name: "patchme", platform: "paper" } });
    seen.length = 0;
    const res = await t.request("PATCH", "/api/v1/groups/patchme", { token: admin, body: { maxInstances: 12, maintenance: true } });
    assert.equal(res.status, 200);
    assert.equal(res.json.maxInstances, 12);
    assert.equal(res.json.maintenance, true);

    const record = await newestAudit();
    assert.equal(record.action, "group.update");
    assert.equal(JSON.parse(record.before as string).maxInstances, 10);
    assert.equal(JSON.parse(record.after as string).maxInstances, 12);
    assert.equal(JSON.parse(record.before as string).maintenance, false);

    await t.events.flush();
    const maintenance = seen.find((e) => e.type === "GROUP_MAINTENANCE_CHANGED");
    assert.deepEqual(maintenance?.data, { groupName: "patchme", maintenance: true, message: "Group patchme entered maintenance" });
    assert.ok(seen.some((e) => e.type === "GROUP_UPDATED"));
  });

  test("PATCH with a key outside the list is 422 naming it; cross-field rules apply after the merge", async () => {
    await t.request("POST", "/api/v1/groups", { token: admin, body: { name: "strict", platform: "paper", minInstances: 2 } });
    const unknown = await t.request("PATCH", "/api/v1/groups/strict", { token: admin, body: { platform: "velocity" } });
    assert.equal(unknown.status, 422);
    assert.match(unknown.json.error.message, /^platform:/);
    const merged = await t.request("PATCH", "/api/v1/groups/strict", { token: admin, body: { maxInstances: 1 } });
    assert.equal(merged.status, 422);
    assert.match(merged.json.error.message, /^maxInstances:/);
  });

  test("loadScaling: stored with its durations filled in, replaced as a whole by PATCH, removed with null; null by default", async () => {
    const plain = await t.request("POST", "/api/v1/groups", { token: admin, body: { name: "calm", platform: "paper" } });
    assert.equal(plain.json.loadScaling, null);
    const created = await t.request("POST", "/api/v1/groups", { token: admin, body: { name: "laggy", platform: "paper", loadScaling: { minTps: 18 } } });
    assert.equal(created.status, 201, JSON.stringify(created.json));
    assert.deepEqual(created.json.loadScaling, { minTps: 18, sustainSeconds: 30, cooldownSeconds: 120 });
    assert.deepEqual((await t.request("GET", "/api/v1/groups/laggy", { token: viewer })).json.loadScaling, created.json.loadScaling);

    const replaced = await t.request("PATCH", "/api/v1/groups/laggy", { token: admin, body: { loadScaling: { maxMsptAvg: 45.5, sustainSeconds: 60 } } });
    assert.equal(replaced.status, 200, JSON.stringify(replaced.json));
    assert.deepEqual(replaced.json.loadScaling, { maxMsptAvg: 45.5, sustainSeconds: 60, cooldownSeconds: 120 });
    const record = await newestAudit();
    assert.equal(record.action, "group.update");
    assert.deepEqual(JSON.parse(record.before as string).loadScaling, { minTps: 18, sustainSeconds: 30, cooldownSeconds: 120 });

    const removed = await t.request("PATCH", "/api/v1/groups/laggy", { token: admin, body: { loadScaling: null } });
    assert.equal(removed.status, 200);
    assert.equal(removed.json.loadScaling, null);
    assert.equal((await t.request("GET", "/api/v1/groups/laggy", { token: viewer })).json.loadScaling, null);
  });

  const badLoad: [string, unknown, string][] = [
    ["no threshold", {}, "loadScaling:"],
    ["only durations", { sustainSeconds: 10, cooldownSeconds: 10 }, "loadScaling:"],
    ["minTps 0", { minTps: 0 }, "loadScaling.minTps:"],
    ["negative maxMsptAvg", { maxMsptAvg: -5 }, "loadScaling.maxMsptAvg:"],
    ["minTps as text", { minTps: "18" }, "loadScaling.minTps:"],
    ["fractional sustainSeconds", { minTps: 18, sustainSeconds: 1.5 }, "loadScaling.sustainSeconds:"],
    ["cooldown beyond a day", { minTps: 18, cooldownSeconds: 86_401 }, "loadScaling.cooldownSeconds:"],
    ["an unknown key", { minTps: 18, maxTps: 30 }, "loadScaling.maxTps:"],
    ["an array", [18], "loadScaling:"],
  ];
  for (const [label, loadScaling, prefix] of badLoad) {
    test(`loadScaling with ${label} is 422 on create and on PATCH, and changes nothing`, async () => {
      const name = `load-${label.replace(/[^a-z0-9]+/gi, "-")}`;
      const created = await t.request("POST", "/api/v1/groups", { token: admin, body: { name, platform: "paper", loadScaling } });
      assert.equal(created.status, 422, JSON.stringify(created.json));
      assert.equal(created.json.error.code, "VALIDATION_ERROR");
      assert.equal(created.json.error.status, 422);
      assert.ok(created.json.error.message.startsWith(prefix), created.json.error.message);
      assert.equal((await t.request("GET", `/api/v1/groups/${name}`, { token: admin })).status, 404, "not created");

      await t.request("POST", "/api/v1/groups", { token: admin, body: { name, platform: "paper", loadScaling: { minTps: 15 } } });
      const before = (await t.request("GET", `/api/v1/groups/${name}`, { token: admin })).json;
      const patched = await t.request("PATCH", `/api/v1/groups/${name}`, { token: admin, body: { maxInstances: 7, loadScaling } });
      assert.equal(patched.status, 422, JSON.stringify(patched.json));
      assert.equal(patched.json.error.code, "VALIDATION_ERROR");
      assert.deepEqual((await t.request("GET", `/api/v1/groups/${name}`, { token: admin })).json, before, "nothing changed");
    });
  }

  test("DELETE answers 204, audits the before snapshot, publishes GROUP_DELETED; then 404", async () => {
    await t.request("POST", "/api/v1/groups", { token: admin, body: { name: "doomed", platform: "paper" } });
    const res = await t.request("DELETE", "/api/v1/groups/doomed", { token: admin });
    assert.equal(res.status, 204);
    const record = await newestAudit();
    assert.equal(record.action, "group.delete");
    assert.equal(JSON.parse(record.before as string).name, "doomed");
    assert.equal(record.after, undefined);
    await t.events.flush();
    assert.ok(seen.some((e) => e.type === "GROUP_DELETED" && e.data.groupName === "doomed"));
    const gone = await t.request("GET", "/api/v1/groups/doomed", { token: admin });
    assert.equal(gone.status, 404);
    assert.deepEqual(gone.json.error, { code: "NOT_FOUND", message: "Group not found: doomed", status: 404 });
  });

  test("a failed mutation writes no audit record", async () => {
    const beforeCount = (await t.audit.keyset({ cursor: "", pageSize: 1 })).total;
    await t.request("POST", "/api/v1/groups", { token: admin, body: { name: "bad name", platform: "paper" } });
    await t.request("PATCH", "/api/v1/groups/ghost", { token: admin, body: { maxInstances: 2 } });
    assert.equal((await t.audit.keyset({ cursor: "", pageSize: 1 })).total, beforeCount);
  });

  test("VIEWER cannot create (403); anonymous is 401", async () => {
    const forbidden = await t.request("POST", "/api/v1/groups", { token: viewer, body: { name: "v", platform: "paper" } });
    assert.equal(forbidden.status, 403);
    const anonymous = await t.request("GET", "/api/v1/groups");
    assert.equal(anonymous.status, 401);
  });
});
