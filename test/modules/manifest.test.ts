// Manifest validation, one row per rule of spec document 3 ("Manifest"): each row changes a valid
// manifest so that exactly one rule breaks, and the message must name the field path and the rule.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { stringify } from "yaml";
import { parseModuleManifest, validateModuleManifest } from "../../src/modules/manifest/manifest.js";
import { ManifestError } from "../../src/modules/manifest/manifest-checks.js";

type Raw = Record<string, any>;

const valid = (): Raw => ({
  manifestVersion: 2,
  id: "motd",
  version: "1.2.3",
  hosts: ["controller"],
  backend: { controller: { entrypoint: "backend/index.js#MotdModule", reloadable: true } },
  frontend: { sdkVersion: 1, entry: "index.js" },
  storage: { mongo: true, redis: true, limits: { mongoDocuments: 100, redisKeys: 50 } },
  capabilities: {
    provides: [{ id: "motd-text", version: "1.0.0", deprecatedSince: "1.1.0", removedIn: "2.0.0" }],
    requires: [{ id: "cloud-instance-files", versionRange: ">=1.0.0 <2.0.0" }],
  },
  extensions: [
    {
      id: "motd-plugin",
      target: "server/paper",
      activation: "explicit-group-attach",
      conflicts: [],
      variants: [
        { id: "paper-1-20", mcVersionRange: ">=1.20.0", runtimeApiVersion: 1, artifact: "plugins/motd.jar", sha256: "a".repeat(64), installPath: "plugins/" },
      ],
    },
  ],
});

/** [rule, change, expected message (path: rule)] */
const REJECTIONS: readonly [string, (m: Raw) => void, RegExp][] = [
  ["unknown root field", (m) => (m.name = "x"), /^name: unknown field/],
  ["manifestVersion above the range", (m) => (m.manifestVersion = 3), /^manifestVersion: must be between 1 and 2 \(got 3\)/],
  ["manifestVersion below the range", (m) => (m.manifestVersion = 0), /^manifestVersion: must be between 1 and 2/],
  ["manifestVersion not an integer", (m) => (m.manifestVersion = "2"), /^manifestVersion: must be an integer/],
  ["id required", (m) => delete m.id, /^id: is required/],
  ["id pattern", (m) => (m.id = "Motd"), /^id: must match \^\[a-z\]\[a-z0-9-\]\*\$/],
  ["id pattern (leading digit)", (m) => (m.id = "1motd"), /^id: must match/],
  ["id reserved", (m) => (m.id = "platform"), /^id: "platform" is reserved/],
  ["version required", (m) => delete m.version, /^version: is required/],
  ["version shape", (m) => (m.version = "1.2"), /^version: must be three dot-separated integers/],
  ["version suffix characters", (m) => (m.version = "1.2.3-rc_1"), /^version: must be three dot-separated integers/],
  ["version build metadata", (m) => (m.version = "1.2.3+build.5"), /^version: must not carry build metadata/],
  ["hosts empty", (m) => (m.hosts = []), /^hosts: must not be empty/],
  ["hosts unknown value", (m) => (m.hosts = ["proxy"]), /^hosts\[0\]: must be controller or daemon/],
  ["hosts duplicate (case-insensitive)", (m) => (m.hosts = ["controller", "Controller"]), /^hosts\[1\]: duplicate host/],
  ["hosts not a list", (m) => (m.hosts = "controller"), /^hosts: must be a list/],
  ["backend required", (m) => delete m.backend, /^backend: is required/],
  ["backend unknown field", (m) => (m.backend.web = {}), /^backend\.web: unknown field/],
  ["backend without any host entry", (m) => (m.backend = {}), /^backend: needs backend\.controller or backend\.daemon/],
  [
    "backend.controller required for hosts controller",
    (m) => (m.backend = { daemon: { entrypoint: "d.js" } }),
    /^backend\.controller\.entrypoint: is required when hosts includes controller/,
  ],
  [
    "backend.daemon required for hosts daemon",
    (m) => (m.hosts = ["controller", "daemon"]),
    /^backend\.daemon\.entrypoint: is required when hosts includes daemon/,
  ],
  ["entrypoint required", (m) => (m.backend.controller = { reloadable: false }), /^backend\.controller\.entrypoint: is required/],
  ["entrypoint blank", (m) => (m.backend.controller.entrypoint = "  "), /^backend\.controller\.entrypoint: must not be blank/],
  [
    "entrypoint is a file and export",
    (m) => (m.backend.controller.entrypoint = "com.example.MotdModule"),
    /^backend\.controller\.entrypoint: must name an ES module file/,
  ],
  ["entrypoint escapes the bundle", (m) => (m.backend.controller.entrypoint = "../index.js"), /^backend\.controller\.entrypoint: must name an ES module file/],
  ["entrypoint absolute", (m) => (m.backend.controller.entrypoint = "/index.js"), /^backend\.controller\.entrypoint: must name an ES module file/],
  ["reloadable a boolean", (m) => (m.backend.controller.reloadable = "yes"), /^backend\.controller\.reloadable: must be true or false/],
  [
    "reloadable is version 2 only",
    (m) => ((m.manifestVersion = 1), delete m.capabilities.provides[0].deprecatedSince, delete m.capabilities.provides[0].removedIn),
    /^backend\.controller\.reloadable: is a manifestVersion 2 field/,
  ],
  ["legacy form mixed with controller", (m) => (m.backend.entrypoint = "a.js"), /^backend\.entrypoint: the legacy form cannot be mixed/],
  [
    "legacy form needs hosts controller",
    (m) => ((m.hosts = ["daemon"]), (m.backend = { entrypoint: "a.js" })),
    /^backend\.entrypoint: the legacy form needs hosts to include controller/,
  ],
  ["legacy form entrypoint shape", (m) => (m.backend = { entrypoint: "Main" }), /^backend\.entrypoint: must name an ES module file/],
  ["frontend unknown field", (m) => (m.frontend.path = "x"), /^frontend\.path: unknown field/],
  ["frontend sdkVersion must be 1", (m) => (m.frontend.sdkVersion = 2), /^frontend\.sdkVersion: must be 1 \(got 2\)/],
  ["frontend sdkVersion required", (m) => delete m.frontend.sdkVersion, /^frontend\.sdkVersion: is required/],
  ["frontend entry blank", (m) => (m.frontend.entry = ""), /^frontend\.entry: must not be blank/],
  ["storage unknown field", (m) => (m.storage.postgres = true), /^storage\.postgres: unknown field/],
  ["storage flag a boolean", (m) => (m.storage.mongo = 1), /^storage\.mongo: must be true or false/],
  ["storage limit above 0", (m) => (m.storage.limits.redisKeys = 0), /^storage\.limits\.redisKeys: must be above 0 when set/],
  ["storage mongo limit needs mongo", (m) => (m.storage.mongo = false), /^storage\.limits\.mongoDocuments: needs storage\.mongo: true/],
  ["storage redis limit needs redis", (m) => (m.storage.redis = false), /^storage\.limits\.redisKeys: needs storage\.redis: true/],
  ["storage limits unknown field", (m) => (m.storage.limits.blobs = 1), /^storage\.limits\.blobs: unknown field/],
  ["capabilities unknown field", (m) => (m.capabilities.offers = []), /^capabilities\.offers: unknown field/],
  ["provides id pattern", (m) => (m.capabilities.provides[0].id = "Motd_Text"), /^capabilities\.provides\[0\]\.id: must match/],
  [
    "provides duplicate id",
    (m) => m.capabilities.provides.push({ id: "motd-text", version: "2.0.0" }),
    /^capabilities\.provides\[1\]\.id: duplicate capability id "motd-text"/,
  ],
  [
    "provides version shape",
    (m) => (m.capabilities.provides[0].version = "1.0"),
    /^capabilities\.provides\[0\]\.version: must be three dot-separated integers with an optional hyphen or plus suffix/,
  ],
  [
    "provides deprecatedSince semver",
    (m) => (m.capabilities.provides[0].deprecatedSince = "soon"),
    /^capabilities\.provides\[0\]\.deprecatedSince: must be a semver version/,
  ],
  [
    "provides removedIn needs deprecatedSince",
    (m) => delete m.capabilities.provides[0].deprecatedSince,
    /^capabilities\.provides\[0\]\.removedIn: needs deprecatedSince/,
  ],
  [
    "provides deprecatedSince is version 2 only",
    (m) => ((m.manifestVersion = 1), delete m.backend.controller.reloadable),
    /^capabilities\.provides\[0\]\.deprecatedSince: is a manifestVersion 2 field/,
  ],
  ["provides unknown field", (m) => (m.capabilities.provides[0].handle = "x"), /^capabilities\.provides\[0\]\.handle: unknown field/],
  ["requires versionRange required", (m) => delete m.capabilities.requires[0].versionRange, /^capabilities\.requires\[0\]\.versionRange: is required/],
  ["requires versionRange blank", (m) => (m.capabilities.requires[0].versionRange = " "), /^capabilities\.requires\[0\]\.versionRange: must not be blank/],
  [
    "requires versionRange semver",
    (m) => (m.capabilities.requires[0].versionRange = "[1.0,2.0)"),
    /^capabilities\.requires\[0\]\.versionRange: must parse as a semver range/,
  ],
  ["requires id pattern", (m) => (m.capabilities.requires[0].id = "cloud.instance.files"), /^capabilities\.requires\[0\]\.id: must match/],
  ["extensions not a list", (m) => (m.extensions = {}), /^extensions: must be a list/],
  ["extension id pattern", (m) => (m.extensions[0].id = "Motd"), /^extensions\[0\]\.id: must match/],
  ["extension id unique", (m) => m.extensions.push(structuredClone(m.extensions[0])), /^extensions\[1\]\.id: duplicate extension id/],
  ["extension target shape", (m) => (m.extensions[0].target = "paper"), /^extensions\[0\]\.target: must be <workload type>\/<runtime family>/],
  ["extension target part pattern", (m) => (m.extensions[0].target = "server/Paper"), /^extensions\[0\]\.target: must be <workload type>\/<runtime family>/],
  [
    "extension activation value",
    (m) => (m.extensions[0].activation = "manual"),
    /^extensions\[0\]\.activation: must be one of explicit-group-attach, default-enabled, always/,
  ],
  ["extension conflicts strings", (m) => (m.extensions[0].conflicts = [1]), /^extensions\[0\]\.conflicts\[0\]: must be a non-blank string/],
  ["extension variants non-empty", (m) => (m.extensions[0].variants = []), /^extensions\[0\]\.variants: must not be empty/],
  ["extension variants required", (m) => delete m.extensions[0].variants, /^extensions\[0\]\.variants: is required/],
  [
    "variant id unique",
    (m) => m.extensions[0].variants.push(structuredClone(m.extensions[0].variants[0])),
    /^extensions\[0\]\.variants\[1\]\.id: duplicate variant id/,
  ],
  [
    "variant mcVersionRange semver",
    (m) => (m.extensions[0].variants[0].mcVersionRange = "1.20+"),
    /^extensions\[0\]\.variants\[0\]\.mcVersionRange: must be a semver range/,
  ],
  [
    "variant runtimeApiVersion at least 1",
    (m) => (m.extensions[0].variants[0].runtimeApiVersion = 0),
    /^extensions\[0\]\.variants\[0\]\.runtimeApiVersion: must be at least 1/,
  ],
  [
    "variant runtimeApiVersion an integer",
    (m) => (m.extensions[0].variants[0].runtimeApiVersion = 1.5),
    /^extensions\[0\]\.variants\[0\]\.runtimeApiVersion: must be an integer/,
  ],
  [
    "variant artifact leading slash",
    (m) => (m.extensions[0].variants[0].artifact = "/plugins/motd.jar"),
    /^extensions\[0\]\.variants\[0\]\.artifact: must be relative/,
  ],
  [
    "variant artifact leading backslash",
    (m) => (m.extensions[0].variants[0].artifact = "\\plugins\\motd.jar"),
    /^extensions\[0\]\.variants\[0\]\.artifact: must be relative/,
  ],
  [
    "variant artifact ..",
    (m) => (m.extensions[0].variants[0].artifact = "plugins/../../motd.jar"),
    /^extensions\[0\]\.variants\[0\]\.artifact: must not contain \.\./,
  ],
  ["variant artifact .jar", (m) => (m.extensions[0].variants[0].artifact = "plugins/motd.zip"), /^extensions\[0\]\.variants\[0\]\.artifact: must end in \.jar/],
  ["variant sha256 hex", (m) => (m.extensions[0].variants[0].sha256 = "xyz"), /^extensions\[0\]\.variants\[0\]\.sha256: must be 64 hexadecimal characters/],
  ["variant sha256 AUTO replaced", (m) => (m.extensions[0].variants[0].sha256 = "AUTO"), /^extensions\[0\]\.variants\[0\]\.sha256: is still AUTO/],
  [
    "variant installPath leading slash",
    (m) => (m.extensions[0].variants[0].installPath = "/plugins/"),
    /^extensions\[0\]\.variants\[0\]\.installPath: must be relative/,
  ],
  [
    "variant installPath ..",
    (m) => (m.extensions[0].variants[0].installPath = "../plugins"),
    /^extensions\[0\]\.variants\[0\]\.installPath: must not contain \.\./,
  ],
  ["variant unknown field", (m) => (m.extensions[0].variants[0].url = "x"), /^extensions\[0\]\.variants\[0\]\.url: unknown field/],
];

describe("module manifest validation", () => {
  it("accepts the valid manifest and fills in what it leaves out", () => {
    const manifest = validateModuleManifest(valid());
    assert.equal(manifest.id, "motd");
    assert.deepEqual(manifest.backend.controller, {
      entrypoint: "backend/index.js#MotdModule",
      file: "backend/index.js",
      exportName: "MotdModule",
      reloadable: true,
    });
    const minimal = validateModuleManifest({ id: "tiny", version: "0.1.0-alpha.1", backend: { entrypoint: "main.mjs" } });
    assert.equal(minimal.manifestVersion, 2);
    assert.deepEqual(minimal.hosts, ["controller"]);
    assert.deepEqual(minimal.backend.controller, { entrypoint: "main.mjs", file: "main.mjs", exportName: "default", reloadable: false });
    assert.deepEqual(minimal.storage, { mongo: false, redis: false, limits: { mongoDocuments: 0, redisKeys: 0 } });
    assert.deepEqual(minimal.capabilities, { provides: [], requires: [] });
    assert.deepEqual(minimal.extensions, []);
    assert.equal(minimal.frontend, null);
    assert.deepEqual(
      validateModuleManifest({
        id: "d",
        version: "1.0.0",
        hosts: ["CONTROLLER", "Daemon"],
        backend: { controller: { entrypoint: "c.js" }, daemon: { entrypoint: "d.js" } },
      }).hosts,
      ["controller", "daemon"],
    );
    assert.equal(
      validateModuleManifest({ ...valid(), manifestVersion: 1, backend: { controller: { entrypoint: "a.js" } }, capabilities: undefined }).manifestVersion,
      1,
    );
    assert.equal(
      validateModuleManifest({
        ...valid(),
        extensions: [{ ...valid().extensions[0], variants: [{ ...valid().extensions[0].variants[0], mcVersionRange: "*" }] }],
      }).extensions[0].variants[0].mcVersionRange,
      "*",
    );
  });

  for (const [rule, change, expected] of REJECTIONS) {
    it(`refuses: ${rule}`, () => {
      const raw = valid();
      change(raw);
      assert.throws(
        () => validateModuleManifest(raw),
        (error: unknown) => {
          assert.ok(error instanceof ManifestError, `a ManifestError, got ${String(error)}`);
          assert.match(error.message, expected);
          assert.equal(error.message, `${error.path}: ${error.rule}`);
          return true;
        },
      );
    });
  }

  it("parses YAML, refusing text that is not YAML or repeats a key", () => {
    assert.equal(parseModuleManifest(stringify(valid())).version, "1.2.3");
    assert.throws(() => parseModuleManifest("id: [unclosed"), { message: /^manifest: is not valid YAML/ });
    assert.throws(() => parseModuleManifest("id: a\nid: b\nversion: 1.0.0\nbackend: {entrypoint: a.js}\n"), { message: /^manifest: is not valid YAML/ });
    assert.throws(() => parseModuleManifest("- a\n- b\n"), { message: /^manifest: must be an object \(got a list\)/ });
  });
});
