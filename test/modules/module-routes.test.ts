// Installing, calling, upgrading and removing modules through a real controller's REST API on one
// controller: signatures required, hostile and failing bundles refused with nothing installed, the
// dispatcher's order, permissions of module routes, events, audit, readiness and the OpenAPI entry.
import assert from "node:assert/strict";
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type { CloudEvent } from "../../src/events/types.js";
import { startTestApp, type TestApp } from "../support/http-app.js";
import { buildBundle, developmentPrivateKey, manifestOf, newSigningKey, rawTgz, signBundle } from "./support/bundles.js";
import { call, upgradeModule, uploadModule } from "./support/module-api.js";

const helloSource = (version: string, extra = "") => `
export default {
  load(ctx) { ${extra} },
  registerRoutes(routes) {
    routes.get("greet", (req, res) => res.json({ hello: req.queryParam("name") ?? "world", version: ${JSON.stringify(version)}, authorization: req.header("authorization") ?? null, user: req.userId() ?? null }));
    routes.get("items/{id}", (req, res) => res.json({ id: req.pathParam("id") }));
    routes.post("sum", (v) => { if (typeof v?.a !== "number") throw new Error("a must be a number"); return v; }, (req, body, res) => res.status(201).json({ sum: body.a + (body.b ?? 0) }));
    routes.get("invalid", () => { const e = new Error("name is too long"); e.kind = "invalid-argument"; throw e; });
    routes.delete("items/{id}", (req, res) => res.status(204).text(""));
  },
};`;

describe("module management and module routes (one controller)", () => {
  let t: TestApp;
  let dir: string;
  let admin: string;
  const key = newSigningKey();
  const events: CloudEvent[] = [];

  const bundle = async (name: string, id: string, version: string, source: string, extra: Record<string, unknown> = {}) =>
    buildBundle(join(dir, name), join(dir, `${name}.tgz`), { "META-INF/cloud/module.yaml": manifestOf(id, version, extra), "backend/index.js": source });
  const moduleIds = async () => (await call(t.baseUrl, admin, "GET", "/api/v1/modules")).json.map((m: { id: string }) => m.id);

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "module-routes-"));
    t = await startTestApp({
      config: { modules: { signing: { required: true, publicKeys: [key.publicKeyPem] } } as never },
      moduleTuning: { syncIntervalMs: 500 },
    });
    admin = await t.tokenFor("ADMIN");
    t.events.subscribeAll((event) => void events.push(event));
  });
  after(async () => {
    await t.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("is ready with no module installed; the platformModules check is real", async () => {
    const ready = await call(t.baseUrl, null, "GET", "/api/v1/system/ready");
    assert.equal(ready.json.checks.platformModules, true);
  });

  it("refuses an unsigned bundle and one signed by an untrusted key with 422 SIGNATURE_VERIFICATION_FAILED, installing nothing", async () => {
    const path = await bundle("hello-unsigned", "hello", "1.0.0", helloSource("1.0.0"));
    const blobsBefore = (await t.blobs.list()).length;
    const unsigned = await uploadModule(t.baseUrl, admin, path);
    assert.equal(unsigned.status, 422);
    assert.equal(unsigned.json.error.code, "SIGNATURE_VERIFICATION_FAILED");
    assert.match(unsigned.json.error.message, /unsigned/);
    const forged = await uploadModule(t.baseUrl, admin, path, await signBundle(path, newSigningKey().privateKeyPem));
    assert.equal(forged.status, 422);
    assert.equal(forged.json.error.code, "SIGNATURE_VERIFICATION_FAILED");
    assert.deepEqual(await moduleIds(), []);
    assert.equal((await t.blobs.list()).length, blobsBefore);
  });

  it("refuses hostile and failing bundles with 422 PLATFORM_INSTALL_FAILED, installing nothing", async () => {
    const traversal = await rawTgz(join(dir, "evil.tgz"), [
      { name: "META-INF/cloud/module.yaml", data: "id: evil\nversion: 1.0.0\nbackend:\n  entrypoint: index.js\n" },
      { name: "index.js", data: "export default {}" },
      { name: "../../../tmp/owned.js", data: "x" },
    ]);
    const refusedTraversal = await uploadModule(t.baseUrl, admin, traversal, await signBundle(traversal, key.privateKeyPem));
    assert.equal(refusedTraversal.status, 422);
    assert.equal(refusedTraversal.json.error.code, "PLATFORM_INSTALL_FAILED");
    const forged = await bundle("forged", "platform", "1.0.0", "export default {}");
    const refusedForged = await uploadModule(t.baseUrl, admin, forged, await signBundle(forged, key.privateKeyPem));
    assert.equal(refusedForged.status, 422);
    assert.match(refusedForged.json.error.message, /module\.yaml: id: "platform" is reserved/);
    const throwing = await bundle("throws", "thrower", "1.0.0", `export default { load() { throw new Error("cannot start without a database"); } };`);
    const refusedThrowing = await uploadModule(t.baseUrl, admin, throwing, await signBundle(throwing, key.privateKeyPem));
    assert.equal(refusedThrowing.status, 422);
    assert.equal(refusedThrowing.json.error.code, "PLATFORM_INSTALL_FAILED");
    assert.match(refusedThrowing.json.error.message, /load hook: .*cannot start without a database/);
    assert.deepEqual(await moduleIds(), []);
    assert.equal(await t.modules.records.get("thrower"), null);
    assert.equal(t.modules.manager.get("thrower"), undefined);
    assert.deepEqual(await readdir(join(t.dir, "modules")).then((names) => names.filter((n) => n !== "frontend" && n !== "package.json")), []);
    const noBundle = await call(t.baseUrl, admin, "POST", "/api/v1/modules/platform/upload", "{}");
    assert.equal(noBundle.status, 400);
    assert.equal(noBundle.json.error.code, "PLATFORM_INSTALL_FAILED");
  });

  it("installs a signed module (201), serves its routes behind the whole chain, and keeps the caller's credentials from it", async () => {
    const path = await bundle("hello-1", "hello", "1.0.0", helloSource("1.0.0"));
    const installed = await uploadModule(t.baseUrl, admin, path, await signBundle(path, key.privateKeyPem));
    assert.equal(installed.status, 201, installed.text);
    assert.equal(installed.json.state, "ACTIVE");
    assert.equal(installed.json.signed, true);
    assert.equal(installed.json.enabled, true);
    assert.equal(installed.json.hasFrontend, false);
    assert.equal(installed.json.platformPluginCount, 0);
    assert.ok(events.some((e) => e.type === "MODULE_LOADED" && e.data.moduleName === "hello" && e.data.hasFrontend === false));
    const greet = await call(t.baseUrl, admin, "GET", "/api/v1/modules/hello/greet?name=ops&name=second", undefined, { "X-User-Id": "alice" });
    assert.equal(greet.status, 200);
    assert.deepEqual(greet.json, { hello: "ops", version: "1.0.0", authorization: null, user: "alice" });
    assert.deepEqual((await call(t.baseUrl, admin, "GET", "/api/v1/modules/hello/items/a%20b")).json, { id: "a b" });
    const sum = await call(t.baseUrl, admin, "POST", "/api/v1/modules/hello/sum", '{"a":2,"b":3}');
    assert.equal(sum.status, 201);
    assert.deepEqual(sum.json, { sum: 5 });
    const badJson = await call(t.baseUrl, admin, "POST", "/api/v1/modules/hello/sum", "{");
    assert.equal(badJson.status, 400);
    assert.equal(badJson.json.error, "invalid json body");
    const badShape = await call(t.baseUrl, admin, "POST", "/api/v1/modules/hello/sum", '{"a":"x"}');
    assert.deepEqual(badShape.json, { error: "invalid json body", details: "a must be a number" });
    const invalid = await call(t.baseUrl, admin, "GET", "/api/v1/modules/hello/invalid");
    assert.deepEqual(invalid.json, { error: { code: "VALIDATION_ERROR", message: "name is too long", status: 422 } });
    assert.equal((await call(t.baseUrl, admin, "DELETE", "/api/v1/modules/hello/items/1")).status, 204);
    const unknown = await call(t.baseUrl, admin, "GET", "/api/v1/modules/hello/nothing/here");
    assert.deepEqual(unknown.json, { error: { code: "NOT_FOUND", message: "Module route not found", status: 404 } });
    assert.equal((await call(t.baseUrl, admin, "GET", "/api/v1/modules/absent/greet")).json.error.message, "Module route not found");
    const reserved = await call(t.baseUrl, admin, "GET", "/api/v1/modules/platform/greet");
    assert.equal(reserved.status, 404);
    assert.equal(reserved.json.error.code, "NOT_FOUND");
    // The chain: anonymous 401, VIEWER may GET (modules.view) but not POST (modules.invoke), OPERATOR may.
    assert.equal((await call(t.baseUrl, null, "GET", "/api/v1/modules/hello/greet")).status, 401);
    assert.equal((await call(t.baseUrl, await t.tokenFor("VIEWER"), "GET", "/api/v1/modules/hello/greet")).status, 200);
    assert.equal((await call(t.baseUrl, await t.tokenFor("VIEWER"), "POST", "/api/v1/modules/hello/sum", '{"a":1}')).status, 403);
    assert.equal((await call(t.baseUrl, await t.tokenFor("OPERATOR"), "POST", "/api/v1/modules/hello/sum", '{"a":1}')).status, 201);
    assert.equal((await call(t.baseUrl, admin, "POST", "/api/v1/modules/hello/sum", JSON.stringify({ a: 1, pad: "x".repeat(1024 * 1024) }))).status, 413);
    // Installing it again is a conflict.
    const again = await uploadModule(t.baseUrl, admin, path, await signBundle(path, key.privateKeyPem));
    assert.equal(again.status, 409);
    assert.equal(again.json.error.code, "PLATFORM_INSTALL_FAILED");
  });

  it("trusts the development key on the development profile", async () => {
    const path = await bundle("dev-signed", "devsigned", "1.0.0", `export default {};`);
    const installed = await uploadModule(t.baseUrl, admin, path, await signBundle(path, await developmentPrivateKey()));
    assert.equal(installed.status, 201, installed.text);
    assert.equal((await call(t.baseUrl, admin, "DELETE", "/api/v1/modules/platform/devsigned")).status, 204);
  });

  it("upgrades (200), refuses another module's bundle (409), an absent module (404), and keeps the old version when the new one fails (422)", async () => {
    const next = await bundle("hello-2", "hello", "1.1.0", helloSource("1.1.0"));
    const upgraded = await upgradeModule(t.baseUrl, admin, "hello", next, await signBundle(next, key.privateKeyPem));
    assert.equal(upgraded.status, 200, upgraded.text);
    assert.equal(upgraded.json.version, "1.1.0");
    assert.equal((await call(t.baseUrl, admin, "GET", "/api/v1/modules/hello/greet")).json.version, "1.1.0");
    const other = await bundle("other", "other", "1.0.0", "export default {};");
    const wrong = await upgradeModule(t.baseUrl, admin, "hello", other, await signBundle(other, key.privateKeyPem));
    assert.equal(wrong.status, 409);
    assert.equal(wrong.json.error.code, "PLATFORM_UPGRADE_FAILED");
    const absent = await upgradeModule(t.baseUrl, admin, "nobody", other, await signBundle(other, key.privateKeyPem));
    assert.equal(absent.status, 404);
    assert.equal(absent.json.error.code, "PLATFORM_UPGRADE_FAILED");
    const broken = await bundle("hello-3", "hello", "1.2.0", helloSource("1.2.0", "throw new Error('broken release');"));
    const failed = await upgradeModule(t.baseUrl, admin, "hello", broken, await signBundle(broken, key.privateKeyPem));
    assert.equal(failed.status, 422);
    assert.equal(failed.json.error.code, "PLATFORM_UPGRADE_FAILED");
    assert.match(failed.json.error.message, /broken release/);
    const still = await call(t.baseUrl, admin, "GET", "/api/v1/modules/hello/greet");
    assert.equal(still.status, 200);
    assert.equal(still.json.version, "1.1.0");
    assert.equal((await t.modules.records.get("hello"))?.version, "1.1.0");
  });

  it("removes a module (204): its routes are gone, MODULE_UNLOADED is published and the change is audited", async () => {
    const removed = await call(t.baseUrl, admin, "DELETE", "/api/v1/modules/platform/hello");
    assert.equal(removed.status, 204);
    assert.equal((await call(t.baseUrl, admin, "GET", "/api/v1/modules/hello/greet")).json.error.message, "Module route not found");
    assert.ok(events.some((e) => e.type === "MODULE_UNLOADED" && e.data.moduleName === "hello"));
    assert.equal((await call(t.baseUrl, admin, "DELETE", "/api/v1/modules/platform/hello")).status, 404);
    const audit = await call(t.baseUrl, admin, "GET", "/api/v1/audit?resourceType=module");
    const actions = audit.json.data.map((entry: { action: string }) => entry.action);
    for (const action of ["platform-module.install", "platform-module.upgrade", "platform-module.delete"])
      assert.ok(actions.includes(action), `${action} in ${actions}`);
  });

  it("shows the module routes in the OpenAPI document with their permission", async () => {
    const doc = (await call(t.baseUrl, null, "GET", "/api/v1/openapi.json")).json;
    const path = doc.paths["/api/v1/modules/{moduleId}/{rest}"];
    assert.equal(path.get["x-permission"], "modules.view");
    for (const method of ["post", "put", "patch", "delete"]) assert.equal(path[method]["x-permission"], "modules.invoke");
    assert.equal(doc.paths["/api/v1/modules/platform/upload"].post["x-permission"], "MODULES_MANAGE");
  });
});
