import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Value } from "@sinclair/typebox/value";
import { CONFIG_ENV_OVERRIDES, ConfigError, loadControllerConfig, parseControllerConfig, resolveConfigPath } from "../../src/config/load.js";
import { configDefaults, ControllerConfigSchema, REMOVED_CONFIG_KEYS } from "../../src/config/schema.js";
import { defaultCrashLoopOptions } from "../../src/scheduler/crash-loop.js";

let dir: string;
before(() => {
  dir = mkdtempSync(join(tmpdir(), "cloud-config-"));
});
after(() => rmSync(dir, { recursive: true, force: true }));

function writeYaml(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

function expectConfigError(fn: () => unknown, pattern: RegExp, key?: string): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof ConfigError, `expected ConfigError, got ${String(err)}`);
    assert.match(err.message, pattern);
    if (key !== undefined) assert.equal(err.key, key);
    return true;
  });
}

const noFile = { env: {}, argv: [] as string[] };

describe("loadControllerConfig: locating the file", () => {
  it("uses every default when no file is given", () => {
    const config = loadControllerConfig(noFile);
    assert.equal(config.runtime.profile, "development");
    assert.equal(config.http.port, 8080);
    assert.equal(config.http.host, "0.0.0.0");
    assert.equal(config.grpc.port, 9090);
    assert.equal(config.data.dir, "data");
    assert.equal(config.raft.dataDir, "data/raft");
    assert.equal(config.raft.port, 9190);
    assert.deepEqual(config.raft.joinAddrs, []);
    assert.equal(config.kvstore.uri, "redis://localhost:6379");
    assert.equal(config.logging.level, "INFO");
    assert.equal(config.logging.format, "HUMAN");
    assert.equal(config.metrics.enabled, true);
    assert.equal(config.metrics.retentionHours, 168);
    assert.equal(config.metrics.collectionIntervalSeconds, 30);
    assert.equal(config.scheduler.evaluationIntervalSeconds, 15);
    assert.equal(config.crashes.crashLoopThreshold, 3);
    assert.ok(Value.Check(ControllerConfigSchema, config));
  });

  it("reads the path from --config, --config=, then CLOUD_CONFIG", () => {
    assert.equal(resolveConfigPath(["node", "main", "--config", "a.yml"], { CLOUD_CONFIG: "b.yml" }), "a.yml");
    assert.equal(resolveConfigPath(["node", "main", "--config=c.yml"], {}), "c.yml");
    assert.equal(resolveConfigPath(["node", "main"], { CLOUD_CONFIG: "b.yml" }), "b.yml");
    assert.equal(resolveConfigPath(["node", "main"], {}), undefined);
    expectConfigError(() => resolveConfigPath(["node", "main", "--config"], {}), /--config needs a file path/);
  });

  it("loads YAML from --config and from CLOUD_CONFIG", () => {
    const path = writeYaml("port.yml", "http:\n  port: 8181\n");
    assert.equal(loadControllerConfig({ env: {}, argv: ["node", "main", "--config", path] }).http.port, 8181);
    assert.equal(loadControllerConfig({ env: { CLOUD_CONFIG: path }, argv: [] }).http.port, 8181);
    assert.equal(loadControllerConfig({ path, env: {}, argv: [] }).http.port, 8181);
  });

  it("treats an empty file as all defaults", () => {
    const path = writeYaml("empty.yml", "# nothing\n");
    assert.equal(loadControllerConfig({ path, env: {}, argv: [] }).http.port, 8080);
  });

  it("fails clearly on a missing file, bad YAML or a non-mapping document", () => {
    expectConfigError(() => loadControllerConfig({ path: join(dir, "missing.yml"), env: {} }), /Cannot read configuration file .*missing\.yml/);
    const bad = writeYaml("bad.yml", "http: [1, 2\n");
    expectConfigError(() => loadControllerConfig({ path: bad, env: {} }), /not valid YAML/);
    const list = writeYaml("list.yml", "- a\n- b\n");
    expectConfigError(() => loadControllerConfig({ path: list, env: {} }), /must contain a mapping/);
  });
});

describe("configDefaults", () => {
  it("is the configuration loaded without a file: the schema's defaults, keys without one absent", () => {
    assert.deepEqual(configDefaults, loadControllerConfig(noFile));
    assert.equal(configDefaults.rateLimit.perIpPerMinute, 6000);
    assert.equal(configDefaults.auth.tokenTtlSeconds, 43200);
    assert.deepEqual(configDefaults.http.corsOrigins, ["*"]);
    assert.ok(!("uri" in configDefaults.database));
    assert.ok(!("id" in configDefaults.cluster));
  });

  it("is frozen, arrays included, so no caller changes another's defaults", () => {
    assert.ok(Object.isFrozen(configDefaults));
    assert.ok(Object.isFrozen(configDefaults.http));
    assert.ok(Object.isFrozen(configDefaults.http.corsOrigins));
    assert.throws(() => {
      (configDefaults.http as { port: number }).port = 1;
    }, TypeError);
  });

  it("feeds the defaults written elsewhere: the crash-loop detector's", () => {
    assert.deepEqual(defaultCrashLoopOptions, {
      crashLoopThreshold: configDefaults.crashes.crashLoopThreshold,
      crashLoopWindowMs: configDefaults.crashes.crashLoopWindowSeconds * 1000,
    });
    assert.deepEqual(defaultCrashLoopOptions, { crashLoopThreshold: 3, crashLoopWindowMs: 300_000 });
  });
});

describe("parseControllerConfig: fallbacks and clamps", () => {
  it("accepts every level case-insensitively and falls back to INFO for unknown ones", () => {
    for (const level of ["TRACE", "DEBUG", "INFO", "WARN", "ERROR"]) {
      assert.equal(parseControllerConfig({ logging: { level: level.toLowerCase() } }).logging.level, level);
      assert.equal(parseControllerConfig({ logging: { level } }).logging.level, level);
    }
    assert.equal(parseControllerConfig({ logging: { level: "VERBOSE" } }).logging.level, "INFO");
    assert.equal(parseControllerConfig({ logging: { level: "" } }).logging.level, "INFO");
  });

  it("falls back to HUMAN for an unknown format", () => {
    assert.equal(parseControllerConfig({ logging: { format: "json" } }).logging.format, "JSON");
    assert.equal(parseControllerConfig({ logging: { format: "Human" } }).logging.format, "HUMAN");
    assert.equal(parseControllerConfig({ logging: { format: "xml" } }).logging.format, "HUMAN");
  });

  it("clamps metrics.retentionHours <= 0 to 168", () => {
    assert.equal(parseControllerConfig({ metrics: { retentionHours: 0 } }).metrics.retentionHours, 168);
    assert.equal(parseControllerConfig({ metrics: { retentionHours: -5 } }).metrics.retentionHours, 168);
    assert.equal(parseControllerConfig({ metrics: { retentionHours: 24 } }).metrics.retentionHours, 24);
  });

  it("clamps metrics.collectionIntervalSeconds <= 0 to 30", () => {
    assert.equal(parseControllerConfig({ metrics: { collectionIntervalSeconds: 0 } }).metrics.collectionIntervalSeconds, 30);
    assert.equal(parseControllerConfig({ metrics: { collectionIntervalSeconds: -1 } }).metrics.collectionIntervalSeconds, 30);
    assert.equal(parseControllerConfig({ metrics: { collectionIntervalSeconds: 10 } }).metrics.collectionIntervalSeconds, 10);
  });

  it("fills a section given as an empty YAML key (null)", () => {
    const config = loadControllerConfig({ path: writeYaml("null-section.yml", "logging:\nmetrics:\n"), env: {} });
    assert.equal(config.logging.level, "INFO");
    assert.equal(config.metrics.enabled, true);
  });

  it("derives raft.dataDir from data.dir unless set explicitly", () => {
    assert.equal(parseControllerConfig({ data: { dir: "/var/lib/cloud" } }).raft.dataDir, "/var/lib/cloud/raft");
    assert.equal(parseControllerConfig({ data: { dir: "/x" }, raft: { dataDir: "/y" } }).raft.dataDir, "/y");
  });
});

describe("parseControllerConfig: rejected keys", () => {
  it("blocks startup on every removed key, naming it", () => {
    assert.ok(REMOVED_CONFIG_KEYS.includes("raft.bindHost"));
    for (const key of REMOVED_CONFIG_KEYS) {
      const [section, leaf] = key.split(".");
      expectConfigError(
        () => parseControllerConfig({ [section]: { [leaf]: "x" } }),
        new RegExp(`Configuration key ${key.replace(".", "\\.")} was removed`),
        key,
      );
    }
  });

  it("names the file in the removed-key message", () => {
    const path = writeYaml("removed.yml", "raft:\n  bindHost: 10.0.0.1\n");
    expectConfigError(
      () => loadControllerConfig({ path, env: {} }),
      /Configuration key raft\.bindHost was removed; delete it from .*removed\.yml/,
      "raft.bindHost",
    );
  });

  it("rejects any other unknown key with its full dotted name", () => {
    expectConfigError(() => parseControllerConfig({ bogus: 1 }), /Unknown configuration key bogus$/, "bogus");
    expectConfigError(() => parseControllerConfig({ http: { prot: 8080 } }), /Unknown configuration key http\.prot/, "http.prot");
    expectConfigError(
      () => parseControllerConfig({ modules: { signing: { requried: true } } }),
      /Unknown configuration key modules\.signing\.requried/,
      "modules.signing.requried",
    );
    expectConfigError(() => parseControllerConfig({ logging: { level: "INFO", file: "x", pattern: "y" } }), /logging\.file was removed/);
    expectConfigError(() => parseControllerConfig({ logging: { pattern: "y" } }), /Unknown configuration key logging\.pattern/);
  });

  it("names the key on a type error", () => {
    expectConfigError(() => parseControllerConfig({ http: { port: "eighty" } }), /Configuration key http\.port: Expected integer/, "http.port");
    expectConfigError(() => parseControllerConfig({ http: { port: 70000 } }), /Configuration key http\.port/, "http.port");
    expectConfigError(() => parseControllerConfig({ metrics: { enabled: "yes" } }), /Configuration key metrics\.enabled: Expected boolean/, "metrics.enabled");
    expectConfigError(() => parseControllerConfig({ raft: { joinAddrs: "a:1" } }), /Configuration key raft\.joinAddrs/, "raft.joinAddrs");
    expectConfigError(() => parseControllerConfig({ runtime: { profile: "staging" } }), /Configuration key runtime\.profile/, "runtime.profile");
    expectConfigError(() => parseControllerConfig({ logging: 3 }), /Configuration key logging/, "logging");
    expectConfigError(() => parseControllerConfig({ telemetry: { samplerRatio: 2 } }), /Configuration key telemetry\.samplerRatio/, "telemetry.samplerRatio");
  });
});

describe("parseControllerConfig: production profile", () => {
  it("refuses production without an explicit kvstore.uri", () => {
    expectConfigError(
      () => parseControllerConfig({ runtime: { profile: "production" } }),
      /runtime\.profile is production but kvstore\.uri is not set/,
      "kvstore.uri",
    );
  });

  it("accepts production with kvstore.uri in the file or from CLOUD_KVSTORE_URI", () => {
    const fromFile = parseControllerConfig({ runtime: { profile: "production" }, kvstore: { uri: "redis://10.0.0.5:6379" } });
    assert.equal(fromFile.kvstore.uri, "redis://10.0.0.5:6379");
    const fromEnv = parseControllerConfig({ runtime: { profile: "production" } }, { env: { CLOUD_KVSTORE_URI: "redis://r:6379" } });
    assert.equal(fromEnv.kvstore.uri, "redis://r:6379");
  });

  it("refuses CLOUD_PROFILE=production without kvstore.uri", () => {
    expectConfigError(() => parseControllerConfig({}, { env: { CLOUD_PROFILE: "production" } }), /production/);
  });
});

describe("parseControllerConfig: environment overrides", () => {
  it("applies every documented override over the file", () => {
    const config = parseControllerConfig(
      { http: { port: 1111, host: "127.0.0.1" }, auth: { adminPassword: "file" } },
      {
        env: {
          CLOUD_ADMIN_PASSWORD: "s3cret",
          CLOUD_HTTP_PORT: "8181",
          CLOUD_HTTP_HOST: "::1",
          CLOUD_GRPC_PORT: "9191",
          CLOUD_DATA_DIR: "/tmp/cloud-data",
          CLOUD_LOG_LEVEL: "debug",
          CLOUD_LOG_FORMAT: "json",
          CLOUD_DATABASE_URI: "mongodb://db:27017/cloud",
        },
      },
    );
    assert.equal(config.auth.adminPassword, "s3cret");
    assert.equal(config.http.port, 8181);
    assert.equal(config.http.host, "::1");
    assert.equal(config.grpc.port, 9191);
    assert.equal(config.data.dir, "/tmp/cloud-data");
    assert.equal(config.raft.dataDir, "/tmp/cloud-data/raft");
    assert.equal(config.logging.level, "DEBUG");
    assert.equal(config.logging.format, "JSON");
    assert.equal(config.database.uri, "mongodb://db:27017/cloud");
  });

  it("ignores empty variables and names the variable on a bad integer", () => {
    assert.equal(parseControllerConfig({}, { env: { CLOUD_HTTP_PORT: "" } }).http.port, 8080);
    expectConfigError(() => parseControllerConfig({}, { env: { CLOUD_HTTP_PORT: "80a" } }), /CLOUD_HTTP_PORT must be an integer/, "http.port");
    expectConfigError(() => parseControllerConfig({}, { env: { CLOUD_GRPC_PORT: "99999" } }), /grpc\.port/, "grpc.port");
  });

  it("maps every override to a real schema key", () => {
    const defaults = parseControllerConfig({}) as unknown as Record<string, Record<string, unknown>>;
    for (const { key } of CONFIG_ENV_OVERRIDES) {
      const [section, leaf] = key.split(".");
      assert.ok(section in defaults, key);
      assert.ok(leaf in (ControllerConfigSchema.properties as any)[section].properties, key);
    }
  });
});
