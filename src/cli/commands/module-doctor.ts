/**
 * `cloudctl module doctor <bundle>`: local checks of a built module bundle, before it goes to a
 * controller (spec document 3: identity, entrypoint presence, capabilities, extension ids, variant
 * artifact presence and digest, the signature sidecar). It reads the bundle in memory and validates
 * the manifest with the controller's own rules (src/modules/manifest). Exit 0 clean, 1 warnings
 * only, 2 errors. Directories are not supported: build the bundle first.
 */
import { createHash, createPublicKey, verify } from "node:crypto";
import { existsSync, readFileSync, statSync } from "node:fs";
import { basename } from "node:path";
import type { Command } from "commander";
import { parseModuleManifest } from "../../modules/manifest/manifest.js";
import { FRONTEND_DESCRIPTOR, FRONTEND_DIRECTORY, MANIFEST_PATH, type ModuleManifest } from "../../modules/manifest/manifest-types.js";
import { markLocalOnly } from "../auth-gate.js";
import { CliError, ExitCode } from "../exit-codes.js";
import { readBundleEntries, type BundleEntry } from "../module-archive.js";
import { collect } from "../options.js";
import type { RuntimeFactory } from "../runtime.js";
import { sidecarCandidates } from "./module-files.js";

/** One finding: `ok` is informative, a warning makes the exit 1, an error 2. */
export interface DoctorFinding {
  check: string;
  level: "ok" | "warning" | "error";
  message: string;
}

const ED25519_SIGNATURE_BYTES = 64;
/** The doctor's exit codes (spec document 3): warnings only 1, any error 2. */
const DOCTOR_EXIT = { warnings: ExitCode.failure, errors: 2 } as const;

/** The names a module file exports, as far as a text scan of ES module source can tell. */
function exportedNames(source: string): Set<string> {
  const names = new Set<string>();
  for (const m of source.matchAll(/export\s+(?:async\s+)?(?:class|function\*?|const|let|var)\s+([A-Za-z_$][\w$]*)/g)) names.add(m[1]);
  for (const m of source.matchAll(/export\s*\{([^}]*)\}/g))
    for (const part of m[1].split(",")) {
      const name = part
        .trim()
        .split(/\s+as\s+/)
        .pop()
        ?.trim();
      if (name) names.add(name);
    }
  if (/export\s+default\b/.test(source)) names.add("default");
  return names;
}

function signatureBytes(data: Buffer): Buffer | null {
  if (data.byteLength === ED25519_SIGNATURE_BYTES) return data;
  const text = data.toString("utf8").trim();
  if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(text)) return null;
  const decoded = Buffer.from(text.replace(/-/g, "+").replace(/_/g, "/"), "base64");
  return decoded.byteLength === ED25519_SIGNATURE_BYTES ? decoded : null;
}

function checkEntrypoints(manifest: ModuleManifest, files: Map<string, Buffer>, add: (f: DoctorFinding) => void): void {
  for (const host of ["controller", "daemon"] as const) {
    const backend = manifest.backend[host];
    if (!backend) continue;
    const source = files.get(backend.file);
    if (!source) {
      add({ check: "entrypoint", level: "error", message: `backend.${host}.entrypoint: ${backend.file} is not in the bundle` });
      continue;
    }
    const found = exportedNames(source.toString("utf8")).has(backend.exportName);
    add({
      check: "entrypoint",
      level: found ? "ok" : "warning",
      message: found
        ? `${host}: ${backend.file} exports ${backend.exportName}`
        : `${host}: no export named ${backend.exportName} found in ${backend.file} (the controller checks it when it loads the module)`,
    });
  }
}

function checkCapabilities(manifest: ModuleManifest, add: (f: DoctorFinding) => void): void {
  const { provides, requires } = manifest.capabilities;
  for (const offer of provides) {
    if (offer.deprecatedSince)
      add({
        check: "capabilities",
        level: "warning",
        message: `provides ${offer.id} ${offer.version}: deprecated since ${offer.deprecatedSince}${offer.removedIn ? `, removed in ${offer.removedIn}` : ""}`,
      });
    else add({ check: "capabilities", level: "ok", message: `provides ${offer.id} ${offer.version}` });
  }
  for (const need of requires) add({ check: "capabilities", level: "ok", message: `requires ${need.id} ${need.versionRange}` });
}

function checkExtensions(manifest: ModuleManifest, files: Map<string, Buffer>, add: (f: DoctorFinding) => void): void {
  for (const extension of manifest.extensions) {
    add({ check: "extensions", level: "ok", message: `${extension.id} (${extension.target}, ${extension.variants.length} variant(s))` });
    for (const variant of extension.variants) {
      const where = `${extension.id}/${variant.id}`;
      const artifact = files.get(variant.artifact);
      if (!artifact) {
        add({ check: "variants", level: "error", message: `${where}: artifact ${variant.artifact} is not in the bundle` });
        continue;
      }
      if (variant.sha256 === "AUTO") {
        add({ check: "variants", level: "error", message: `${where}: sha256 is still AUTO: the build replaces it with the artifact's digest` });
        continue;
      }
      const digest = createHash("sha256").update(artifact).digest("hex");
      if (digest !== variant.sha256.toLowerCase())
        add({ check: "variants", level: "error", message: `${where}: ${variant.artifact} has sha256 ${digest}, the manifest says ${variant.sha256}` });
      else add({ check: "variants", level: "ok", message: `${where}: ${variant.artifact} matches its sha256` });
    }
  }
}

function checkFrontend(manifest: ModuleManifest, files: Map<string, Buffer>, add: (f: DoctorFinding) => void): void {
  const shipped = [...files.keys()].some((path) => path.startsWith(FRONTEND_DIRECTORY));
  if (!manifest.frontend) {
    if (shipped) add({ check: "frontend", level: "warning", message: `${FRONTEND_DIRECTORY} is in the bundle but the manifest declares no frontend` });
    return;
  }
  if (!files.has(FRONTEND_DESCRIPTOR)) add({ check: "frontend", level: "error", message: `${FRONTEND_DESCRIPTOR} is not in the bundle` });
  else if (!files.has(`${FRONTEND_DIRECTORY}${manifest.frontend.entry}`))
    add({ check: "frontend", level: "error", message: `frontend.entry: ${FRONTEND_DIRECTORY}${manifest.frontend.entry} is not in the bundle` });
  else add({ check: "frontend", level: "ok", message: `entry ${manifest.frontend.entry}` });
}

/** The signature checks: a sidecar present, of the right form and, given `keys`, made by one of them. */
function checkSignature(bundlePath: string, bundle: Buffer, given: string | undefined, keys: string[], add: (f: DoctorFinding) => void): void {
  const { sig, cosign } = sidecarCandidates(bundlePath);
  const path = given ?? (existsSync(sig) ? sig : undefined);
  if (!path) {
    add({
      check: "signature",
      level: "warning",
      message: existsSync(cosign)
        ? `${basename(cosign)} is a cosign bundle, which controllers do not verify; no ${basename(sig)} sidecar: a controller with modules.signing.required refuses it`
        : `no ${basename(sig)} sidecar: a controller with modules.signing.required refuses the bundle unsigned`,
    });
    return;
  }
  const bytes = signatureBytes(readFileSync(path));
  if (!bytes) {
    add({ check: "signature", level: "error", message: `${basename(path)} is neither a 64-byte Ed25519 signature nor its base64 text` });
    return;
  }
  if (keys.length === 0) {
    add({ check: "signature", level: "ok", message: `${basename(path)} has the form of an Ed25519 signature (pass --key to verify it)` });
    return;
  }
  const digest = createHash("sha256").update(bundle).digest();
  const signer = keys.find((key) => verify(null, digest, createPublicKey(readFileSync(key, "utf8")), bytes));
  add(
    signer
      ? { check: "signature", level: "ok", message: `${basename(path)} verifies with ${basename(signer)}` }
      : { check: "signature", level: "error", message: `${basename(path)} does not verify with ${keys.map((k) => basename(k)).join(", ")}` },
  );
}

/** Every finding for the bundle at `path`. */
export async function diagnoseBundle(path: string, options: { signature?: string; keys: string[] }): Promise<DoctorFinding[]> {
  const findings: DoctorFinding[] = [];
  const add = (finding: DoctorFinding) => void findings.push(finding);
  let entries: BundleEntry[];
  try {
    entries = await readBundleEntries(path);
  } catch (error) {
    return [{ check: "archive", level: "error", message: (error as Error).message }];
  }
  for (const entry of entries) if (entry.problem) add({ check: "archive", level: "error", message: `${JSON.stringify(entry.path)}: ${entry.problem}` });
  const files = new Map(entries.filter((e) => e.kind === "file" && e.data && !e.problem).map((e) => [e.path, e.data!]));
  const text = files.get(MANIFEST_PATH);
  let manifest: ModuleManifest | null = null;
  if (!text) add({ check: "manifest", level: "error", message: `${MANIFEST_PATH} is not in the bundle` });
  else {
    try {
      manifest = parseModuleManifest(text.toString("utf8"));
    } catch (error) {
      add({ check: "manifest", level: "error", message: (error as Error).message });
    }
  }
  if (manifest) {
    add({
      check: "identity",
      level: "ok",
      message: `${manifest.id} ${manifest.version} (manifestVersion ${manifest.manifestVersion}, hosts ${manifest.hosts.join(", ")})`,
    });
    if (!basename(path).startsWith(`${manifest.id}-${manifest.version}.`))
      add({ check: "identity", level: "warning", message: `the file name ${basename(path)} does not say ${manifest.id}-${manifest.version}` });
    checkEntrypoints(manifest, files, add);
    checkCapabilities(manifest, add);
    checkExtensions(manifest, files, add);
    checkFrontend(manifest, files, add);
  }
  checkSignature(path, readFileSync(path), options.signature, options.keys, add);
  return findings;
}

/** Registers `module doctor` under `module`. */
export function registerModuleDoctor(module: Command, runtime: RuntimeFactory): void {
  const doctor = module
    .command("doctor <bundle>")
    .description("check a built module bundle locally (manifest, entrypoints, capabilities, extensions, signature); exit 0 clean, 1 warnings, 2 errors")
    .option("--signature <file>", "the signature sidecar (default: <bundle>.sig when it exists)")
    .option("--key <public.pem>", "verify the signature with this Ed25519 public key (repeatable)", collect, [])
    .action(async (path: string, flags: { signature?: string; key: string[] }, cmd: Command) => {
      const rt = runtime(cmd);
      if (!existsSync(path)) throw new CliError(`${path} does not exist`, DOCTOR_EXIT.errors);
      if (statSync(path).isDirectory()) throw new CliError(`${path} is a directory: doctor checks a built bundle (.tgz, .tar or .zip)`, DOCTOR_EXIT.errors);
      if (flags.signature !== undefined && !existsSync(flags.signature))
        throw new CliError(`--signature ${flags.signature} does not exist`, DOCTOR_EXIT.errors);
      for (const key of flags.key) {
        try {
          if (createPublicKey(readFileSync(key, "utf8")).asymmetricKeyType !== "ed25519") throw new Error("not an Ed25519 key");
        } catch (error) {
          throw new CliError(`--key ${key}: not an Ed25519 public key (${(error as Error).message})`, DOCTOR_EXIT.errors);
        }
      }
      const findings = await diagnoseBundle(path, { signature: flags.signature, keys: flags.key });
      const errors = findings.filter((f) => f.level === "error").length;
      const warnings = findings.filter((f) => f.level === "warning").length;
      if (rt.json) rt.out.jsonValue({ bundle: path, errors, warnings, findings });
      else {
        const mark = { ok: rt.out.colors.green(rt.out.options.ascii ? "ok" : "✔"), warning: rt.out.colors.yellow("!"), error: rt.out.colors.red("✖") };
        for (const f of findings) rt.out.line(`${mark[f.level]} ${f.check}: ${f.message}`);
        rt.out.line(`${errors} error(s), ${warnings} warning(s)`);
      }
      if (errors > 0) throw new CliError(`${basename(path)}: ${errors} error(s), ${warnings} warning(s)`, DOCTOR_EXIT.errors);
      if (warnings > 0) throw new CliError(`${basename(path)}: ${warnings} warning(s)`, DOCTOR_EXIT.warnings);
    });
  markLocalOnly(doctor);
}
