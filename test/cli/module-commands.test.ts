// cloudctl module commands driven through the real bin against a real controller (child process,
// development profile, signing required) and a real static registry: the example module's signed
// build is checked by doctor, installed with its autodetected sidecar, listed, searched, upgraded
// from the registry and from a local build, removed; refusals keep their exit codes.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { buildMotdModule, type BuiltModule } from "../../examples/motd-module/build.js";
import { packModuleDirectory } from "../../src/modules/bundle/pack.js";
import { signBundleDigest } from "../../src/modules/bundle/signature.js";
import { buildBundle, DEVELOPMENT_KEY_PATH, manifestOf, rawTgz } from "../modules/support/bundles.js";
import { startTestController, type TestController } from "../support/controller.js";
import { startRegistryServer, type RegistryServer } from "../modules/support/registry-server.js";
import { homeWithContext, runCli, startFakeController, type FakeController } from "./harness.js";

const sha256 = (path: string) => createHash("sha256").update(readFileSync(path)).digest("hex");

describe("cloudctl module against a real controller and registry", { timeout: 300_000 }, () => {
  let dir: string;
  let v1: BuiltModule;
  let v2: BuiltModule;
  let v3: BuiltModule;
  let registry: RegistryServer;
  let controller: TestController;
  let home: { home: string; dispose: () => void };
  const cli = (args: string[], stdin?: string) => runCli(args, { home: home.home, stdin });
  const route = async (path: string) => {
    const response = await fetch(`${controller.url}${path}`, { headers: { authorization: `Bearer ${controller.adminToken}` } });
    return { status: response.status, json: (await response.json()) as any };
  };

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "cli-modules-"));
    v1 = await buildMotdModule({ outDir: dir });
    v2 = await buildMotdModule({ version: "1.1.0", outDir: join(dir, "registry") });
    v3 = await buildMotdModule({ version: "1.2.0", outDir: join(dir, "local") });
    registry = await startRegistryServer();
    registry.put("/bundles/motd-1.1.0.tgz", readFileSync(v2.bundle));
    registry.put("/bundles/motd-1.1.0.tgz.sig", readFileSync(v2.signature));
    registry.put(
      "/index.json",
      JSON.stringify({
        formatVersion: 1,
        modules: [
          {
            id: "motd",
            description: "Message of the day",
            tags: ["chat", "lobby"],
            versions: [{ version: "1.1.0", url: "bundles/motd-1.1.0.tgz", sha256: v2.sha256, signatureUrl: "bundles/motd-1.1.0.tgz.sig" }],
          },
        ],
      }),
    );
    controller = await startTestController({ modules: { registries: [`${registry.url}/index.json`] } });
    home = homeWithContext(controller.url, controller.adminToken);
  });
  after(async () => {
    await controller?.stop();
    await registry?.close();
    home?.dispose();
    await rm(dir, { recursive: true, force: true });
  });

  test("doctor: a clean signed build exits 0; unsigned 1 (a warning); forged, tampered or a directory 2", async () => {
    const unsigned = join(dir, "unsigned", "motd-1.0.0.tgz");
    mkdirSync(join(dir, "unsigned"));
    copyFileSync(v1.bundle, unsigned);
    // A manifest naming a missing entrypoint and an extension whose artifact digest is wrong.
    const forgedDir = join(dir, "forged-src");
    mkdirSync(join(forgedDir, "META-INF", "cloud"), { recursive: true });
    mkdirSync(join(forgedDir, "plugins"));
    writeFileSync(join(forgedDir, "plugins", "motd.jar"), "not the declared bytes");
    writeFileSync(
      join(forgedDir, "META-INF", "cloud", "module.yaml"),
      [
        "id: motd",
        "version: 1.0.0",
        "backend:",
        "  controller:",
        "    entrypoint: backend/missing.js#Motd",
        "extensions:",
        "  - id: motd-plugin",
        "    target: server/paper",
        "    activation: always",
        "    variants:",
        "      - id: all",
        '        mcVersionRange: "*"',
        "        runtimeApiVersion: 1",
        "        artifact: plugins/motd.jar",
        `        sha256: "${"a".repeat(64)}"`,
        "        installPath: plugins/",
        "",
      ].join("\n"),
    );
    const forged = join(dir, "forged-1.0.0.tgz");
    await packModuleDirectory(forgedDir, forged);
    // The signature of v1 beside other bytes: does not verify with the development key.
    const tampered = join(dir, "tampered", "motd-1.0.0.tgz");
    mkdirSync(join(dir, "tampered"));
    copyFileSync(v3.bundle, tampered);
    copyFileSync(v1.signature, `${tampered}.sig`);
    // Traversal and a link beside a valid manifest: each entry is reported, nothing is written.
    const hostile = await rawTgz(join(dir, "hostile-1.0.0.tgz"), [
      { name: "META-INF/cloud/module.yaml", data: readFileSync(join(import.meta.dirname, "..", "..", "examples", "motd-module", "module.yaml")) },
      { name: "../escape.js", data: "export default {};" },
      { name: "backend/index.js", type: "symlink", linkname: "/etc/passwd" },
    ]);
    const key = ["--key", join(import.meta.dirname, "..", "..", "examples", "motd-module", "signing", "development-key.pub.pem")];

    const hostileRun = await cli(["module", "doctor", hostile]);
    assert.equal(hostileRun.code, 2, hostileRun.stdout + hostileRun.stderr);
    assert.match(hostileRun.stdout, /"\.\.\/escape\.js": its path leaves the bundle/);
    assert.match(hostileRun.stdout, /"backend\/index\.js": it is a link/);
    assert.match(hostileRun.stdout, /backend\.controller\.entrypoint: backend\/index\.js is not in the bundle/);
    const [clean, noSig, bad, wrongSig, directory, json] = await Promise.all([
      cli(["module", "doctor", v1.bundle, ...key]),
      cli(["module", "doctor", unsigned]),
      cli(["module", "doctor", forged]),
      cli(["module", "doctor", tampered, ...key]),
      cli(["module", "doctor", dir]),
      cli(["--json", "module", "doctor", forged]),
    ]);
    assert.equal(clean.code, 0, clean.stdout + clean.stderr);
    assert.match(clean.stdout, /identity: motd 1\.0\.0/);
    assert.match(clean.stdout, /signature: motd-1\.0\.0\.tgz\.sig verifies with development-key\.pub\.pem/);
    assert.equal(noSig.code, 1, noSig.stdout + noSig.stderr);
    assert.match(noSig.stdout, /no motd-1\.0\.0\.tgz\.sig sidecar/);
    assert.equal(bad.code, 2, bad.stdout + bad.stderr);
    assert.match(bad.stdout, /backend\.controller\.entrypoint: backend\/missing\.js is not in the bundle/);
    assert.match(bad.stdout, /motd-plugin\/all: plugins\/motd\.jar has sha256 [0-9a-f]{64}, the manifest says a{64}/);
    assert.equal(wrongSig.code, 2, wrongSig.stdout + wrongSig.stderr);
    assert.match(wrongSig.stdout, /does not verify with development-key\.pub\.pem/);
    assert.equal(directory.code, 2);
    assert.match(directory.stderr, /is a directory/);
    const report = JSON.parse(json.stdout);
    assert.equal(json.code, 2);
    assert.ok(report.errors >= 2 && report.findings.some((f: { check: string }) => f.check === "variants"), json.stdout);
  });

  test("install (sidecar found beside the bundle), list, search, upgrade from the registry and a local build, delete", async () => {
    const empty = await cli(["module", "list"]);
    assert.equal(empty.code, 0, empty.stderr);
    assert.match(empty.stdout, /\(none\)/);

    const installed = await cli(["module", "install", v1.bundle, "--check-requires"]);
    assert.equal(installed.code, 0, installed.stderr);
    assert.match(installed.stdout, /installed motd 1\.0\.0: ACTIVE \(signed by [0-9a-f]{16}\)/);
    assert.match(installed.stdout, /motd requires no capability/);
    assert.equal((await route("/api/v1/modules/motd/message")).json.version, "1.0.0");

    const [again, list, search, miss] = await Promise.all([
      cli(["module", "upload", v1.bundle]),
      cli(["module", "list"]),
      cli(["module", "search", "LOB"]),
      cli(["module", "search", "nothing-like-it"]),
    ]);
    assert.equal(again.code, 1, again.stderr);
    assert.match(again.stderr, /HTTP 409/);
    assert.match(list.stdout, /MODULE\s+VERSION\s+STATE\s+HEALTH\s+FRONTEND\s+PLUGINS\s+SIGNED BY\s+SOURCE/);
    assert.match(list.stdout, /motd\s+1\.0\.0\s+ACTIVE\s+healthy\s+yes\s+0\s+[0-9a-f]{16}\s+upload/);
    assert.match(search.stdout, /MODULE\s+VERSION\s+REGISTRY\s+INSTALLED\s+TAGS/);
    assert.match(search.stdout, new RegExp(`motd\\s+1\\.1\\.0\\s+${registry.url}/index\\.json\\s+1\\.0\\.0\\s+chat, lobby`));
    assert.match(miss.stdout, /\(none\)/);

    const upgraded = await cli(["module", "upgrade", "motd"]);
    assert.equal(upgraded.code, 0, upgraded.stderr);
    assert.match(upgraded.stdout, /upgraded motd 1\.0\.0 → 1\.1\.0: ACTIVE/);
    assert.equal((await route("/api/v1/modules/motd/message")).json.version, "1.1.0");
    assert.ok(registry.requests.includes("/bundles/motd-1.1.0.tgz"));

    const [same, all, unknown, neither] = await Promise.all([
      cli(["module", "upgrade", "motd"]),
      cli(["module", "upgrade", "--all"]),
      cli(["module", "upgrade", "nope"]),
      cli(["module", "upgrade"]),
    ]);
    assert.equal(same.code, 0, same.stderr);
    assert.match(same.stderr, /1\.1\.0 is the version the registry offers: nothing to do/);
    assert.equal(all.code, 0, all.stderr);
    assert.equal(unknown.code, 4, unknown.stderr);
    assert.match(unknown.stderr, /module nope is not installed/);
    assert.equal(neither.code, 64);

    // A local build through the upgrade route; its sidecar is found beside it.
    const local = await cli(["--json", "module", "upgrade", "motd", "--bundle", v3.bundle]);
    assert.equal(local.code, 0, local.stderr);
    assert.equal(JSON.parse(local.stdout).version, "1.2.0");
    assert.equal(JSON.parse(local.stdout).signed, true);
    // The registry's 1.1.0 is older than what runs: upgrade leaves it.
    const older = await cli(["module", "upgrade", "motd"]);
    assert.equal(older.code, 0, older.stderr);
    assert.match(older.stderr, /1\.2\.0 is newer than the registry's 1\.1\.0: left as it is/);
    assert.equal((await route("/api/v1/modules/motd/message")).json.version, "1.2.0");

    const refused = await cli(["module", "delete", "motd"]);
    assert.equal(refused.code, 6, refused.stderr);
    assert.equal((await route("/api/v1/modules/motd/message")).status, 200);
    const deleted = await cli(["module", "delete", "motd", "--yes"]);
    assert.equal(deleted.code, 0, deleted.stderr);
    assert.match(deleted.stdout, /removed module motd/);
    assert.equal((await route("/api/v1/modules/motd/message")).status, 404);
    const gone = await cli(["module", "delete", "motd", "--yes"]);
    assert.equal(gone.code, 4, gone.stderr);
  });

  test("install from the registry by spec; an unsigned or tampered local bundle is refused and nothing is installed", async () => {
    const pulled = await cli(["module", "install", "motd@1.1.0", "--registry", `${registry.url}/index.json`]);
    assert.equal(pulled.code, 0, pulled.stderr);
    assert.match(pulled.stdout, /installed motd 1\.1\.0: ACTIVE/);
    const [notOffered, foreign] = await Promise.all([
      cli(["module", "install", "chat@2.0.0"]),
      cli(["module", "install", "motd", "--registry", "http://127.0.0.1:9/index.json"]),
    ]);
    assert.equal(notOffered.code, 4, notOffered.stderr);
    assert.equal(foreign.code, 1, foreign.stderr);
    assert.match(foreign.stderr, /not one of the configured registries/);
    // A module requiring the capability motd provides: --check-requires names the provider.
    const greeter = await buildBundle(join(dir, "greeter-src"), join(dir, "greeter", "greeter-1.0.0.tgz"), {
      "META-INF/cloud/module.yaml": manifestOf("greeter", "1.0.0", { capabilities: { requires: [{ id: "motd-text", versionRange: "^1.0.0" }] } }),
      "backend/index.js": "export default {};",
    });
    writeFileSync(`${greeter}.sig`, signBundleDigest(sha256(greeter), readFileSync(DEVELOPMENT_KEY_PATH, "utf8")));
    const requiring = await cli(["module", "install", greeter, "--check-requires"]);
    assert.equal(requiring.code, 0, requiring.stderr);
    assert.match(requiring.stdout, /requires motd-text \^1\.0\.0: provided by module motd \(motd-text 1\.0\.0\)/);
    assert.equal((await cli(["module", "delete", "greeter", "--yes"])).code, 0);
    assert.equal((await cli(["module", "delete", "motd", "--yes"])).code, 0);

    const lone = join(dir, "lone", "motd-1.0.0.tgz");
    mkdirSync(join(dir, "lone"));
    copyFileSync(v1.bundle, lone);
    const tampered = join(dir, "lone", "other-1.0.0.tgz");
    copyFileSync(v3.bundle, tampered);
    writeFileSync(`${lone}.cosign.bundle`, "{}");
    const [unsigned, wrong, missing, notBundle] = await Promise.all([
      cli(["module", "install", lone]),
      cli(["module", "install", tampered, "--signature", v1.signature]),
      cli(["module", "install", join(dir, "nope.tgz")]),
      cli(["module", "upload", `${lone}.cosign.bundle`]),
    ]);
    assert.match(unsigned.stderr, /motd-1\.0\.0\.tgz\.cosign\.bundle: cosign bundles are not verified by the controller/);
    assert.equal(notBundle.code, 1);
    assert.match(notBundle.stderr, /a module bundle is a \.tgz, \.tar\.gz, \.tar, \.zip, \.jar file/);
    assert.equal(unsigned.code, 1, unsigned.stderr);
    assert.match(unsigned.stderr, /no signature sidecar/);
    assert.match(unsigned.stderr, /SIGNATURE_VERIFICATION_FAILED|PLATFORM_INSTALL_FAILED/);
    assert.equal(wrong.code, 1, wrong.stderr);
    assert.match(wrong.stderr, /SIGNATURE_VERIFICATION_FAILED, HTTP 422/);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /does not exist/);
    assert.equal(sha256(v1.bundle), v1.sha256);
    assert.deepEqual((await route("/api/v1/modules")).json, []);
  });
});

describe("cloudctl module upgrade without registries, and --all with failures", () => {
  let server: FakeController;
  let registries: unknown[] = [];
  before(async () => {
    server = await startFakeController((app) => {
      app.get("/api/v1/modules/platform/registry", (c) =>
        c.json({
          registries,
          modules: [
            { id: "a", registry: "http://r/index.json", description: "", tags: [], latest: "2.0.0", installedVersion: "1.0.0", unsigned: false },
            { id: "b", registry: "http://r/index.json", description: "", tags: [], latest: "2.0.0", installedVersion: "1.0.0", unsigned: false },
          ],
        }),
      );
      app.get("/api/v1/modules", (c) =>
        c.json(
          ["a", "b", "local"].map((id) => ({
            id,
            version: "1.0.0",
            state: "ACTIVE",
            health: "healthy",
            hasFrontend: false,
            platformPluginCount: 0,
            signed: true,
          })),
        ),
      );
      app.post("/api/v1/modules/platform/registry/install", async (c) => {
        const { module } = await c.req.json();
        if (module.startsWith("a@")) return c.json({ error: { code: "PLATFORM_UPGRADE_FAILED", message: "start hook threw", status: 422 } }, 422);
        return c.json({ id: "b", version: "2.0.0", state: "ACTIVE" });
      });
    });
  });
  after(() => server.close());

  test("no registry configured: a warning and exit 0; --all goes on after a failure and exits 1 with the count", async () => {
    const { home, dispose } = homeWithContext(server.url);
    try {
      const none = await runCli(["module", "upgrade", "--all"], { home });
      assert.equal(none.code, 0, none.stderr);
      assert.match(none.stderr, /warning: no module registry is configured/);
      registries = [{ url: "http://r/index.json", reachable: true, error: null, moduleCount: 2 }];
      const all = await runCli(["module", "upgrade", "--all"], { home });
      assert.equal(all.code, 1, all.stderr);
      assert.match(all.stderr, /a: upgrade failed: start hook threw \(PLATFORM_UPGRADE_FAILED, HTTP 422\)/);
      assert.match(all.stdout, /upgraded b 1\.0\.0 → 2\.0\.0/);
      assert.match(all.stderr, /local: not offered by any configured registry: skipped/);
      assert.match(all.stderr, /1 of 3 module upgrade\(s\) failed/);
      const sent = server.requests.filter((r) => r.path === "/api/v1/modules/platform/registry/install").map((r) => JSON.parse(r.body).module);
      assert.deepEqual(sent, ["a@2.0.0", "b@2.0.0"]);
    } finally {
      dispose();
    }
  });
});
