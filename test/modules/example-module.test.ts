// The repository's example module (examples/motd-module) built with its own build (esbuild, packed,
// signed with the development key), installed on one development-profile controller with its
// signature sidecar, called over REST, upgraded, its frontend re-staged, and removed.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { buildMotdModule, type BuiltModule } from "../../examples/motd-module/build.js";
import type { CloudEvent } from "../../src/events/types.js";
import { startTestApp, type TestApp } from "../support/http-app.js";
import { frameJson, openSse, type SseStream } from "../support/sse-client.js";
import { eventually } from "../support/wait.js";
import { call, upgradeModule, uploadModule } from "./support/module-api.js";

describe("the example module on one controller", () => {
  let t: TestApp;
  let dir: string;
  let admin: string;
  let v1: BuiltModule;
  let v2: BuiltModule;
  const events: CloudEvent[] = [];
  let capabilityStream: SseStream;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "example-module-"));
    [v1, v2] = [await buildMotdModule({ outDir: dir }), await buildMotdModule({ version: "1.1.0", outDir: dir })];
    // The development profile and modules.signing.required (true by default): the development key is trusted.
    t = await startTestApp();
    assert.equal(t.config.modules.signing.required, true);
    admin = await t.tokenFor("ADMIN");
    t.events.subscribeAll((event) => void events.push(event));
    const ticket = await call(t.baseUrl, admin, "POST", "/api/v1/events/ticket");
    capabilityStream = await openSse(`${t.baseUrl}/api/v1/modules/platform/capabilities/stream?ticket=${ticket.json.ticket}`);
  });
  after(async () => {
    capabilityStream.close();
    await t.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("installs the signed build (201) and serves its routes", async () => {
    const installed = await uploadModule(t.baseUrl, admin, v1.bundle, await readFile(v1.signature, "utf8"));
    assert.equal(installed.status, 201, installed.text);
    assert.equal(installed.json.state, "ACTIVE");
    assert.equal(installed.json.version, "1.0.0");
    assert.equal(installed.json.hasFrontend, true);
    assert.equal(installed.json.signedBy !== null, true);
    assert.deepEqual(installed.json.capabilities.provides, [{ id: "motd-text", version: "1.0.0", deprecated: false }]);
    assert.ok(events.some((e) => e.type === "MODULE_LOADED" && e.data.moduleName === "motd" && e.data.hasFrontend === true));
    assert.ok(existsSync(join(t.dir, "modules", "frontend", "motd", "module-frontend.json")), "the frontend is staged");
    // The capability stream carries the CAPABILITY_* events only.
    const [registered] = await capabilityStream.waitFor(1, (f) => f.event === "message" && frameJson(f).type === "CAPABILITY_REGISTERED");
    assert.equal(frameJson(registered).data.capabilityId, "motd-text");
    assert.ok(capabilityStream.frames.every((f) => f.event !== "message" || frameJson(f).type.startsWith("CAPABILITY_")));
    // A user who may read events but not modules is refused the capability stream.
    assert.equal((await t.request("POST", "/api/v1/roles", { token: admin, body: { name: "events-only", permissions: ["events.view"] } })).status, 201);
    await t.auth.users.create({ username: "events-only", password: "events-only-password", roles: ["events-only"] });
    const eventsOnly = await t.login("events-only", "events-only-password");
    const ticket = await call(t.baseUrl, eventsOnly, "POST", "/api/v1/events/ticket");
    assert.equal(ticket.status, 200, ticket.text);
    const refused = await call(t.baseUrl, null, "GET", `/api/v1/modules/platform/capabilities/stream?ticket=${ticket.json.ticket}`);
    assert.equal(refused.status, 403, refused.text);
    assert.equal(refused.json.error.code, "FORBIDDEN");

    assert.equal((await call(t.baseUrl, admin, "GET", "/api/v1/modules/motd/message")).json.text, "Welcome to the network!");
    const set = await call(t.baseUrl, admin, "PUT", "/api/v1/modules/motd/message", JSON.stringify({ text: "Event tonight" }), { "X-User-Id": "alice" });
    assert.equal(set.status, 200, set.text);
    assert.ok(events.some((e) => e.type === "MOTD:CHANGED" && e.data.text === "Event tonight" && e.source === "module:motd"));
    await call(t.baseUrl, admin, "PUT", "/api/v1/modules/motd/message", JSON.stringify({ text: "Maintenance at 5" }));
    const history = await call(t.baseUrl, admin, "GET", "/api/v1/modules/motd/history");
    assert.deepEqual(
      history.json.map((m: { text: string }) => m.text),
      ["Event tonight"],
    );
    assert.equal((await call(t.baseUrl, admin, "GET", `/api/v1/modules/motd/history/${encodeURIComponent(history.json[0].id)}`)).json.setBy, "alice");
    assert.equal((await call(t.baseUrl, admin, "GET", "/api/v1/modules/motd/history/nope")).status, 404);
    assert.equal((await call(t.baseUrl, admin, "GET", "/api/v1/modules/motd/history?limit=500")).status, 422);
    assert.deepEqual((await call(t.baseUrl, admin, "PUT", "/api/v1/modules/motd/message", JSON.stringify({ text: "" }))).json, {
      error: "invalid json body",
      details: "text must be a non-blank string",
    });
    assert.equal((await call(t.baseUrl, admin, "POST", "/api/v1/modules/motd/views")).json.views, 1);
    await t.groups.create({ name: "lobby", platform: "paper", platformVersion: "1.21" } as never);
    const seen = await eventually(async () => {
      const answer = await call(t.baseUrl, admin, "GET", "/api/v1/modules/motd/groups-seen");
      return answer.json.groups.includes("lobby") ? answer : null;
    }, "the module to see the group");
    assert.equal(seen.json.controllerId, t.cluster.nodeId);
  });

  it("upgrades to 1.1.0: the stored message stays, the new version answers", async () => {
    const upgraded = await upgradeModule(t.baseUrl, admin, "motd", v2.bundle, await readFile(v2.signature));
    assert.equal(upgraded.status, 200, upgraded.text);
    const message = (await call(t.baseUrl, admin, "GET", "/api/v1/modules/motd/message")).json;
    assert.equal(message.text, "Maintenance at 5");
    assert.equal(message.version, "1.1.0");
    assert.equal((await call(t.baseUrl, admin, "POST", "/api/v1/modules/motd/views")).json.views, 2);
  });

  it("re-stages the frontend only (MODULE_FRONTEND_RELOADED) and removes the module", async () => {
    const reloaded = await call(t.baseUrl, admin, "POST", "/api/v1/modules/platform/motd/frontend/reload");
    assert.equal(reloaded.status, 200, reloaded.text);
    const event = events.find((e) => e.type === "MODULE_FRONTEND_RELOADED");
    assert.deepEqual(event?.data, { moduleName: "motd", contentHash: reloaded.json.frontend.contentHash });
    assert.equal((await call(t.baseUrl, admin, "DELETE", "/api/v1/modules/platform/motd")).status, 204);
    assert.equal((await call(t.baseUrl, admin, "GET", "/api/v1/modules/motd/message")).status, 404);
    assert.ok(!existsSync(join(t.dir, "modules", "frontend", "motd")), "the staged frontend is gone");
    assert.deepEqual((await call(t.baseUrl, admin, "GET", "/api/v1/modules")).json, []);
  });
});
