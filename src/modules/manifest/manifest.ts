/**
 * Parses and validates a module manifest exactly as spec document 3 ("Manifest") states it: unknown
 * fields are refused at every level; the first broken rule is reported as a {@link ManifestError}
 * naming the field path and the rule. The root, hosts, backend, frontend and storage rules are here;
 * capabilities and extensions have files of their own.
 */
import { parse as parseYaml } from "yaml";
import { validateCapabilities } from "./manifest-capabilities.js";
import { childPath, fail, Fields, ID_PATTERN, isPlainObject, ManifestError, MODULE_VERSION_PATTERN, requireVersion2 } from "./manifest-checks.js";
import { validateExtensions } from "./manifest-extensions.js";
import { RESERVED_MODULE_ID, type BackendEntry, type ModuleHost, type ModuleManifest } from "./manifest-types.js";

const ROOT_KEYS = ["manifestVersion", "id", "version", "hosts", "backend", "frontend", "capabilities", "storage", "extensions"] as const;
const SUPPORTED_MANIFEST_VERSIONS = { min: 1, max: 2 } as const;
/** Longest manifest accepted, in bytes: far above any real one. */
export const MANIFEST_BYTES_MAX = 256 * 1024;

/**
 * An entrypoint: an ES module file of the bundle (relative, `.js` or `.mjs`, no `..`) and optionally
 * `#Export`; the Node form of the spec's "fully qualified class name".
 */
const ENTRYPOINT_PATTERN = /^(?![/\\])(?!.*(?:^|\/)\.\.(?:\/|#|$))[A-Za-z0-9_.\-/]+\.m?js(#[A-Za-z_$][A-Za-z0-9_$]*)?$/;
const ENTRYPOINT_RULE = "must name an ES module file of the bundle and its export, as path/to/file.js#Export (relative, .js or .mjs, no ..)";

/** Parses YAML text and validates it; a {@link ManifestError} for YAML that does not parse too. */
export function parseModuleManifest(text: string): ModuleManifest {
  if (Buffer.byteLength(text, "utf8") > MANIFEST_BYTES_MAX) fail("manifest", `is larger than ${MANIFEST_BYTES_MAX} bytes`);
  let raw: unknown;
  try {
    raw = parseYaml(text, { uniqueKeys: true, maxAliasCount: 100 });
  } catch (error) {
    throw new ManifestError("manifest", `is not valid YAML (${(error as Error).message.split("\n")[0].replace(/:$/, "")})`);
  }
  return validateModuleManifest(raw);
}

/** Validates a parsed manifest and fills in its defaults. */
export function validateModuleManifest(raw: unknown): ModuleManifest {
  const root = new Fields("", raw, ROOT_KEYS);
  const manifestVersion = root.integer("manifestVersion") ?? 2;
  if (manifestVersion < SUPPORTED_MANIFEST_VERSIONS.min || manifestVersion > SUPPORTED_MANIFEST_VERSIONS.max)
    fail("manifestVersion", `must be between ${SUPPORTED_MANIFEST_VERSIONS.min} and ${SUPPORTED_MANIFEST_VERSIONS.max} (got ${manifestVersion})`);
  const id = root.string("id", { required: true, pattern: ID_PATTERN });
  if (id === RESERVED_MODULE_ID) fail("id", `"${RESERVED_MODULE_ID}" is reserved`);
  const version = root.string("version", { required: true });
  if (version.includes("+")) fail("version", `must not carry build metadata (got ${JSON.stringify(version)})`);
  if (!MODULE_VERSION_PATTERN.test(version))
    fail("version", `must be three dot-separated integers with an optional hyphen suffix of [a-zA-Z0-9.-] (got ${JSON.stringify(version)})`);
  const hosts = validateHosts(root);
  const backend = validateBackend(root.required("backend"), hosts, manifestVersion);
  const frontend = root.has("frontend") ? validateFrontend(root.value.frontend) : null;
  const storage = validateStorage(root.value.storage);
  const capabilities = validateCapabilities(root.value.capabilities, manifestVersion);
  const extensions = validateExtensions(root.list("extensions") ?? []);
  return { manifestVersion: manifestVersion as 1 | 2, id, version, hosts, backend, frontend, storage, capabilities, extensions };
}

function validateHosts(root: Fields): ModuleHost[] {
  const listed = root.stringList("hosts");
  if (listed === undefined) return ["controller"];
  if (listed.length === 0) fail("hosts", "must not be empty");
  const seen = new Set<ModuleHost>();
  listed.forEach((value, index) => {
    const host = value.toLowerCase();
    if (host !== "controller" && host !== "daemon") fail(childPath("hosts", index), `must be controller or daemon (got ${JSON.stringify(value)})`);
    if (seen.has(host as ModuleHost)) fail(childPath("hosts", index), `duplicate host ${JSON.stringify(value)}`);
    seen.add(host as ModuleHost);
  });
  return [...seen];
}

function validateBackend(raw: unknown, hosts: readonly ModuleHost[], manifestVersion: number): ModuleManifest["backend"] {
  if (!isPlainObject(raw)) fail("backend", "must be an object");
  const rawObject = raw as Record<string, unknown>;
  if ("entrypoint" in rawObject) {
    // The legacy form: shorthand for the controller entrypoint.
    if ("controller" in rawObject || "daemon" in rawObject)
      fail("backend.entrypoint", "the legacy form cannot be mixed with backend.controller or backend.daemon");
    const legacy = new Fields("backend", raw, ["entrypoint"]);
    if (!hosts.includes("controller")) fail("backend.entrypoint", "the legacy form needs hosts to include controller");
    const entrypoint = legacy.string("entrypoint", { required: true, pattern: ENTRYPOINT_PATTERN, patternText: ENTRYPOINT_RULE });
    return { controller: backendEntry(entrypoint, false), daemon: null };
  }
  const backend = new Fields("backend", raw, ["controller", "daemon"]);
  const controller = backend.has("controller") ? validateBackendEntry(backend.at("controller"), backend.value.controller, manifestVersion) : null;
  const daemon = backend.has("daemon") ? validateBackendEntry(backend.at("daemon"), backend.value.daemon, manifestVersion) : null;
  if (!controller && !daemon) fail("backend", "needs backend.controller or backend.daemon");
  if (hosts.includes("controller") && !controller) fail("backend.controller.entrypoint", "is required when hosts includes controller");
  if (hosts.includes("daemon") && !daemon) fail("backend.daemon.entrypoint", "is required when hosts includes daemon");
  return { controller, daemon };
}

function validateBackendEntry(path: string, raw: unknown, manifestVersion: number): BackendEntry {
  const fields = new Fields(path, raw, ["entrypoint", "reloadable"]);
  requireVersion2(fields, "reloadable", manifestVersion);
  const entrypoint = fields.string("entrypoint", { required: true, pattern: ENTRYPOINT_PATTERN, patternText: ENTRYPOINT_RULE });
  return backendEntry(entrypoint, fields.boolean("reloadable", false));
}

function backendEntry(entrypoint: string, reloadable: boolean): BackendEntry {
  const hash = entrypoint.indexOf("#");
  const file = hash < 0 ? entrypoint : entrypoint.slice(0, hash);
  const exportName = hash < 0 ? "default" : entrypoint.slice(hash + 1);
  return { entrypoint, file: file.replace(/^\.\//, ""), exportName, reloadable };
}

function validateFrontend(raw: unknown): NonNullable<ModuleManifest["frontend"]> {
  const frontend = new Fields("frontend", raw, ["sdkVersion", "entry"]);
  const sdkVersion = frontend.integer("sdkVersion");
  if (sdkVersion === undefined) fail("frontend.sdkVersion", "is required");
  if (sdkVersion !== 1) fail("frontend.sdkVersion", `must be 1 (got ${sdkVersion})`);
  const entry = frontend.string("entry", { required: true });
  return { sdkVersion: 1, entry };
}

function validateStorage(raw: unknown): ModuleManifest["storage"] {
  if (raw === undefined || raw === null) return { mongo: false, redis: false, limits: { mongoDocuments: 0, redisKeys: 0 } };
  const storage = new Fields("storage", raw, ["mongo", "redis", "limits"]);
  const mongo = storage.boolean("mongo", false);
  const redis = storage.boolean("redis", false);
  const limits = { mongoDocuments: 0, redisKeys: 0 };
  if (storage.has("limits")) {
    const fields = new Fields("storage.limits", storage.value.limits, ["mongoDocuments", "redisKeys"]);
    for (const [key, flag, flagName] of [
      ["mongoDocuments", mongo, "mongo"],
      ["redisKeys", redis, "redis"],
    ] as const) {
      const limit = fields.integer(key);
      if (limit === undefined) continue;
      if (limit <= 0) fail(fields.at(key), `must be above 0 when set (got ${limit}); leave it out for no limit`);
      if (!flag) fail(fields.at(key), `needs storage.${flagName}: true`);
      limits[key] = limit;
    }
  }
  return { mongo, redis, limits };
}
