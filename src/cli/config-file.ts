/**
 * The cloudctl configuration file `~/.cloudctl/config.yml`: named contexts (controller URL and
 * token), the current context and the accent colour. The directory is kept at mode 0700 and the
 * file at 0600 because tokens are stored in plain text. A legacy flat file (top-level `controller`
 * and `token`) is migrated on read to a context named `default`.
 */
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { parse, stringify } from "yaml";
import { CliError } from "./exit-codes.js";

/** Accent colours the CLI can render headings in. */
export const accents = ["purple", "cyan", "green", "amber"] as const;
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
    for (const [name, value] of Object.entries(contexts as Record<string, unknown>)) {
      if (!value || typeof value !== "object") continue;
      const entry = value as Record<string, unknown>;
      const controller = asString(entry.controller) ?? "";
      const token = asString(entry.token);
      config.contexts[name] = token ? { controller, token } : { controller };
    }
  }
  config.currentContext = asString(doc.currentContext);
  let migrated = false;
  const legacyController = asString(doc.controller);
  const legacyToken = asString(doc.token);
  if ((legacyController || legacyToken) && !config.contexts[legacyContextName]) {
    config.contexts[legacyContextName] = legacyToken
      ? { controller: legacyController ?? "", token: legacyToken }
      : { controller: legacyController ?? "" };
    config.currentContext ??= legacyContextName;
    migrated = true;
  }
  if (config.currentContext && !config.contexts[config.currentContext]) config.currentContext = undefined;
  return { config, migrated };
}

/** Reads the configuration file; a missing file is an empty configuration. A legacy file is rewritten in the new form. */
export function loadConfig(): CliConfig {
  const path = configPath();
  if (!existsSync(path)) return emptyConfig();
  let raw: unknown;
  try {
    raw = parse(readFileSync(path, "utf8"));
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
  const doc: Record<string, unknown> = {};
  if (config.currentContext) doc.currentContext = config.currentContext;
  doc.accent = config.accent;
  doc.contexts = config.contexts;
  const path = configPath();
  const temp = `${path}.${process.pid}.tmp`;
  writeFileSync(temp, stringify(doc), { mode: fileMode });
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
