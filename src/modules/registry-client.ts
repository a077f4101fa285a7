/**
 * Module registries: a registry is a static HTTP index (docs/decisions/modules.md, "Registries"), a
 * JSON document at the URL configured in `modules.registries`:
 *
 *   { "formatVersion": 1,
 *     "modules": [ { "id": "motd", "description": "...", "tags": ["chat"],
 *                    "versions": [ { "version": "1.2.0", "url": "motd-1.2.0.tgz", "sha256": "<64 hex>",
 *                                    "signatureUrl": "motd-1.2.0.tgz.sig" } ] } ] }
 *
 * `url` and `signatureUrl` are resolved against the index's URL; a version without `signatureUrl`
 * is unsigned. Reads are bounded in time and size; a download is streamed to disk and hashed on the
 * way, and a digest other than the index's refuses it.
 */
import { createWriteStream } from "node:fs";
import { once } from "node:events";
import semver from "semver";
import { ContentHasher, type FileContent } from "../templates/file-content.js";
import { BundleRejected } from "./bundle/bundle-error.js";
import { MODULE_BUNDLE_BYTES_MAX, SIGNATURE_BYTES_MAX } from "./bundle/bundle-limits.js";
import { ID_PATTERN, MODULE_VERSION_PATTERN } from "./manifest/manifest-checks.js";

/** Longest wait for one registry request. */
export const REGISTRY_REQUEST_TIMEOUT_MS = 10_000;
/** Largest index accepted. */
export const REGISTRY_INDEX_BYTES_MAX = 4 * 1024 * 1024;

export interface RegistryVersion {
  version: string;
  /** Absolute bundle URL. */
  url: string;
  sha256: string;
  /** Absolute signature URL; null when unsigned. */
  signatureUrl: string | null;
}

export interface RegistryModule {
  id: string;
  description: string;
  tags: string[];
  /** Newest first. */
  versions: RegistryVersion[];
}

export interface RegistryIndex {
  url: string;
  modules: RegistryModule[];
}

/** A registry that could not be read, and why. */
export class RegistryUnavailable extends Error {
  constructor(
    readonly url: string,
    message: string,
  ) {
    super(`registry ${url}: ${message}`);
    this.name = "RegistryUnavailable";
  }
}

const SHA256 = /^[0-9a-f]{64}$/;

function absolute(base: string, relative: unknown, what: string): string {
  if (typeof relative !== "string" || relative.trim() === "") throw new RegistryUnavailable(base, `${what} is missing`);
  const url = new URL(relative, base);
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new RegistryUnavailable(base, `${what} ${url.href} is not http or https`);
  return url.href;
}

/** Validates an index document; entries that break a rule make the whole index unreadable, naming the entry. */
export function parseRegistryIndex(url: string, raw: unknown): RegistryIndex {
  const index = raw as { formatVersion?: unknown; modules?: unknown };
  if (typeof index !== "object" || index === null || index.formatVersion !== 1 || !Array.isArray(index.modules))
    throw new RegistryUnavailable(url, "the index is not a formatVersion 1 document with a modules list");
  const modules = index.modules.map((entry: unknown, i: number): RegistryModule => {
    const m = entry as { id?: unknown; description?: unknown; tags?: unknown; versions?: unknown };
    if (typeof m?.id !== "string" || !ID_PATTERN.test(m.id)) throw new RegistryUnavailable(url, `modules[${i}].id is not a module id`);
    if (!Array.isArray(m.versions) || m.versions.length === 0) throw new RegistryUnavailable(url, `modules[${i}].versions is empty`);
    const versions = m.versions.map((v: unknown, j: number): RegistryVersion => {
      const ver = v as { version?: unknown; url?: unknown; sha256?: unknown; signatureUrl?: unknown };
      if (typeof ver?.version !== "string" || !MODULE_VERSION_PATTERN.test(ver.version))
        throw new RegistryUnavailable(url, `modules[${i}].versions[${j}].version is not a module version`);
      if (typeof ver.sha256 !== "string" || !SHA256.test(ver.sha256.toLowerCase()))
        throw new RegistryUnavailable(url, `modules[${i}].versions[${j}].sha256 is not 64 hex digits`);
      return {
        version: ver.version,
        url: absolute(url, ver.url, `modules[${i}].versions[${j}].url`),
        sha256: ver.sha256.toLowerCase(),
        signatureUrl:
          ver.signatureUrl === undefined || ver.signatureUrl === null ? null : absolute(url, ver.signatureUrl, `modules[${i}].versions[${j}].signatureUrl`),
      };
    });
    versions.sort((a, b) => semver.rcompare(a.version, b.version));
    const tags = Array.isArray(m.tags) ? m.tags.filter((t): t is string => typeof t === "string") : [];
    return { id: m.id, description: typeof m.description === "string" ? m.description : "", tags, versions };
  });
  return { url, modules };
}

async function get(url: string): Promise<Response> {
  let response: Response;
  try {
    response = await fetch(url, { signal: AbortSignal.timeout(REGISTRY_REQUEST_TIMEOUT_MS), redirect: "follow" });
  } catch (error) {
    throw new RegistryUnavailable(url, `cannot be reached (${(error as Error).message})`);
  }
  if (!response.ok) {
    await response.body?.cancel();
    throw new RegistryUnavailable(url, `answered HTTP ${response.status}`);
  }
  return response;
}

/** Reads a response body up to `bytesMax`. */
async function bounded(url: string, response: Response, bytesMax: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of response.body ?? []) {
    total += (chunk as Uint8Array).byteLength;
    if (total > bytesMax) throw new RegistryUnavailable(url, `is larger than ${bytesMax} bytes`);
    chunks.push(Buffer.from(chunk as Uint8Array));
  }
  return Buffer.concat(chunks);
}

/** Fetches and validates the index at `url`. */
export async function fetchRegistryIndex(url: string): Promise<RegistryIndex> {
  const body = await bounded(url, await get(url), REGISTRY_INDEX_BYTES_MAX);
  let raw: unknown;
  try {
    raw = JSON.parse(body.toString("utf8"));
  } catch {
    throw new RegistryUnavailable(url, "the index is not JSON");
  }
  return parseRegistryIndex(url, raw);
}

/** Streams a bundle to `path`, hashing it; refuses a size past the bound and a digest other than `sha256`. */
export async function downloadBundle(version: RegistryVersion, path: string): Promise<FileContent> {
  const response = await get(version.url);
  const declared = Number(response.headers.get("content-length") ?? Number.NaN);
  if (declared > MODULE_BUNDLE_BYTES_MAX) {
    await response.body?.cancel();
    throw new BundleRejected(`registry: ${version.url} is larger than ${MODULE_BUNDLE_BYTES_MAX} bytes`);
  }
  const hasher = new ContentHasher();
  const out = createWriteStream(path, { flags: "wx", mode: 0o600 });
  let total = 0;
  try {
    for await (const chunk of response.body ?? []) {
      const bytes = chunk as Uint8Array;
      total += bytes.byteLength;
      if (total > MODULE_BUNDLE_BYTES_MAX) throw new BundleRejected(`registry: ${version.url} is larger than ${MODULE_BUNDLE_BYTES_MAX} bytes`);
      hasher.update(bytes);
      if (!out.write(bytes)) await once(out, "drain");
    }
  } finally {
    out.end();
    await once(out, "close").catch(() => undefined);
  }
  const content = hasher.finish(path);
  if (content.sha256 !== version.sha256)
    throw new BundleRejected(`registry: the sha256 of ${version.url} is ${content.sha256}, the index says ${version.sha256}; refused`);
  return content;
}

/** Downloads a version's signature sidecar, or null for an unsigned version. */
export async function downloadSignature(version: RegistryVersion): Promise<Buffer | null> {
  if (!version.signatureUrl) return null;
  return bounded(version.signatureUrl, await get(version.signatureUrl), SIGNATURE_BYTES_MAX);
}

/** `id` or `id@version` (`@latest` or none: the newest). */
export function parseModuleSpec(spec: string): { id: string; version: string | null } {
  const at = spec.indexOf("@");
  const id = at < 0 ? spec : spec.slice(0, at);
  const version = at < 0 ? null : spec.slice(at + 1);
  if (!ID_PATTERN.test(id)) throw new BundleRejected(`module: ${JSON.stringify(spec)} is not id or id@version`);
  if (version === null || version === "" || version === "latest") return { id, version: null };
  if (!MODULE_VERSION_PATTERN.test(version)) throw new BundleRejected(`module: ${JSON.stringify(version)} is not a module version`);
  return { id, version };
}
