/**
 * The cloudctl configuration file `~/.cloudctl/config.yml`: named contexts (controller URL and
 * token), the current context and the accent colour. The directory is kept at mode 0700 and the
 * file at 0600 because tokens are stored in plain text. A legacy flat file (top-level `controller`
 * and `token`) is migrated on read to a context named `default`.
 */
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { homedir } from "node:os";
import { join } from "node:path";
import { CliError } from "./exit-codes.js";

/** Accent colours the CLI can render headings in. */
export const accents = ["purple", "cyan", "green", "amber"] as const;
/** One of {@link accents}. */
export type Accent = (typeof accents)[number];

/** One named target: a controller URL and optionally the token signed in to it. */
export interface ContextEntry {
  controller: string;
  token?: string;
}

/** The parsed configuration file. */
export interface CliConfig {
  currentContext?: string;
  contexts: Record<string, ContextEntry>;
  accent: Accent;
}

/** Name of the context a legacy flat file migrates to. */
export const legacyContextName = "default";

const directoryMode = 0o700;
const fileMode = 0o600;

/** Directory holding the configuration file; derived from the home directory at call time. */
export function configDirectory(): string {
  return join(homedir(), ".cloudctl");
}

/** Full path of the configuration file. */
export function configPath(): string {
  return join(configDirectory(), "config.yml");
}

function emptyConfig(): CliConfig {
  return { contexts: {}, accent: "purple" };
}

function asString(value: unknown): string | undefined {
  return typeof value === "string" && value !== "" ? value : undefined;
}

/**
 * Turns the raw YAML document into a {@link CliConfig}. Unknown keys are dropped; a legacy flat
 * document becomes a `default` context (which is also made current when none is set).
 */
export function normalizeConfig(raw: unknown): { config: CliConfig; migrated: boolean } {
  const config = emptyConfig();
  if (raw === null || raw === undefined) return { config, migrated: false };
  if (typeof raw !== "object" || Array.isArray(raw)) throw new CliError(`${configPath()}: expected a mapping at the top level`);
  const doc = raw as Record<string, unknown>;
  const accent = asString(doc.accent);
  if (accent && (accents as readonly string[]).includes(accent)) config.accent = accent as Accent;
  const contexts = doc.contexts;
  if (contexts && typeof contexts === "object" && !Array.isArray(contexts)) {
    const entries: [string, ContextEntry][] = [];
    for (const [name, value] of Object.entries(contexts as Record<string, unknown>)) {
      if (!value || typeof value !== "object" || name === "__proto__") continue;
      const entry = value as Record<string, unknown>;
      const controller = asString(entry.controller) ?? "";
      const token = asString(entry.token);
      entries.push([name, token ? { controller, token } : { controller }]);
    }
    config.contexts = Object.fromEntries(entries);
  }
  config.currentContext = asString(doc.currentContext);
  let migrated = false;
  const legacyController = asString(doc.controller);
  const legacyToken = asString(doc.token);
  if ((legacyController || legacyToken) && !config.contexts[legacyContextName]) {
    config.contexts[legacyContextName] = legacyToken ? { controller: legacyController ?? "", token: legacyToken } : { controller: legacyController ?? "" };
    config.currentContext ??= legacyContextName;
    migrated = true;
  }
  if (config.currentContext && !config.contexts[config.currentContext]) config.currentContext = undefined;
  return { config, migrated };
}

const quotedScalar = /^"(?:[^"\\]|\\.)*"$/;

function quote(value: string): string {
  return JSON.stringify(value);
}

function unquote(raw: string): string | undefined {
  const text = raw.trim();
  if (!quotedScalar.test(text)) return undefined;
  try {
    return JSON.parse(text) as string;
  } catch {
    // Not a valid double-quoted scalar: the caller reads the raw text instead.
    return undefined;
  }
}

/**
 * Renders the configuration as YAML in one fixed shape: every scalar double-quoted (a JSON string
 * is a valid YAML double-quoted scalar), contexts as a two-level mapping.
 */
export function stringifyConfig(config: CliConfig): string {
  const lines = ["# cloudctl configuration (contains access tokens; keep mode 0600)"];
  if (config.currentContext) lines.push(`currentContext: ${quote(config.currentContext)}`);
  lines.push(`accent: ${quote(config.accent)}`);
  const entries = Object.entries(config.contexts);
  if (entries.length === 0) lines.push("contexts: {}");
  else lines.push("contexts:");
  for (const [name, entry] of entries) {
    lines.push(`  ${quote(name)}:`, `    controller: ${quote(entry.controller)}`);
    if (entry.token) lines.push(`    token: ${quote(entry.token)}`);
  }
  return `${lines.join("\n")}\n`;
}

/**
 * Parses exactly the shape {@link stringifyConfig} writes, or returns undefined for anything else
 * (hand-edited or legacy files), which then goes through the full YAML parser. Loading the YAML
 * library costs more than the rest of the CLI, and nearly every invocation reads this file.
 */
export function parseOwnFormat(text: string): Record<string, unknown> | undefined {
  const doc: Record<string, unknown> = {};
  const contexts: [string, [string, string][]][] = [];
  let inContexts = false;
  for (const line of text.split(/\r?\n/)) {
    if (line.trim() === "" || line.startsWith("#")) continue;
    let match: RegExpExecArray | null;
    if (line === "contexts:" || line === "contexts: {}") {
      inContexts = line === "contexts:";
      doc.contexts = {};
    } else if ((match = /^(currentContext|accent): (.+)$/.exec(line))) {
      const value = unquote(match[2]);
      if (value === undefined) return undefined;
      doc[match[1]] = value;
      inContexts = false;
    } else if (inContexts && (match = /^ {2}("(?:[^"\\]|\\.)*"):$/.exec(line))) {
      const name = unquote(match[1]);
      if (name === undefined) return undefined;
      contexts.push([name, []]);
    } else if (inContexts && contexts.length > 0 && (match = /^ {4}(controller|token): (.+)$/.exec(line))) {
      const value = unquote(match[2]);
      if (value === undefined) return undefined;
      contexts[contexts.length - 1][1].push([match[1], value]);
    } else {
      return undefined;
    }
  }
  // fromEntries defines own properties, so a context named like an Object.prototype key is safe.
  if (contexts.length > 0) doc.contexts = Object.fromEntries(contexts.map(([name, fields]) => [name, Object.fromEntries(fields)]));
  return doc;
}

/** Parses the configuration text: the own format directly, anything else with the YAML library. */
export function parseConfigText(text: string): unknown {
  const own = parseOwnFormat(text);
  if (own) return own;
  const yaml = createRequire(import.meta.url)("yaml") as typeof import("yaml");
  return yaml.parse(text);
}

/** Reads the configuration file; a missing file is an empty configuration. A legacy file is rewritten in the new form. */
export function loadConfig(): CliConfig {
  const path = configPath();
  if (!existsSync(path)) return emptyConfig();
  let raw: unknown;
  try {
    raw = parseConfigText(readFileSync(path, "utf8"));
  } catch (error) {
    throw new CliError(`${path}: cannot parse: ${(error as Error).message}`);
  }
  const { config, migrated } = normalizeConfig(raw);
  if (migrated) saveConfig(config);
  return config;
}

/** Writes the configuration atomically (temp file + rename) with mode 0600 in a 0700 directory. */
export function saveConfig(config: CliConfig): void {
  const dir = configDirectory();
  mkdirSync(dir, { recursive: true, mode: directoryMode });
  chmodSync(dir, directoryMode);
  const path = configPath();
  const temp = `${path}.${process.pid}.tmp`;
  writeFileSync(temp, stringifyConfig(config), { mode: fileMode });
  chmodSync(temp, fileMode);
  renameSync(temp, path);
}

/** Where a resolved value came from; shown by `status` and `context current`. */
export type Source = "flag" | "env" | "context" | "none";

/** Controller, token and context name after applying flag > environment > context precedence. */
export interface Resolved {
  contextName?: string;
  contextSource: Source;
  /** False when the context named by flag or environment is not in the file. */
  contextExists: boolean;
  controller?: string;
  controllerSource: Source;
  token?: string;
  tokenSource: Source;
}

/** The global flags that take part in resolution. */
export interface ResolutionFlags {
  controller?: string;
  token?: string;
  context?: string;
}

/**
 * Resolves each of context, controller and token independently: context = --context, then
 * CLOUD_CONTEXT, then currentContext; controller = --controller, then CLOUD_CONTROLLER, then the
 * context; token = --token, then CLOUD_TOKEN, then the context. A context named by flag or
 * environment that does not exist is reported through `contextExists` (setup and login create it).
 */
export function resolveTarget(config: CliConfig, flags: ResolutionFlags, env: NodeJS.ProcessEnv): Resolved {
  let contextName: string | undefined;
  let contextSource: Source = "none";
  if (flags.context) [contextName, contextSource] = [flags.context, "flag"];
  else if (env.CLOUD_CONTEXT) [contextName, contextSource] = [env.CLOUD_CONTEXT, "env"];
  else if (config.currentContext) [contextName, contextSource] = [config.currentContext, "context"];
  const entry = contextName ? config.contexts[contextName] : undefined;

  let controller: string | undefined;
  let controllerSource: Source = "none";
  if (flags.controller) [controller, controllerSource] = [flags.controller, "flag"];
  else if (env.CLOUD_CONTROLLER) [controller, controllerSource] = [env.CLOUD_CONTROLLER, "env"];
  else if (entry?.controller) [controller, controllerSource] = [entry.controller, "context"];

  let token: string | undefined;
  let tokenSource: Source = "none";
  if (flags.token) [token, tokenSource] = [flags.token, "flag"];
  else if (env.CLOUD_TOKEN) [token, tokenSource] = [env.CLOUD_TOKEN, "env"];
  else if (entry?.token) [token, tokenSource] = [entry.token, "context"];

  return { contextName, contextSource, contextExists: !contextName || entry !== undefined, controller, controllerSource, token, tokenSource };
}

/** Checks a context name given by the operator: non-blank, at most 64 characters, not `__proto__`. */
export function checkContextName(name: string): string {
  const trimmed = name.trim();
  if (trimmed === "" || trimmed.length > 64 || trimmed === "__proto__") throw new CliError(`invalid context name: "${name}"`);
  return trimmed;
}

/** Validates and normalizes a controller URL (http or https, no trailing slash). */
export function normalizeControllerUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new CliError(`invalid controller URL: ${value} (expected e.g. http://127.0.0.1:8080)`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new CliError(`invalid controller URL: ${value} (use http:// or https://)`);
  return url.toString().replace(/\/+$/, "");
}
