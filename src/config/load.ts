/**
 * Loads controller.yml: locate the file, parse YAML, reject removed and unknown keys, apply
 * environment overrides, fill defaults, apply the documented fallbacks and clamps, type-check, and
 * enforce the production-profile rule. Every failure is a {@link ConfigError} naming the key.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Kind, type TSchema } from "@sinclair/typebox";
import { Value } from "@sinclair/typebox/value";
import { parse as parseYaml } from "yaml";
import { configDefaults, ControllerConfigSchema, REMOVED_CONFIG_KEYS, type ControllerConfig } from "./schema.js";

/** A configuration problem that blocks startup; `key` names the offending dotted key when known. */
export class ConfigError extends Error {
  readonly code = "CONFIG_ERROR";
  constructor(
    message: string,
    readonly key?: string,
  ) {
    super(message);
    this.name = "ConfigError";
  }
}

export interface LoadControllerConfigOptions {
  /** Explicit file path; wins over `--config` and `CLOUD_CONFIG`. */
  path?: string;
  env?: Readonly<Record<string, string | undefined>>;
  /** A command line to find `--config` in; none by default (only a program's main.ts reads process.argv). */
  argv?: readonly string[];
}

/** Accepted values of `logging.level` (case-insensitive); anything else falls back to the default (INFO). */
export const LOG_LEVELS = ["TRACE", "DEBUG", "INFO", "WARN", "ERROR"] as const;
/** Accepted values of `logging.format` (case-insensitive); anything else falls back to the default (HUMAN). */
export const LOG_FORMATS = ["HUMAN", "JSON"] as const;

type EnvKind = "string" | "integer";

/**
 * Environment variables that override keys of controller.yml (they win over the file). An override
 * of `kvstore.uri` counts as setting it explicitly for the production-profile rule.
 */
export const CONFIG_ENV_OVERRIDES: readonly { env: string; key: string; kind: EnvKind }[] = [
  { env: "CLOUD_PROFILE", key: "runtime.profile", kind: "string" },
  { env: "CLOUD_KVSTORE_URI", key: "kvstore.uri", kind: "string" },
  { env: "CLOUD_DATABASE_URI", key: "database.uri", kind: "string" },
  { env: "CLOUD_HTTP_HOST", key: "http.host", kind: "string" },
  { env: "CLOUD_HTTP_PORT", key: "http.port", kind: "integer" },
  { env: "CLOUD_GRPC_PORT", key: "grpc.port", kind: "integer" },
  { env: "CLOUD_DATA_DIR", key: "data.dir", kind: "string" },
  { env: "CLOUD_ADMIN_PASSWORD", key: "auth.adminPassword", kind: "string" },
  { env: "CLOUD_LOG_LEVEL", key: "logging.level", kind: "string" },
  { env: "CLOUD_LOG_FORMAT", key: "logging.format", kind: "string" },
];

type Raw = Record<string, unknown>;

const isPlainObject = (v: unknown): v is Raw => typeof v === "object" && v !== null && !Array.isArray(v);

/** The config path from `--config <path>`, `--config=<path>` or `CLOUD_CONFIG`; undefined when none. */
export function resolveConfigPath(argv: readonly string[], env: Readonly<Record<string, string | undefined>>): string | undefined {
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === "--config") {
      const next = argv[i + 1];
      if (next === undefined || next.startsWith("--")) throw new ConfigError("--config needs a file path");
      return next;
    }
    if (arg.startsWith("--config=")) return arg.slice("--config=".length);
  }
  const fromEnv = env.CLOUD_CONFIG;
  return fromEnv !== undefined && fromEnv !== "" ? fromEnv : undefined;
}

/** Reads and validates the controller configuration. With no file, every key takes its default. */
export function loadControllerConfig(options: LoadControllerConfigOptions = {}): ControllerConfig {
  const env = options.env ?? process.env;
  const argv = options.argv ?? [];
  const path = options.path ?? resolveConfigPath(argv, env);
  let raw: unknown = {};
  if (path !== undefined) {
    let text: string;
    try {
      text = readFileSync(path, "utf8");
    } catch (err) {
      throw new ConfigError(`Cannot read configuration file ${path}: ${(err as Error).message}`);
    }
    raw = parseConfigText(text, path);
  }
  return parseControllerConfig(raw, { env, source: path ?? "defaults" });
}

/** Parses YAML text into a raw mapping; an empty document is an empty mapping. */
export function parseConfigText(text: string, source = "controller.yml"): Raw {
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (err) {
    throw new ConfigError(`Configuration file ${source} is not valid YAML: ${(err as Error).message}`);
  }
  if (doc === null || doc === undefined) return {};
  if (!isPlainObject(doc)) throw new ConfigError(`Configuration file ${source} must contain a mapping of keys`);
  return doc;
}

/**
 * Validates an already-parsed configuration object (the YAML document, or an object built in code)
 * and returns the complete configuration. `env` overrides are applied on top of `raw`.
 */
export function parseControllerConfig(raw: unknown, opts: { env?: Readonly<Record<string, string | undefined>>; source?: string } = {}): ControllerConfig {
  const source = opts.source ?? "configuration";
  if (raw === null || raw === undefined) raw = {};
  if (!isPlainObject(raw)) throw new ConfigError(`${source} must be a mapping of keys`);
  const value = structuredClone(raw);

  rejectRemovedKeys(value, source);
  rejectUnknownKeys(ControllerConfigSchema, value, "");

  const explicitKeys = new Set(presentKeys(value, ""));
  applyEnvOverrides(value, opts.env ?? {}, explicitKeys);

  ensureSections(ControllerConfigSchema, value);
  const filled = Value.Default(ControllerConfigSchema, value) as Raw;
  applyFallbacks(filled);
  if (!explicitKeys.has("raft.dataDir")) {
    const data = filled.data as Raw;
    (filled.raft as Raw).dataDir = typeof data.dir === "string" ? join(data.dir, "raft") : configDefaults.raft.dataDir;
  }

  const first = Value.Errors(ControllerConfigSchema, filled).First();
  if (first) {
    const key = first.path.replace(/^\//, "").replace(/\//g, ".");
    throw new ConfigError(`Configuration key ${key}: ${first.message} (got ${JSON.stringify(first.value)})`, key);
  }
  const config = filled as ControllerConfig;

  if (config.runtime.profile === "production" && !explicitKeys.has("kvstore.uri")) {
    throw new ConfigError(
      "runtime.profile is production but kvstore.uri is not set: production needs a shared key-value store. " +
        "Set kvstore.uri in controller.yml (or CLOUD_KVSTORE_URI), or use runtime.profile: development.",
      "kvstore.uri",
    );
  }
  return config;
}

/** Dotted paths of every key present in `obj` (leaves and sections). */
function presentKeys(obj: Raw, prefix: string): string[] {
  const out: string[] = [];
  for (const [k, v] of Object.entries(obj)) {
    const key = prefix ? `${prefix}.${k}` : k;
    if (v === undefined) continue;
    out.push(key);
    if (isPlainObject(v)) out.push(...presentKeys(v, key));
  }
  return out;
}

function rejectRemovedKeys(obj: Raw, source: string): void {
  const present = new Set(presentKeys(obj, ""));
  for (const key of REMOVED_CONFIG_KEYS) {
    if (present.has(key)) {
      throw new ConfigError(`Configuration key ${key} was removed; delete it from ${source} (see docs/decisions/platform.md)`, key);
    }
  }
}

function objectProperties(schema: TSchema): Record<string, TSchema> | undefined {
  return schema[Kind] === "Object" ? (schema.properties as Record<string, TSchema>) : undefined;
}

function rejectUnknownKeys(schema: TSchema, obj: Raw, prefix: string): void {
  const props = objectProperties(schema);
  if (!props) return;
  for (const [k, v] of Object.entries(obj)) {
    const key = prefix ? `${prefix}.${k}` : k;
    const child = props[k];
    if (!child) throw new ConfigError(`Unknown configuration key ${key}`, key);
    if (isPlainObject(v)) rejectUnknownKeys(child, v, key);
  }
}

function applyEnvOverrides(obj: Raw, env: Readonly<Record<string, string | undefined>>, explicitKeys: Set<string>): void {
  for (const { env: name, key, kind } of CONFIG_ENV_OVERRIDES) {
    const text = env[name];
    if (text === undefined || text === "") continue;
    let value: unknown = text;
    if (kind === "integer") {
      if (!/^-?\d+$/.test(text.trim())) throw new ConfigError(`${name} must be an integer (sets ${key}), got ${JSON.stringify(text)}`, key);
      value = Number(text.trim());
    }
    const [section, leaf] = key.split(".");
    const existing = obj[section];
    if (existing !== undefined && !isPlainObject(existing)) continue; // the type check reports the section
    const target = (existing as Raw | undefined) ?? {};
    target[leaf] = value;
    obj[section] = target;
    explicitKeys.add(key);
  }
}

/** Creates missing (or null) sections so that Value.Default can fill their leaves. */
function ensureSections(schema: TSchema, obj: Raw): void {
  const props = objectProperties(schema);
  if (!props) return;
  for (const [k, child] of Object.entries(props)) {
    if (!objectProperties(child)) continue;
    if (obj[k] === undefined || obj[k] === null) obj[k] = {};
    const section = obj[k];
    if (isPlainObject(section)) ensureSections(child, section);
  }
}

function applyFallbacks(config: Raw): void {
  const logging = config.logging as Raw;
  if (typeof logging.level === "string") {
    const upper = logging.level.trim().toUpperCase();
    logging.level = (LOG_LEVELS as readonly string[]).includes(upper) ? upper : configDefaults.logging.level;
  }
  if (typeof logging.format === "string") {
    const upper = logging.format.trim().toUpperCase();
    logging.format = (LOG_FORMATS as readonly string[]).includes(upper) ? upper : configDefaults.logging.format;
  }
  const metrics = config.metrics as Raw;
  if (typeof metrics.retentionHours === "number" && metrics.retentionHours <= 0) metrics.retentionHours = configDefaults.metrics.retentionHours;
  if (typeof metrics.collectionIntervalSeconds === "number" && metrics.collectionIntervalSeconds <= 0) {
    metrics.collectionIntervalSeconds = configDefaults.metrics.collectionIntervalSeconds;
  }
}
