/**
 * The audit log: record fields, snapshots that fail to serialize, time-ordered ids, and
 * `GET /api/v1/audit` in page and keyset mode (clamps, deprecated aliases, BAD_CURSOR) on a real server.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { Hono } from "hono";
import type { AuditActor, AuditEntryInput, AuditRecorder } from "../../src/audit/types.js";
import { audited } from "../../src/http/audited.js";
import { addRoute, type RouteModule } from "../../src/http/route.js";
import type { AppEnv } from "../../src/http/types.js";
import { auditNumericId, clampAuditPageSize } from "../../src/audit/audit-service.js";
import { FakeClock } from "../support/fake-clock.js";
import { isObjectId, ObjectIdGenerator, objectIdTimestampMs } from "../../src/shared/object-id.js";
import { startTestApp, type TestApp } from "../support/http-app.js";

const RECORDS = 620;

describe("audit log", () => {
  let t: TestApp;
  let clock: FakeClock;
  let admin: string;
  before(async () => {
    clock = new FakeClock(Date.parse("2026-03-01T00:00:00.000Z"));
    t = await startTestApp({ clock });
    admin = await t.tokenFor("ADMIN");
    for (let i = 0; i < RECORDS; i++) {
      if (i % 7 === 0) clock.advance(1000);
      await t.audit.record(
        { action: i % 2 === 0 ? "group.update" : "node.drain", resourceType: i % 2 === 0 ? "group" : "node", resourceId: `r${i}` },
        { username: i % 3 === 0 ? "alice" : "bob", ipAddress: "10.0.0.1" },
      );
    }
  });
  after(() => t.close());

  it("stores the spec's fields, with system, {} and absent snapshots by default", async () => {
    await t.audit.record({ action: "maintenance.update", resourceType: "group", resourceId: "lobby" }, { username: "", ipAddress: "::1" });
    const [doc] = (await t.audit.keyset({ cursor: "", pageSize: 1 })).data;
    assert.deepEqual(Object.keys(doc).sort(), ["_id", "action", "createdAt", "details", "id", "ipAddress", "resourceId", "resourceType", "username"]);
    assert.equal(doc.username, "system");
    assert.equal(doc.details, "{}");
    assert.equal(doc.createdAt, new Date(clock.nowMs()).toISOString());
    assert.ok(isObjectId(doc._id));
    assert.equal(doc.id, auditNumericId(doc._id));
    assert.ok(Number.isSafeInteger(doc.id));
  });

  it("leaves null where a snapshot cannot be serialized, without failing the write", async () => {
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    await t.audit.record(
      { action: "group.update", resourceType: "group", resourceId: "cyclic", before: cyclic, after: { big: 10n }, details: { ok: true } },
      { username: "alice", ipAddress: "10.0.0.2" },
    );
    const [doc] = (await t.audit.keyset({ cursor: "", pageSize: 1 })).data;
    assert.equal(doc.resourceId, "cyclic");
    assert.equal(doc.before, null);
    assert.equal(doc.after, null);
    assert.equal(doc.details, '{"ok":true}');
  });

  it("requires audit.view", async () => {
    assert.equal((await t.request("GET", "/api/v1/audit")).status, 401);
    assert.equal((await t.request("GET", "/api/v1/audit", { token: await t.tokenFor("OPERATOR") })).status, 403);
    assert.equal((await t.request("GET", "/api/v1/audit", { token: await t.tokenFor("VIEWER") })).status, 403);
  });

  it("pages newest first with page/pageSize and the envelope", async () => {
    const total = (await t.audit.page({ skip: 0, pageSize: 1 })).total;
    const first = await t.request("GET", "/api/v1/audit", { token: admin });
    assert.equal(first.status, 200, first.text);
    assert.deepEqual(Object.keys(first.json).sort(), ["data", "page", "pageSize", "total"]);
    assert.equal(first.json.page, 1);
    assert.equal(first.json.pageSize, 100);
    assert.equal(first.json.total, total);
    assert.equal(first.json.data.length, 100);
    const ids = first.json.data.map((r: { _id: string }) => r._id);
    assert.deepEqual(ids, [...ids].sort().reverse(), "newest first");

    const third = await t.request("GET", "/api/v1/audit?page=3&pageSize=50", { token: admin });
    assert.equal(third.json.page, 3);
    assert.equal(third.json.data.length, 50);
    assert.equal(third.json.data[0]._id, first.json.data[0] && (await t.audit.page({ skip: 100, pageSize: 1 })).data[0]._id);
  });

  it("clamps pageSize to 1..500 and treats offset/limit as deprecated aliases", async () => {
    assert.equal((await t.request("GET", "/api/v1/audit?pageSize=0", { token: admin })).json.pageSize, 1);
    assert.equal((await t.request("GET", "/api/v1/audit?pageSize=-5", { token: admin })).json.pageSize, 1);
    const big = await t.request("GET", "/api/v1/audit?pageSize=100000", { token: admin });
    assert.equal(big.json.pageSize, 500);
    assert.equal(big.json.data.length, 500);
    assert.equal((await t.request("GET", "/api/v1/audit?page=0", { token: admin })).json.page, 1);

    const aliased = await t.request("GET", "/api/v1/audit?offset=20&limit=10", { token: admin });
    const direct = await t.request("GET", "/api/v1/audit?page=3&pageSize=10", { token: admin });
    assert.equal(aliased.json.pageSize, 10);
    assert.equal(aliased.json.page, 3);
    assert.deepEqual(aliased.json.data, direct.json.data);
    assert.equal(clampAuditPageSize(undefined), 100);
    assert.equal(clampAuditPageSize(Number.NaN), 100);

    const bad = await t.request("GET", "/api/v1/audit?page=abc", { token: admin });
    assert.equal(bad.status, 422);
    assert.match(bad.json.error.message, /^page/);
  });

  it("walks the whole log in keyset mode without skipping or repeating", async () => {
    const total = (await t.audit.page({ skip: 0, pageSize: 1 })).total;
    const seen: string[] = [];
    let cursor = "";
    for (let pages = 0; pages < 100; pages++) {
      const res = await t.request("GET", `/api/v1/audit?cursor=${cursor}&pageSize=150`, { token: admin });
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(Object.keys(res.json).sort(), ["data", "nextCursor", "pageSize", "total"]);
      assert.equal(res.json.total, total);
      seen.push(...res.json.data.map((r: { _id: string }) => r._id));
      if (res.json.nextCursor === null) break;
      assert.equal(res.json.nextCursor, res.json.data[res.json.data.length - 1]._id, "the boundary entry");
      cursor = res.json.nextCursor;
    }
    assert.equal(seen.length, total);
    assert.equal(new Set(seen).size, total);
    assert.deepEqual(seen, [...seen].sort().reverse());
  });

  it("reads the newest page for a blank cursor and says null when nothing is older", async () => {
    const blank = await t.request("GET", "/api/v1/audit?cursor=&pageSize=5", { token: admin });
    const paged = await t.request("GET", "/api/v1/audit?pageSize=5", { token: admin });
    assert.deepEqual(blank.json.data, paged.json.data);
    assert.notEqual(blank.json.nextCursor, null);
    const single = await t.request("GET", "/api/v1/audit?cursor=&pageSize=5&action=maintenance.update", { token: admin });
    assert.equal(single.json.data.length, 1);
    assert.equal(single.json.nextCursor, null, "no older entries");
    const drains = (await t.audit.page({ skip: 0, pageSize: 1, filter: { action: "node.drain" } })).total;
    const exact = await t.request("GET", `/api/v1/audit?cursor=&pageSize=${drains}&action=node.drain`, { token: admin });
    assert.equal(exact.json.data.length, drains);
    assert.equal(exact.json.nextCursor, null, "a page ending exactly at the oldest entry");
  });

  it("answers 400 BAD_CURSOR for a cursor that is not an ObjectId", async () => {
    for (const cursor of ["xyz", "123", "g".repeat(24), "0".repeat(25), "%20%20abc"]) {
      const res = await t.request("GET", `/api/v1/audit?cursor=${cursor}`, { token: admin });
      assert.equal(res.status, 400, cursor);
      assert.equal(res.json.error.code, "BAD_CURSOR");
    }
  });

  it("filters by username, action and resource type", async () => {
    const res = await t.request("GET", "/api/v1/audit?action=node.drain&username=bob&pageSize=500", { token: admin });
    assert.ok(res.json.data.length > 0);
    assert.ok(
      res.json.data.every(
        (r: { action: string; username: string; resourceType: string }) => r.action === "node.drain" && r.username === "bob" && r.resourceType === "node",
      ),
    );
  });
});

describe("audited helper", () => {
  it("records the principal and client address, and fails the request when the write fails", async () => {
    const recorded: { entry: AuditEntryInput; actor: AuditActor }[] = [];
    let failing = false;
    const recorder: AuditRecorder = {
      async record(entry, actor) {
        if (failing) throw new Error("audit store unavailable");
        recorded.push({ entry, actor });
      },
    };
    const routes: RouteModule = (app, registry) => {
      const sub = new Hono<AppEnv>();
      addRoute(sub, registry, { method: "post", path: "/api/v1/test/mutate", summary: "m", tag: "test", auth: "public" }, async ({ c }) => {
        await audited(recorder, c, { action: "test.mutate", resourceType: "test", resourceId: "x" });
        return { ok: true };
      });
      app.route("/", sub);
    };
    const t = await startTestApp({ routeModules: [routes] });
    try {
      assert.equal((await t.request("POST", "/api/v1/test/mutate")).status, 200);
      assert.deepEqual(recorded[0].actor, { username: "system", ipAddress: "127.0.0.1" });
      failing = true;
      const res = await t.request("POST", "/api/v1/test/mutate");
      assert.equal(res.status, 500);
      assert.equal(res.json.error.code, "INTERNAL_ERROR");
      assert.ok(
        t.logLines.some((l) => l.includes("audit store unavailable")),
        "the cause is logged",
      );
    } finally {
      await t.close();
    }
  });
});

describe("audit retention", () => {
  it("expires records 90 days after createdAt (audit_ttl), not before", async () => {
    const clock = new FakeClock(Date.parse("2026-03-01T00:00:00.000Z"));
    const t = await startTestApp({ clock });
    try {
      await t.audit.record({ action: "group.create", resourceType: "group", resourceId: "old" }, { username: "alice", ipAddress: "10.0.0.1" });
      // Jumps (no timers run): a whole app's periodic work over 90 days of fake time is not the point here.
      clock.set(clock.nowMs() + 90 * 24 * 3600 * 1000 - 1000);
      assert.equal((await t.audit.page({ skip: 0, pageSize: 10 })).total, 1);
      clock.set(clock.nowMs() + 2000);
      assert.equal((await t.audit.page({ skip: 0, pageSize: 10 })).total, 0);
    } finally {
      await t.close();
    }
  });
});

describe("object ids", () => {
  it("are 24-hex, time-prefixed and strictly increasing, even within one second or a clock step back", () => {
    const clock = new FakeClock(Date.parse("2026-01-01T00:00:00Z"));
    const gen = new ObjectIdGenerator(clock);
    const ids: string[] = [];
    for (let i = 0; i < 5000; i++) {
      if (i === 4000) clock.advance(-5000);
      if (i % 1000 === 0) clock.advance(1000);
      ids.push(gen.next());
    }
    assert.ok(ids.every(isObjectId));
    for (let i = 1; i < ids.length; i++) assert.ok(ids[i] > ids[i - 1], `${ids[i - 1]} < ${ids[i]}`);
    assert.equal(objectIdTimestampMs(ids[0]), Date.parse("2026-01-01T00:00:01Z"));
  });
});
