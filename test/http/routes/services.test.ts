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

describe("keyset paging of /api/v1/services", () => {
  let t: TestApp;
  let viewer: string;
  const all = Array.from({ length: 25 }, (_, i) => `inst-${String(i).padStart(3, "0")}`);

  before(async () => {
    t = await startTestApp();
    viewer = await t.tokenFor("VIEWER");
    const base = { port: 30000, playerCount: 0, memoryMb: 512, startedAt: null, deploymentRevision: 1 };
    // Saved out of order: the pages come in id order whatever the write order was.
    for (const id of [...all].reverse()) {
      await t.instances.save({ ...base, id, group: Number(id.slice(-3)) % 2 === 0 ? "even" : "odd", node: "n1", state: "RUNNING" });
    }
  });
  after(async () => t.close());

  const page = async (query: string) => {
    const res = await t.request("GET", `/api/v1/services${query}`, { token: viewer });
    assert.equal(res.status, 200, res.text);
    return res.json as { data: { id: string }[]; pageSize: number; nextCursor: string | null; total: number };
  };

  test("pages follow each other by cursor without gaps or repeats, and the last has no cursor", async () => {
    const seen: string[] = [];
    let cursor = "";
    for (let n = 0; n < 10; n++) {
      const p = await page(`?pageSize=10&cursor=${encodeURIComponent(cursor)}`);
      assert.equal(p.pageSize, 10);
      assert.equal(p.total, 25);
      seen.push(...p.data.map((i) => i.id));
      if (p.nextCursor === null) break;
      assert.equal(p.nextCursor, p.data.at(-1)!.id);
      cursor = p.nextCursor;
    }
    assert.deepEqual(seen, all);
  });

  test("filters apply before paging; total counts the matching instances", async () => {
    const p = await page("?group=odd&pageSize=5");
    assert.equal(p.total, 12);
    assert.deepEqual(
      p.data.map((i) => i.id),
      ["inst-001", "inst-003", "inst-005", "inst-007", "inst-009"],
    );
    const next = await page(`?group=odd&pageSize=5&cursor=${p.nextCursor}`);
    assert.equal(next.data[0].id, "inst-011");
  });

  test("a cursor keeps its place when instances before it go away", async () => {
    const first = await page("?pageSize=3");
    await t.instances.remove("inst-000");
    const next = await page(`?pageSize=3&cursor=${first.nextCursor}`);
    assert.equal(next.data[0].id, "inst-003");
  });

  test("without pageSize or cursor the answer is the spec's bare array; a bad pageSize is 422 and nothing else changes", async () => {
    const res = await t.request("GET", "/api/v1/services?group=even", { token: viewer });
    assert.ok(Array.isArray(res.json));
    for (const bad of ["0", "501", "ten"]) {
      const r = await t.request("GET", `/api/v1/services?pageSize=${bad}`, { token: viewer });
      assert.equal(r.status, 422, bad);
      assert.equal(r.json.error.code, "VALIDATION_ERROR");
      assert.match(r.json.error.message, /^pageSize:/);
    }
  });
});
