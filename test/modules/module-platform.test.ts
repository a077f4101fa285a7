// What modules get from the controller, through a real controller and real worker threads: storage
// handles with their quotas and namespaces, capabilities (resolution, rebinding, deprecation and
// the CAPABILITY_* events), the cluster's events and custom events, the Raft singleton lease, leaked
// workers and their cleanup, and a module that hangs in a route.
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type { CloudEvent } from "../../src/events/types.js";
import { moduleCollectionName } from "../../src/modules/host/module-storage.js";
import { startTestApp, type TestApp } from "../support/http-app.js";
import { eventually } from "../support/wait.js";
import { buildBundle, manifestOf, newSigningKey, signBundle } from "./support/bundles.js";
import { call, upgradeModule, uploadModule } from "./support/module-api.js";

describe("what modules get from the controller", () => {
  let t: TestApp;
  let dir: string;
  let admin: string;
  const key = newSigningKey();
  const events: CloudEvent[] = [];
  let built = 0;

  const install = async (id: string, version: string, source: string, extra: Record<string, unknown> = {}) => {
    const path = await buildBundle(join(dir, `b${built++}`), join(dir, `b${built}.tgz`), {
      "META-INF/cloud/module.yaml": manifestOf(id, version, extra),
      "backend/index.js": source,
    });
    return uploadModule(t.baseUrl, admin, path, await signBundle(path, key.privateKeyPem));
  };
  const upgrade = async (id: string, version: string, source: string, extra: Record<string, unknown> = {}) => {
    const path = await buildBundle(join(dir, `b${built++}`), join(dir, `b${built}.tgz`), {
      "META-INF/cloud/module.yaml": manifestOf(id, version, extra),
      "backend/index.js": source,
    });
    return upgradeModule(t.baseUrl, admin, id, path, await signBundle(path, key.privateKeyPem));
  };
  const metric = async (name: string) => {
    const line = (await call(t.baseUrl, null, "GET", "/metrics")).text.split("\n").find((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`));
    return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(" ") + 1));
  };

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "module-platform-"));
    t = await startTestApp({
      config: { modules: { signing: { required: true, publicKeys: [key.publicKeyPem] } } as never },
      moduleTuning: { syncIntervalMs: 500, leakPollIntervalMs: 200 },
    });
    admin = await t.tokenFor("ADMIN");
    t.events.subscribeAll((event) => void events.push(event));
  });
  after(async () => {
    await t.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("gives declared storage handles, namespaced per module, refuses undeclared ones, and enforces the quotas", async () => {
    const source = `
      let ctx;
      const run = async (res, fn) => { try { res.json({ ok: await fn() }); } catch (e) { res.status(409).json({ kind: e.kind ?? null, message: e.message }); } };
      export default {
        load(c) { ctx = c; },
        registerRoutes(routes) {
          routes.post("docs/{id}", (req, res) => run(res, () => ctx.storage.documents().collection("notes").insert({ _id: req.pathParam("id"), text: req.bodyText() })));
          routes.get("docs", (req, res) => run(res, async () => ({ count: await ctx.storage.documents().collection("notes").count(), found: await ctx.storage.documents().collection("notes").find({}, { sort: { field: "_id", direction: 1 } }) })));
          routes.post("keys/{k}", (req, res) => run(res, () => ctx.storage.kv().set(req.pathParam("k"), "v")));
          routes.get("keys", (req, res) => run(res, () => ctx.storage.kv().keys()));
        },
      };`;
    const installed = await install("notes", "1.0.0", source, { storage: { mongo: true, redis: true, limits: { mongoDocuments: 2, redisKeys: 1 } } });
    assert.equal(installed.status, 201, installed.text);
    for (const id of ["a", "b"]) assert.equal((await call(t.baseUrl, admin, "POST", `/api/v1/modules/notes/docs/${id}`, '"text"')).status, 200);
    const third = await call(t.baseUrl, admin, "POST", "/api/v1/modules/notes/docs/c", '"x"');
    assert.equal(third.status, 409);
    assert.equal(third.json.kind, "storage-quota");
    const listed = (await call(t.baseUrl, admin, "GET", "/api/v1/modules/notes/docs")).json.ok;
    assert.equal(listed.count, 2);
    assert.deepEqual(
      listed.found.map((d: { _id: string }) => d._id),
      ["a", "b"],
    );
    // Namespaced: stored in the module's own collection, under the collection's prefix.
    const stored = await t.documents.collection(moduleCollectionName("notes")).find();
    assert.deepEqual(stored.map((d) => d._id).sort(), ["notes/a", "notes/b"]);
    assert.equal((await call(t.baseUrl, admin, "POST", "/api/v1/modules/notes/keys/one")).status, 200);
    const secondKey = await call(t.baseUrl, admin, "POST", "/api/v1/modules/notes/keys/two");
    assert.equal(secondKey.json.kind, "storage-quota");
    assert.deepEqual((await call(t.baseUrl, admin, "GET", "/api/v1/modules/notes/keys")).json.ok, ["one"]);
    assert.equal(await t.kv.get("cloud:v1:module-kv:notes:one"), "v");

    const undeclared = await install("nostore", "1.0.0", source);
    assert.equal(undeclared.status, 201);
    const refused = await call(t.baseUrl, admin, "POST", "/api/v1/modules/nostore/keys/x");
    assert.equal(refused.json.kind, "undeclared-storage");
    assert.equal((await call(t.baseUrl, admin, "POST", "/api/v1/modules/nostore/docs/x", '"x"')).json.kind, "undeclared-storage");

    const dropped = await call(t.baseUrl, admin, "DELETE", "/api/v1/modules/platform/notes/storage");
    assert.deepEqual(dropped.json, { documents: 2, keys: 1 });
    assert.equal((await call(t.baseUrl, admin, "GET", "/api/v1/modules/notes/docs")).json.ok.count, 0);
    assert.equal((await call(t.baseUrl, await t.tokenFor("OPERATOR"), "DELETE", "/api/v1/modules/platform/notes/storage")).status, 200);
    assert.equal((await call(t.baseUrl, await t.tokenFor("VIEWER"), "DELETE", "/api/v1/modules/platform/notes/storage")).status, 403);
  });

  it("resolves capabilities: a consumer waits UNRESOLVED (503) for its provider, calls it once bound, is told of a rebinding and loses it on removal", async () => {
    const consumer = `
      let ctx, greeting; const rebinds = [];
      export default {
        load(c) { ctx = c; greeting = c.capabilities.require("greeting"); c.capabilities.onRebind((id, p) => rebinds.push(id + "@" + (p ? p.version : "none"))); },
        registerRoutes(routes) {
          routes.get("hello", async (req, res) => res.json({ text: await greeting.call("greet", "ops"), provider: greeting.provider(), rebinds }));
        },
      };`;
    const waiting = await install("consumer", "1.0.0", consumer, { capabilities: { requires: [{ id: "greeting", versionRange: ">=1.0.0 <2.0.0" }] } });
    assert.equal(waiting.status, 201, waiting.text);
    assert.equal(waiting.json.state, "UNRESOLVED");
    const unavailable = await call(t.baseUrl, admin, "GET", "/api/v1/modules/consumer/hello");
    assert.equal(unavailable.status, 503);
    assert.equal(unavailable.json.error.code, "MODULE_UNAVAILABLE");
    const provider = (version: string) =>
      `export default { load(c) { c.capabilities.provide("greeting", { greet: (name) => "hello " + name + " from ${version}" }); } };`;
    const provides = (version: string) => ({ capabilities: { provides: [{ id: "greeting", version, deprecatedSince: "1.2.0" }] } });
    const providerInstalled = await install("greeter", "1.0.0", provider("1.2.0"), provides("1.2.0"));
    assert.equal(providerInstalled.status, 201, providerInstalled.text);
    const consumerState = await eventually(
      async () =>
        (await call(t.baseUrl, admin, "GET", "/api/v1/modules")).json.find((m: { id: string }) => m.id === "consumer").state === "ACTIVE" ? true : null,
      "the consumer ACTIVE",
    );
    assert.ok(consumerState);
    const hello = await call(t.baseUrl, admin, "GET", "/api/v1/modules/consumer/hello");
    assert.equal(hello.status, 200, hello.text);
    assert.equal(hello.json.text, "hello ops from 1.2.0");
    assert.deepEqual(hello.json.provider, { moduleId: "greeter", version: "1.2.0", deprecated: true });
    assert.ok(
      events.some(
        (e) => e.type === "CAPABILITY_REGISTERED" && e.data.capabilityId === "greeting" && e.data.version === "1.2.0" && e.data.moduleId === "greeter",
      ),
    );
    const capabilities = (await call(t.baseUrl, admin, "GET", "/api/v1/modules/platform/capabilities")).json;
    assert.deepEqual(
      capabilities.providers.find((p: { capabilityId: string }) => p.capabilityId === "greeting"),
      { capabilityId: "greeting", version: "1.2.0", moduleId: "greeter", deprecatedSince: "1.2.0", removedIn: null, deprecated: true, active: true },
    );
    assert.equal(capabilities.requirements.find((r: { moduleId: string }) => r.moduleId === "consumer").resolved, true);
    assert.ok((await metric("cloud_capabilities_resolutions_total"))! > 0);
    assert.ok((await metric("cloud_capabilities_deprecated_resolutions_total"))! >= 1);

    const upgraded = await upgrade("greeter", "1.1.0", provider("1.3.0"), provides("1.3.0"));
    assert.equal(upgraded.status, 200, upgraded.text);
    assert.ok(events.some((e) => e.type === "CAPABILITY_PROVIDER_CHANGED" && e.data.fromVersion === "1.2.0" && e.data.toVersion === "1.3.0"));
    const rebound = await eventually(async () => {
      const answer = await call(t.baseUrl, admin, "GET", "/api/v1/modules/consumer/hello");
      return answer.status === 200 && answer.json.text.endsWith("1.3.0") ? answer.json : null;
    }, "the consumer bound to 1.3.0");
    assert.ok(rebound.rebinds.includes("greeting@1.3.0"), JSON.stringify(rebound.rebinds));
    assert.ok((await metric("cloud_capabilities_rebindings_total"))! >= 1);

    assert.equal((await call(t.baseUrl, admin, "DELETE", "/api/v1/modules/platform/greeter")).status, 204);
    assert.ok(events.some((e) => e.type === "CAPABILITY_UNREGISTERED" && e.data.capabilityId === "greeting" && e.data.moduleId === "greeter"));
    assert.equal(t.modules.manager.get("consumer")?.state, "UNRESOLVED");
    assert.equal((await call(t.baseUrl, admin, "GET", "/api/v1/modules/consumer/hello")).status, 503);
    assert.equal(await metric("cloud_capabilities_unresolved_requirements"), 1);
    assert.equal((await call(t.baseUrl, admin, "DELETE", "/api/v1/modules/platform/consumer")).status, 204);

    const noHandle = await install("nohandle", "1.0.0", "export default {};", provides("1.0.0"));
    assert.equal(noHandle.status, 422);
    assert.match(noHandle.json.error.message, /capabilities\.provides: greeting has no handle/);
  });

  it("delivers the cluster's events and custom events to subscriptions (type, custom type, filtered), and offers the singleton lease", async () => {
    const listener = `
      const seen = []; let ctx;
      export default {
        load(c) { ctx = c; },
        start(c) {
          c.events.on("GROUP_CREATED").field("groupName", "lobby").subscribe((e) => seen.push("created:" + e.data.groupName + ":" + (e.sequence > 0)));
          c.events.subscribeByType("PINGER:PING", (e) => seen.push("ping:" + e.data.n + ":" + e.source));
          c.events.subscribe("GROUP_DELETED", () => { throw new Error("a handler that throws is isolated"); });
          c.events.subscribe("GROUP_DELETED", (e) => seen.push("deleted:" + e.data.groupName));
        },
        registerRoutes(routes) {
          routes.get("seen", (req, res) => res.json(seen));
          routes.post("lease", async (req, res) => {
            let token = 0;
            const ran = await ctx.cluster.runExclusive("daily", 5000, (lease) => { token = lease.fencingToken; });
            res.json({ ran, token, controllerId: ctx.cluster.controllerId });
          });
        },
      };`;
    assert.equal((await install("listener", "1.0.0", listener)).status, 201);
    const pinger = `export default { registerRoutes(routes) { routes.post("ping", (req, res) => { this.ctx.events.publish({ type: "PINGER:PING", payload: { n: 7 } }); res.status(202).json({}); }); }, load(c) { this.ctx = c; } };`;
    assert.equal((await install("pinger", "1.0.0", pinger)).status, 201);
    for (const name of ["arena", "lobby"]) await t.groups.create({ name, platform: "paper", platformVersion: "1.21" } as never);
    await t.groups.delete("arena");
    assert.equal((await call(t.baseUrl, admin, "POST", "/api/v1/modules/pinger/ping")).status, 202);
    const seen = await eventually(async () => {
      const list = (await call(t.baseUrl, admin, "GET", "/api/v1/modules/listener/seen")).json as string[];
      return list.length >= 3 ? list : null;
    }, "the listener to see the events");
    assert.deepEqual([...seen].sort(), ["created:lobby:true", "deleted:arena", "ping:7:module:pinger"]);
    assert.ok(events.some((e) => e.type === "PINGER:PING" && e.source === "module:pinger"));
    const lease = await call(t.baseUrl, admin, "POST", "/api/v1/modules/listener/lease");
    assert.equal(lease.json.ran, true);
    assert.ok(lease.json.token > 0);
    assert.equal(lease.json.controllerId, t.cluster.nodeId);
  });

  it("reports a worker that did not end after unload as leaked until it is cleaned up", async () => {
    assert.equal((await install("leaky", "1.0.0", "export default { start() { setInterval(() => {}, 1000); } };")).status, 201);
    assert.equal((await call(t.baseUrl, admin, "DELETE", "/api/v1/modules/platform/leaky")).status, 204);
    const report = await eventually(async () => {
      const answer = (await call(t.baseUrl, admin, "GET", "/api/v1/modules/platform/leaked-classloaders")).json;
      return answer.leaked >= 1 ? answer : null;
    }, "the leaky worker reported as leaked");
    const loader = report.loaders.find((l: { moduleId: string }) => l.moduleId === "leaky");
    assert.equal(loader.status, "leaked");
    assert.equal(loader.controllerId, t.cluster.nodeId);
    assert.ok((await metric("cloud_module_classloader_leaked_total"))! >= 1);
    assert.equal(await metric("cloud_module_classloader_pending"), 1);
    const cleaned = await call(t.baseUrl, admin, "POST", "/api/v1/modules/platform/leaked-classloaders/force-cleanup");
    assert.deepEqual(cleaned.json, { terminated: 1 });
    assert.equal((await call(t.baseUrl, admin, "GET", "/api/v1/modules/platform/leaked-classloaders")).json.loaders.length, 0);
    assert.equal(await metric("cloud_module_classloader_pending"), 0);
    assert.ok((await metric("cloud_module_classloader_collected_total"))! >= 1);
  });

  it("fails a module that hangs in a route: its routes are cleared, the others answer, the controller stays ready", async () => {
    assert.equal(
      (
        await install(
          "spinner",
          "1.0.0",
          `export default { registerRoutes(routes) { routes.get("spin", () => { for (;;) {} }); routes.get("ok", (q, r) => r.json({})); } };`,
        )
      ).status,
      201,
    );
    const spun = await call(t.baseUrl, admin, "GET", "/api/v1/modules/spinner/spin");
    assert.equal(spun.status, 503);
    const listed = (await call(t.baseUrl, admin, "GET", "/api/v1/modules")).json.find((m: { id: string }) => m.id === "spinner");
    assert.equal(listed.state, "FAILED");
    assert.equal(listed.failure.cause, "hung");
    assert.deepEqual(listed.routes, []);
    assert.equal((await call(t.baseUrl, admin, "GET", "/api/v1/modules/spinner/ok")).json.error.message, "Module route not found");
    assert.equal((await call(t.baseUrl, admin, "GET", "/api/v1/modules/listener/seen")).status, 200);
    assert.equal((await call(t.baseUrl, null, "GET", "/api/v1/system/ready")).json.checks.platformModules, true);
    assert.equal(await metric('cloud_platform_modules_state{state="FAILED"}'), 1);
  });
});
