/**
 * The software catalog on a real controller: adding, changing, recommending and removing builds
 * (validation, roles, the four audit actions), the recommended build as the default
 * platformVersion of a new group, a version the catalog does not have refused (422), a build a
 * group names kept (409 BUILD_IN_USE), and the mirrored build served to a node credential.
 */
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { startTestApp, type TestApp } from "../../support/http-app.js";

describe("software catalog", () => {
  let t: TestApp;
  let server: Server;
  let source = "";
  const jar = randomBytes(70_000);
  const digest = createHash("sha256").update(jar).digest("hex");
  before(async () => {
    t = await startTestApp();
    server = createServer((req, res) => (req.url === "/paper-1.21.1.jar" ? res.end(jar) : res.writeHead(404).end()));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    source = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await t.close();
  });

  it("adds, changes, recommends and removes builds, each audited; the recommended build is a new group's default", async () => {
    const operator = await t.tokenFor("OPERATOR");
    const add = (body: unknown, token = operator) => t.request("POST", "/api/v1/catalog/builds", { token, body });
    const base = { platform: "paper", downloadUrl: `${source}/paper-1.21.1.jar`, sha256: digest };
    assert.equal((await add({ ...base, version: "1.21.1" }, await t.tokenFor("VIEWER"))).status, 403);
    for (const bad of [
      { ...base, version: "1.21.1", sha256: "xyz" },
      { ...base, version: "../1", sha256: digest },
      { ...base, version: "1.21.1", downloadUrl: "ftp://x" },
      { ...base, version: "1.21.1", extra: true },
    ]) {
      const res = await add(bad);
      assert.equal(res.status, 422, `${JSON.stringify(bad)}: ${res.text}`);
    }
    const first = await add({ ...base, version: "1.21.1", recommended: true });
    assert.equal(first.status, 201, first.text);
    assert.equal(first.json.recommended, true);
    assert.equal((await add({ ...base, version: "1.21.1" })).json.error.code, "BUILD_EXISTS");
    const second = await add({ ...base, version: "1.21.4", sha256: "ab".repeat(32) });
    assert.equal(second.status, 201, second.text);
    assert.equal(second.json.recommended, false);

    const created = await t.request("POST", "/api/v1/groups", { token: operator, body: { name: "survival", platform: "paper" } });
    assert.equal(created.status, 201, created.text);
    assert.equal(created.json.platformVersion, "1.21.1", "the recommended build");
    const unknown = await t.request("POST", "/api/v1/groups", { token: operator, body: { name: "creative", platform: "paper", platformVersion: "1.8.8" } });
    assert.equal(unknown.status, 422, unknown.text);
    assert.match(unknown.json.error.message, /platformVersion: the catalog has no build 1\.8\.8 of paper/);
    const free = await t.request("POST", "/api/v1/groups", { token: operator, body: { name: "velo", platform: "velocity", platformVersion: "3.3" } });
    assert.equal(free.status, 201, "a platform without builds takes any label");

    const recommend = await t.request("POST", "/api/v1/catalog/builds/paper/1.21.4/recommend", { token: operator });
    assert.equal(recommend.status, 200, recommend.text);
    const list = await t.request("GET", "/api/v1/catalog/builds?platform=paper", { token: await t.tokenFor("VIEWER") });
    assert.deepEqual(
      list.json.map((b: { version: string; recommended: boolean }) => [b.version, b.recommended]),
      [
        ["1.21.4", true],
        ["1.21.1", false],
      ],
      "newest first, one recommended",
    );
    const patched = await t.request("PATCH", "/api/v1/catalog/builds/paper/1.21.4", { token: operator, body: { sha256: "cd".repeat(32) } });
    assert.equal(patched.status, 200, patched.text);
    assert.equal(patched.json.sha256, "cd".repeat(32));

    const inUse = await t.request("DELETE", "/api/v1/catalog/builds/paper/1.21.1", { token: operator });
    assert.equal(inUse.status, 409, inUse.text);
    assert.equal(inUse.json.error.code, "BUILD_IN_USE");
    assert.match(inUse.json.error.message, /survival/);
    assert.equal((await t.request("DELETE", "/api/v1/catalog/builds/paper/1.21.4", { token: operator })).status, 204);
    assert.equal((await t.request("GET", "/api/v1/catalog/builds/paper/1.21.4", { token: operator })).json.error.code, "BUILD_NOT_FOUND");

    const actions = (await t.audit.keyset({ cursor: "", pageSize: 50 })).data
      .filter((e) => e.action.startsWith("catalog."))
      .map((e) => `${e.action} ${e.resourceId}`);
    assert.deepEqual(actions.reverse(), [
      "catalog.add paper:1.21.1",
      "catalog.add paper:1.21.4",
      "catalog.recommend paper:1.21.4",
      "catalog.update paper:1.21.4",
      "catalog.remove paper:1.21.4",
    ]);
  });

  it("serves a mirrored build to a node credential and only then", async () => {
    const node = t.credentials.issueNodeCredential("n1").token;
    const path = `/api/v1/catalog/artifacts/${digest}`;
    const before = await t.request("GET", path, { token: node });
    assert.equal(before.status, 404);
    assert.equal(before.json.error.code, "BUILD_NOT_MIRRORED");
    assert.deepEqual(await t.capabilities.mirror.ensure({ version: "1.21.1", sha256: digest, downloadUrl: `${source}/paper-1.21.1.jar` }), { ok: true });
    const res = await fetch(`${t.baseUrl}${path}`, { headers: { authorization: `Bearer ${node}` } });
    assert.equal(res.status, 200);
    assert.ok(Buffer.from(await res.arrayBuffer()).equals(jar));
    assert.equal((await t.request("GET", path)).status, 401);
  });
});
