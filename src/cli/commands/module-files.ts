/**
 * The local side of module installs: whether an `install` argument is a local bundle or a registry
 * spec, the signature sidecar beside a bundle, and the multipart upload of both (part `bundle`,
 * part `signature`) to the upload or upgrade route. Decisions: docs/decisions/modules.md ("cloudctl").
 */
import { existsSync, statSync } from "node:fs";
import { basename } from "node:path";
import { CliError } from "../exit-codes.js";
import type { HttpClient } from "../http-client.js";
import type { Output } from "../render.js";
import { uploadParts, type UploadPart } from "../transfer.js";

/** File names a module bundle has: what the controller reads (tar.gz, tar, zip) and the spec's `.jar`. */
export const BUNDLE_EXTENSIONS = [".tgz", ".tar.gz", ".tar", ".zip", ".jar"] as const;

/** True when `name` ends like a bundle file. */
export function hasBundleExtension(name: string): boolean {
  return BUNDLE_EXTENSIONS.some((extension) => name.toLowerCase().endsWith(extension));
}

/**
 * What `module install <argument>` installs: a local bundle when the argument ends like a bundle
 * file or names a path that exists (spec: "any path that exists is a local bundle"), else a registry
 * spec `id` or `id@version`.
 */
export function installSource(argument: string): { kind: "bundle"; path: string } | { kind: "registry"; spec: string } {
  if (existsSync(argument) || hasBundleExtension(argument) || argument.includes("/")) return { kind: "bundle", path: argument };
  return { kind: "registry", spec: argument };
}

/** The sidecars looked for beside a bundle, in the spec's order: a cosign bundle, then a detached `.sig`. */
export function sidecarCandidates(bundlePath: string): { cosign: string; sig: string } {
  return { cosign: `${bundlePath}.cosign.bundle`, sig: `${bundlePath}.sig` };
}

/**
 * The signature sidecar to send with `bundlePath`: `--signature`, else `<bundle>.sig` when it exists.
 * A `<bundle>.cosign.bundle` is named in a note and not sent: controllers verify Ed25519 sidecars
 * only, and sending one would refuse the install.
 */
export function signatureFor(bundlePath: string, given: string | undefined, out: Output): string | null {
  if (given !== undefined) {
    if (!existsSync(given) || !statSync(given).isFile()) throw new CliError(`--signature ${given} is not a file`);
    return given;
  }
  const { cosign, sig } = sidecarCandidates(bundlePath);
  if (existsSync(cosign)) out.note(`${basename(cosign)}: cosign bundles are not verified by the controller; looking for ${basename(sig)}`);
  if (existsSync(sig)) return sig;
  out.note(`no signature sidecar (${basename(sig)}): sending the bundle unsigned`);
  return null;
}

/** Checks that `path` is a bundle file cloudctl can send. */
export function checkBundleFile(path: string): void {
  if (!existsSync(path)) throw new CliError(`${path} does not exist`);
  const info = statSync(path);
  if (info.isDirectory()) throw new CliError(`${path} is a directory: build the module into a bundle (.tgz) first`);
  if (!info.isFile()) throw new CliError(`${path} is not a regular file`);
  if (!hasBundleExtension(path)) throw new CliError(`${path}: a module bundle is a ${BUNDLE_EXTENSIONS.join(", ")} file`);
}

/** POSTs the bundle (and its sidecar) as multipart to `path`; the controller's raw answer. */
export async function sendBundle(client: HttpClient, path: string, bundlePath: string, signaturePath: string | null): Promise<string> {
  const parts: UploadPart[] = [{ localPath: bundlePath, name: basename(bundlePath), sizeBytes: statSync(bundlePath).size, field: "bundle" }];
  if (signaturePath) parts.push({ localPath: signaturePath, name: basename(signaturePath), sizeBytes: statSync(signaturePath).size, field: "signature" });
  return uploadParts(client, path, {}, "bundle", parts);
}
