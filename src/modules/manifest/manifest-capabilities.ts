/**
 * `capabilities` of a manifest: `provides[]` (id, version, and on manifest version 2 the
 * semver-shaped deprecatedSince and removedIn, removedIn needing deprecatedSince; no id twice) and
 * `requires[]` (id and a non-empty versionRange that parses as a semver range). That every provided
 * id has a handle is checked when the module loads (it calls `provide` in its load hook).
 */
import semver from "semver";
import { CAPABILITY_VERSION_PATTERN, childPath, fail, Fields, ID_PATTERN, requireVersion2 } from "./manifest-checks.js";
import type { ModuleManifest, ProvidedCapability, RequiredCapability } from "./manifest-types.js";

export function validateCapabilities(raw: unknown, manifestVersion: number): ModuleManifest["capabilities"] {
  if (raw === undefined || raw === null) return { provides: [], requires: [] };
  const capabilities = new Fields("capabilities", raw, ["provides", "requires"]);
  const provides: ProvidedCapability[] = [];
  const ids = new Set<string>();
  (capabilities.list("provides") ?? []).forEach((item, index) => {
    const path = childPath("capabilities.provides", index);
    const fields = new Fields(path, item, ["id", "version", "deprecatedSince", "removedIn"]);
    const id = fields.string("id", { required: true, pattern: ID_PATTERN });
    if (ids.has(id)) fail(fields.at("id"), `duplicate capability id ${JSON.stringify(id)}`);
    ids.add(id);
    const version = fields.string("version", {
      required: true,
      pattern: CAPABILITY_VERSION_PATTERN,
      patternText: "must be three dot-separated integers with an optional hyphen or plus suffix",
    });
    requireVersion2(fields, "deprecatedSince", manifestVersion);
    requireVersion2(fields, "removedIn", manifestVersion);
    const deprecatedSince = semverField(fields, "deprecatedSince");
    const removedIn = semverField(fields, "removedIn");
    if (removedIn !== null && deprecatedSince === null) fail(fields.at("removedIn"), "needs deprecatedSince");
    provides.push({ id, version, deprecatedSince, removedIn });
  });
  const requires: RequiredCapability[] = [];
  (capabilities.list("requires") ?? []).forEach((item, index) => {
    const path = childPath("capabilities.requires", index);
    const fields = new Fields(path, item, ["id", "versionRange"]);
    const id = fields.string("id", { required: true, pattern: ID_PATTERN });
    const versionRange = fields.string("versionRange", { required: true });
    if (semver.validRange(versionRange) === null) fail(fields.at("versionRange"), `must parse as a semver range (got ${JSON.stringify(versionRange)})`);
    requires.push({ id, versionRange });
  });
  return { provides, requires };
}

function semverField(fields: Fields, key: string): string | null {
  const value = fields.string(key, {});
  if (value === undefined) return null;
  if (semver.valid(value) === null) fail(fields.at(key), `must be a semver version such as 1.4.0 (got ${JSON.stringify(value)})`);
  return value;
}
