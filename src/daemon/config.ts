/**
 * daemon.yml: the node daemon's configuration (schema with typebox, loading, defaults). Located by
 * an explicit path, `--config <file>`, `CLOUD_DAEMON_CONFIG`, or `./daemon.yml`. Relative
 * directories resolve against the file's directory. See daemon.example.yml.
 */
import { readFileSync } from "node:fs";
import { totalmem } from "node:os";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { Type, type Static } from "@sinclair/typebox";
import { Value } from "@sinclair/typebox/value";
import { parse as parseYaml } from "yaml";

/** The daemon.yml schema. */
export const DaemonConfigSchema = Type.Object(
  {
    /** Every controller's gRPC address (`host:port`); the daemon rotates through them. */
    controllers: Type.Array(Type.String({ minLength: 1 }), { minItems: 1 }),
    /** Single-use node join token; needed only until the node has joined (see `dataDir`). */
    token: Type.Optional(Type.String()),
    /** Wanted node id; by default the controller assigns one (or uses the token's bound id). */
    nodeId: Type.Optional(Type.String({ pattern: "^[a-z0-9][a-z0-9.-]{0,62}$" })),
    /** Host name reported to the controller; the machine's by default. */
    hostname: Type.Optional(Type.String({ minLength: 1 })),
    /** Instance working directories live here. */
    workDir: Type.String({ default: "work" }),
    /** Node identity (node id, key, certificate, CA) after joining, and the template cache; keep it across restarts. */
    dataDir: Type.String({ default: "data" }),
    /** Template files cached under `dataDir/template-cache`, at most this many MiB after an unpack (least recently used go first). */
    templateCacheSizeMbMax: Type.Integer({ minimum: 1, default: 10_240 }),
    /** Memory the daemon may hand to instances; the host's total memory by default. */
    maxMemoryMb: Type.Optional(Type.Integer({ minimum: 1 })),
    /** How often the daemon reports node status (cpu, memory). */
    statusIntervalMs: Type.Integer({ minimum: 100, default: 10_000 }),
    /** Reconnect back-off: first delay and cap (exponential with jitter in between). */
    reconnectDelayMinMs: Type.Integer({ minimum: 1, default: 500 }),
    reconnectDelayMaxMs: Type.Integer({ minimum: 1, default: 30_000 }),
    /**
     * The loopback HTTP relay every instance on the node calls the plugin API through
     * (`CLOUD_CONTROLLER_URL`); it forwards to the controller of the daemon's current session.
     */
    pluginRelay: Type.Object(
      {
        /** Port on 127.0.0.1; 0 picks a free one at each start. */
        port: Type.Integer({ minimum: 0, maximum: 65_535, default: 0 }),
        /** How long a request waits for a reachable controller before it is answered 503. */
        waitMs: Type.Integer({ minimum: 0, maximum: 600_000, default: 10_000 }),
        /** Requests waiting for a controller at once; beyond, 503 at once. */
        waitingRequestsMax: Type.Integer({ minimum: 0, maximum: 100_000, default: 1_000 }),
        /** Request bodies up to this size are kept so that they can be sent to the next controller. */
        replayBodyBytesMax: Type.Integer({ minimum: 0, maximum: 16 * 1024 * 1024, default: 1024 * 1024 }),
        /** Connections open at once; one more is answered 503 RELAY_BUSY and closed. */
        connectionsMax: Type.Integer({ minimum: 1, maximum: 65_536, default: 2_048 }),
        /** Bytes of request bodies held for all requests together; a waiting request beyond it is answered 503 RELAY_BUSY. */
        bufferedBytesMax: Type.Integer({ minimum: 0, maximum: 1024 * 1024 * 1024, default: 64 * 1024 * 1024 }),
        /**
         * How the relay ties a call to the instance that made it: `process` looks the connection up in
         * /proc (a call is relayed only from a process of the token's instance), `off` trusts every
         * local process, `auto` is `process` where /proc allows it and `off` (with a warning) elsewhere.
         */
        callerCheck: Type.Union([Type.Literal("auto"), Type.Literal("process"), Type.Literal("off")], { default: "auto" }),
      },
      { default: {}, additionalProperties: false },
    ),
    /** The controller's logging keys: the daemon's lines read like the controller's (HUMAN or JSON layout). */
    logging: Type.Object({ level: Type.String({ default: "INFO" }), format: Type.String({ default: "HUMAN" }) }, { default: {}, additionalProperties: false }),
    /**
     * Tracing (spec document 2, "Tracing"): spans of the commands the daemon handles, continuing the
     * controller's trace, pushed by OTLP over HTTP. Give it the controllers' `samplerRatio`.
     */
    telemetry: Type.Object(
      {
        enabled: Type.Boolean({ default: false }),
        /** OTLP/HTTP base URL; spans go to `<otlpEndpoint>/v1/traces`. */
        otlpEndpoint: Type.String({ default: "" }),
        /** Head sampler ratio of root spans in [0, 1]; commands sent under a trace follow its decision. */
        samplerRatio: Type.Number({ minimum: 0, maximum: 1, default: 1 }),
      },
      { default: {}, additionalProperties: false },
    ),
  },
  { additionalProperties: false },
);

/** A loaded daemon.yml with defaults applied and directories absolute. */
export type DaemonConfig = Static<typeof DaemonConfigSchema> & { maxMemoryMb: number };

/** A daemon.yml problem that blocks startup. */
export class DaemonConfigError extends Error {
  readonly code = "CONFIG_ERROR";
  constructor(message: string) {
    super(message);
    this.name = "DaemonConfigError";
  }
}

/** Environment variable naming the config file. */
export const DAEMON_CONFIG_ENV = "CLOUD_DAEMON_CONFIG";

/** Where daemon.yml is: `--config <file>`, then {@link DAEMON_CONFIG_ENV}, then `./daemon.yml`. */
export function locateDaemonConfig(argv: readonly string[], env: Readonly<Record<string, string | undefined>>): string {
  const index = argv.indexOf("--config");
  if (index >= 0) {
    const path = argv[index + 1];
    if (!path) throw new DaemonConfigError("--config needs a file path");
    return resolve(path);
  }
  const inline = argv.find((a) => a.startsWith("--config="));
  if (inline) return resolve(inline.slice("--config=".length));
  if (env[DAEMON_CONFIG_ENV]) return resolve(env[DAEMON_CONFIG_ENV]);
  return resolve("daemon.yml");
}

/** Validates raw daemon.yml contents; relative directories resolve against `baseDir`. */
export function parseDaemonConfig(raw: unknown, baseDir: string, source = "daemon.yml"): DaemonConfig {
  const value = Value.Default(DaemonConfigSchema, structuredClone(raw ?? {}));
  const errors = [...Value.Errors(DaemonConfigSchema, value)];
  if (errors.length > 0) {
    const first = errors[0]!;
    const key = first.path.replace(/^\//, "").replaceAll("/", ".") || "(root)";
    throw new DaemonConfigError(`${source}: ${key}: ${first.message}`);
  }
  const config = value as Static<typeof DaemonConfigSchema>;
  if (config.reconnectDelayMaxMs < config.reconnectDelayMinMs) {
    throw new DaemonConfigError(`${source}: reconnectDelayMaxMs must be at least reconnectDelayMinMs`);
  }
  const absolute = (dir: string) => (isAbsolute(dir) ? dir : join(baseDir, dir));
  return {
    ...config,
    workDir: absolute(config.workDir),
    dataDir: absolute(config.dataDir),
    maxMemoryMb: config.maxMemoryMb ?? Math.floor(totalmem() / (1024 * 1024)),
  };
}

/** Reads and validates daemon.yml at `path`. */
export function loadDaemonConfig(path: string): DaemonConfig {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    throw new DaemonConfigError(`Cannot read ${path}: ${(err as Error).message}`);
  }
  let raw: unknown;
  try {
    raw = parseYaml(text);
  } catch (err) {
    throw new DaemonConfigError(`${path}: invalid YAML: ${(err as Error).message}`);
  }
  return parseDaemonConfig(raw, dirname(path), path);
}
