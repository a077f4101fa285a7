/**
 * `extensions[]` of a manifest (workload extensions, streamed to daemons and instances by a later
 * release; validated now): id (module id pattern, unique), target `<type>/<family>` with each part
 * matching the id pattern, activation, conflicts, and non-empty variants whose id is unique within
 * the extension, mcVersionRange a semver range (`*` any), runtimeApiVersion at least 1, artifact a
 * relative `.jar` path inside the bundle, sha256 64 hex digits (the build replaces the source's
 * `AUTO`), installPath a relative directory.
 */
import semver from "semver";
import { childPath, fail, Fields, ID_PATTERN } from "./manifest-checks.js";
import type { ExtensionActivation, ExtensionVariant, WorkloadExtension } from "./manifest-types.js";

const ACTIVATIONS: readonly ExtensionActivation[] = ["explicit-group-attach", "default-enabled", "always"];
const TARGET_PART = /^[a-z][a-z0-9-]*$/;
const SHA256 = /^[0-9a-fA-F]{64}$/;

/** A relative path: no leading slash or backslash and no `..` segment. */
function checkRelativePath(fields: Fields, key: string, value: string): void {
  if (value.startsWith("/") || value.startsWith("\\"))
    fail(fields.at(key), `must be relative, without a leading slash or backslash (got ${JSON.stringify(value)})`);
  if (value.split(/[/\\]/).includes("..")) fail(fields.at(key), `must not contain .. (got ${JSON.stringify(value)})`);
}

export function validateExtensions(list: readonly unknown[]): WorkloadExtension[] {
  const ids = new Set<string>();
  return list.map((item, index) => {
    const path = childPath("extensions", index);
    const fields = new Fields(path, item, ["id", "target", "activation", "conflicts", "variants"]);
    const id = fields.string("id", { required: true, pattern: ID_PATTERN });
    if (ids.has(id)) fail(fields.at("id"), `duplicate extension id ${JSON.stringify(id)}`);
    ids.add(id);
    const target = fields.string("target", { required: true });
    const parts = target.split("/");
    if (parts.length !== 2 || !parts.every((part) => TARGET_PART.test(part)))
      fail(fields.at("target"), `must be <workload type>/<runtime family>, each part matching ^[a-z][a-z0-9-]*$ (got ${JSON.stringify(target)})`);
    const activation = fields.string("activation", { required: true });
    if (!ACTIVATIONS.includes(activation as ExtensionActivation))
      fail(fields.at("activation"), `must be one of ${ACTIVATIONS.join(", ")} (got ${JSON.stringify(activation)})`);
    const conflicts = fields.stringList("conflicts") ?? [];
    const variantList = fields.list("variants");
    if (variantList === undefined) fail(fields.at("variants"), "is required");
    if (variantList!.length === 0) fail(fields.at("variants"), "must not be empty");
    const variantIds = new Set<string>();
    const variants = variantList!.map((raw, variantIndex) => validateVariant(childPath(fields.at("variants"), variantIndex), raw, variantIds));
    return { id, target, activation: activation as ExtensionActivation, conflicts, variants };
  });
}

function validateVariant(path: string, raw: unknown, ids: Set<string>): ExtensionVariant {
  const fields = new Fields(path, raw, ["id", "mcVersionRange", "runtimeApiVersion", "artifact", "sha256", "installPath"]);
  const id = fields.string("id", { required: true });
  if (ids.has(id)) fail(fields.at("id"), `duplicate variant id ${JSON.stringify(id)} within the extension`);
  ids.add(id);
  const mcVersionRange = fields.string("mcVersionRange", { required: true });
  if (semver.validRange(mcVersionRange) === null)
    fail(fields.at("mcVersionRange"), `must be a semver range, * for any (got ${JSON.stringify(mcVersionRange)})`);
  const runtimeApiVersion = fields.integer("runtimeApiVersion");
  if (runtimeApiVersion === undefined) fail(fields.at("runtimeApiVersion"), "is required");
  if (runtimeApiVersion! < 1) fail(fields.at("runtimeApiVersion"), `must be at least 1 (got ${runtimeApiVersion})`);
  const artifact = fields.string("artifact", { required: true });
  checkRelativePath(fields, "artifact", artifact);
  if (!artifact.endsWith(".jar")) fail(fields.at("artifact"), `must end in .jar (got ${JSON.stringify(artifact)})`);
  const sha256 = fields.string("sha256", { required: true });
  if (sha256 === "AUTO") fail(fields.at("sha256"), "is still AUTO: the build replaces it with the artifact's digest");
  if (!SHA256.test(sha256)) fail(fields.at("sha256"), `must be 64 hexadecimal characters (got ${JSON.stringify(sha256)})`);
  const installPath = fields.string("installPath", { required: true });
  checkRelativePath(fields, "installPath", installPath);
  return { id, mcVersionRange, runtimeApiVersion: runtimeApiVersion!, artifact, sha256: sha256.toLowerCase(), installPath };
}
