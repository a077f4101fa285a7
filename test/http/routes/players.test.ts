/**
 * The operator player routes on a real server: `GET /api/v1/players` (filters, name order, keyset
 * pages, BAD_CURSOR) and `POST /api/v1/players/{uuid}/transfer` (the plugin routes' checks, 202 with
 * the operator as requester, the audit record, and nothing queued on a refusal).
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { startTestApp, type TestApp } from "../../support/http-app.js";

const uuid = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, "0")}`;

describe("operator player routes", () => {
  let t: TestApp;
  let viewer: string;
  let operator: string;

  before(async () => {
    t = await startTestApp();
    viewer = await t.tokenFor("VIEWER");
    operator = await t.tokenFor("OPERATOR");
    await t.groups.create({ name: "proxy", platform: "velocity" });
    await t.groups.create({ name: "lobby", platform: "paper" });
    await t.groups.create({ name: "arena", platform: "paper" });
    const save = (id: string, group: string, state: "RUNNING" | "STARTING") =>
      t.instances.save({ id, group, node: "n1", port: 30000, memoryMb: 512, state, playerCount: 0, startedAt: null, deploymentRevision: 1 });
    await save("proxy-1", "proxy", "RUNNING");
    await save("lobby-1", "lobby", "RUNNING");
    await save("lobby-2", "lobby", "RUNNING");
    await save("arena-1", "arena", "RUNNING");
    await save("arena-2", "arena", "STARTING");
    const names = ["Zed", "alice", "Alfred", "bob", "carol", "dave", "erin"];
    for (const [i, name] of names.entries()) {
      await t.players.join({ instanceId: "proxy-1", group: "proxy", proxy: true }, uuid(i + 1), name);
      const instanceId = i < 4 ? "lobby-1" : "arena-1";
      await t.players.join({ instanceId, group: instanceId.split("-")[0], proxy: false }, uuid(i + 1), name);
    }
    // One player only on the proxy (no game server yet).
    await t.players.join({ instanceId: "proxy-1", group: "proxy", proxy: true }, uuid(99), "frank");
  });
  after(async () => t.close());

  const list = async (query: string, token = viewer) => {
    const res = await t.request("GET", `/api/v1/players${query}`, { token });
    assert.equal(res.status, 200, res.text);
    return res.json as {
      data: { uuid: string; name: string; instanceId: string | null; group: string | null; proxyInstanceId: string | null }[];
      nextCursor: string | null;
      total: number;
    };
  };

  test("lists everyone in name order (case-insensitive) with where they are", async () => {
    const page = await list("");
    assert.deepEqual(
      page.data.map((p) => p.name),
      ["Alfred", "alice", "bob", "carol", "dave", "erin", "frank", "Zed"],
    );
    const alice = page.data.find((p) => p.name === "alice")!;
    assert.equal(alice.instanceId, "lobby-1");
    assert.equal(alice.group, "lobby");
    assert.equal(alice.proxyInstanceId, "proxy-1");
    assert.equal(page.data.find((p) => p.name === "frank")!.instanceId, null);
    assert.equal(page.total, 8);
    assert.equal(page.nextCursor, null);
  });

  test("filters by group, by instance (server or proxy) and by name prefix", async () => {
    assert.deepEqual(
      (await list("?group=arena")).data.map((p) => p.name),
      ["carol", "dave", "erin"],
    );
    assert.equal((await list("?instance=proxy-1")).total, 8);
    assert.deepEqual(
      (await list("?instance=lobby-1")).data.map((p) => p.name),
      ["Alfred", "alice", "bob", "Zed"],
    );
    assert.deepEqual(
      (await list("?name=AL")).data.map((p) => p.name),
      ["Alfred", "alice"],
    );
  });

  test("keyset pages cover the list once; a foreign cursor is 400 BAD_CURSOR", async () => {
    const names: string[] = [];
    let cursor = "";
    for (let n = 0; n < 10; n++) {
      const page = await list(`?pageSize=3${cursor ? `&cursor=${cursor}` : ""}`);
      names.push(...page.data.map((p) => p.name));
      if (!page.nextCursor) break;
      cursor = page.nextCursor;
    }
    assert.deepEqual(names, ["Alfred", "alice", "bob", "carol", "dave", "erin", "frank", "Zed"]);
    for (const bad of ["inst-1", "%%%", Buffer.from("no separator").toString("base64url")]) {
      const res = await t.request("GET", `/api/v1/players?cursor=${encodeURIComponent(bad)}`, { token: viewer });
      assert.equal(res.status, 400, bad);
      assert.equal(res.json.error.code, "BAD_CURSOR");
    }
  });

  test("a VIEWER may list but not transfer", async () => {
    const res = await t.request("POST", `/api/v1/players/${uuid(1)}/transfer`, { token: viewer, body: { group: "arena" } });
    assert.equal(res.status, 403);
    assert.equal(res.json.error.code, "FORBIDDEN");
  });

  test("an operator transfer to a group goes to its least-loaded RUNNING instance, names the operator and is audited", async () => {
    const res = await t.request("POST", `/api/v1/players/${uuid(2)}/transfer`, { token: operator, body: { group: "arena" } });
    assert.equal(res.status, 202, res.text);
    assert.equal(res.json.targetInstanceId, "arena-1");
    assert.equal(res.json.targetGroup, "arena");
    assert.equal(res.json.requestedBy, "operator-user");
    assert.equal(res.json.state, "PENDING");
    const audit = await t.request("GET", "/api/v1/audit?action=player.transfer", { token: await t.tokenFor("ADMIN") });
    const entry = audit.json.data.find((e: { resourceId: string }) => e.resourceId === uuid(2));
    assert.ok(entry, audit.text);
    assert.equal(entry.username, "operator-user");
    assert.equal(JSON.parse(entry.details).to, "arena-1");
  });

  test("refusals are the plugin routes' and queue nothing", async () => {
    const cases: [string, unknown, number, string][] = [
      [uuid(3), { targetInstanceId: "arena-2" }, 409, "INVALID_STATE"],
      [uuid(3), { targetInstanceId: "lobby-1" }, 409, "ALREADY_ON_TARGET"],
      [uuid(3), { targetInstanceId: "proxy-1" }, 400, "BAD_REQUEST"],
      [uuid(3), { targetInstanceId: "ghost" }, 404, "NOT_FOUND"],
      [uuid(3), { group: "ghost" }, 404, "NOT_FOUND"],
      [uuid(3), { group: "arena", targetInstanceId: "arena-1" }, 422, "VALIDATION_ERROR"],
      [uuid(3), {}, 422, "VALIDATION_ERROR"],
      [uuid(500), { group: "arena" }, 404, "NOT_FOUND"],
      ["not-a-uuid", { group: "arena" }, 400, "BAD_REQUEST"],
    ];
    const before = await t.transfers.pending();
    for (const [who, body, status, code] of cases) {
      const res = await t.request("POST", `/api/v1/players/${who}/transfer`, { token: operator, body });
      assert.equal(res.status, status, `${JSON.stringify(body)}: ${res.text}`);
      assert.equal(res.json.error.code, code, JSON.stringify(body));
    }
    assert.equal((await t.transfers.pending()).length, before.length);
  });
});
