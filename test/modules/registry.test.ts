// Installing from a registry: a real HTTP server serves a static index, bundles and signatures; the
// controller checks the bundle against the index's sha256 and verifies the signature, and answers
// the catalog of every configured registry.
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { startTestApp, type TestApp } from "../support/http-app.js";
import { buildBundle, manifestOf, newSigningKey, sha256Of, signBundle } from "./support/bundles.js";
import { call } from "./support/module-api.js";
import { startRegistryServer, type RegistryServer } from "./support/registry-server.js";

describe("module registries", () => {
  let t: TestApp;
  let registry: RegistryServer;
  let dir: string;
  let admin: string;
  const key = newSigningKey();
  const source = (version: string) =>
    `export default { registerRoutes(routes) { routes.get("version", (q, r) => r.json({ version: ${JSON.stringify(version)} })); } };`;
  const build = (id: string, version: string) =>
    buildBundle(join(dir, `${id}-${version}`), join(dir, `${id}-${version}.tgz`), {
      "META-INF/cloud/module.yaml": manifestOf(id, version),
      "backend/index.js": source(version),
    });
  const install = (module: string, registryUrl?: string | null) =>
    call(
      t.baseUrl,
      admin,
      "POST",
      "/api/v1/modules/platform/registry/install",
      JSON.stringify(registryUrl === undefined ? { module } : { module, registry: registryUrl }),
    );

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "module-registry-"));
    registry = await startRegistryServer();
    const versions = [];
    for (const version of ["1.0.0", "1.1.0"]) {
      const path = await build("motd", version);
      registry.put(`/bundles/motd-${version}.tgz`, await readFile(path));
      registry.put(`/bundles/motd-${version}.tgz.sig`, await signBundle(path, key.privateKeyPem));
      versions.push({ version, url: `bundles/motd-${version}.tgz`, sha256: await sha256Of(path), signatureUrl: `bundles/motd-${version}.tgz.sig` });
    }
    const tampered = await build("tampered", "1.0.0");
    registry.put("/bundles/tampered.tgz", await readFile(tampered));
    registry.put("/bundles/tampered.tgz.sig", await signBundle(tampered, key.privateKeyPem));
    const unsigned = await build("unsigned", "2.0.0");
    registry.put("/bundles/unsigned.tgz", await readFile(unsigned));
    registry.put(
      "/index.json",
      JSON.stringify({
        formatVersion: 1,
        modules: [
          { id: "motd", description: "Message of the day", tags: ["chat", "lobby"], versions },
          { id: "tampered", versions: [{ version: "1.0.0", url: "bundles/tampered.tgz", sha256: "0".repeat(64), signatureUrl: "bundles/tampered.tgz.sig" }] },
          { id: "unsigned", tags: ["misc"], versions: [{ version: "2.0.0", url: "bundles/unsigned.tgz", sha256: await sha256Of(unsigned) }] },
        ],
      }),
    );
    t = await startTestApp({
      config: {
        modules: {
          registries: [`${registry.url}/index.json`, "http://127.0.0.1:1/index.json"],
          signing: { required: true, publicKeys: [key.publicKeyPem] },
        } as never,
      },
    });
    admin = await t.tokenFor("ADMIN");
  });
  after(async () => {
    await t.close();
    await registry.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("answers the catalog of every configured registry, naming an unreachable one", async () => {
    const catalog = (await call(t.baseUrl, admin, "GET", "/api/v1/modules/platform/registry")).json;
    assert.deepEqual(catalog.registries[0], { url: `${registry.url}/index.json`, reachable: true, error: null, moduleCount: 3 });
    assert.equal(catalog.registries[1].reachable, false);
    assert.match(catalog.registries[1].error, /cannot be reached/);
    const motd = catalog.modules.find((m: { id: string }) => m.id === "motd");
    assert.deepEqual(motd, {
      id: "motd",
      registry: `${registry.url}/index.json`,
      description: "Message of the day",
      tags: ["chat", "lobby"],
      latest: "1.1.0",
      versions: ["1.1.0", "1.0.0"],
      installedVersion: null,
      unsigned: false,
    });
    assert.equal(catalog.modules.find((m: { id: string }) => m.id === "unsigned").unsigned, true);
  });

  it("installs the newest version of an id (201), then the version of id@version (200), checked and verified", async () => {
    const installed = await install("motd");
    assert.equal(installed.status, 201, installed.text);
    assert.equal(installed.json.version, "1.1.0");
    assert.equal(installed.json.source, `${registry.url}/index.json`);
    assert.equal(installed.json.signed, true);
    assert.deepEqual((await call(t.baseUrl, admin, "GET", "/api/v1/modules/motd/version")).json, { version: "1.1.0" });
    const pinned = await install("motd@1.0.0", `${registry.url}/index.json`);
    assert.equal(pinned.status, 200, pinned.text);
    assert.deepEqual((await call(t.baseUrl, admin, "GET", "/api/v1/modules/motd/version")).json, { version: "1.0.0" });
    const catalog = (await call(t.baseUrl, admin, "GET", "/api/v1/modules/platform/registry")).json;
    assert.equal(catalog.modules.find((m: { id: string }) => m.id === "motd").installedVersion, "1.0.0");
  });

  it("refuses a bundle whose sha256 is not the index's, and an unsigned one, installing nothing", async () => {
    const tampered = await install("tampered");
    assert.equal(tampered.status, 422);
    assert.equal(tampered.json.error.code, "PLATFORM_INSTALL_FAILED");
    assert.match(tampered.json.error.message, /sha256 .* the index says 0{64}; refused/);
    const unsigned = await install("unsigned@2.0.0");
    assert.equal(unsigned.status, 422);
    assert.equal(unsigned.json.error.code, "SIGNATURE_VERIFICATION_FAILED");
    const ids = (await call(t.baseUrl, admin, "GET", "/api/v1/modules")).json.map((m: { id: string }) => m.id);
    assert.deepEqual(ids, ["motd"]);
  });

  it("refuses unknown modules (404), unconfigured registries and bad specs (422)", async () => {
    assert.equal((await install("nothing")).status, 404);
    assert.equal((await install("motd@9.9.9")).status, 404);
    const foreign = await install("motd", "http://127.0.0.1:9/index.json");
    assert.equal(foreign.status, 422);
    assert.match(foreign.json.error.message, /not one of the configured registries/);
    assert.equal((await install("Not An Id")).status, 422);
    assert.equal((await call(t.baseUrl, await t.tokenFor("VIEWER"), "POST", "/api/v1/modules/platform/registry/install", '{"module":"motd"}')).status, 403);
  });
});
