/**
 * Opens a module bundle: a gzip-compressed tar (`.tgz`, the format pack.ts writes; a
 * plain tar is read too) or a ZIP, unpacked with the templates' archive readers into a spool on disk
 * (links, special files, unsafe paths, bombs and too many entries refused as they are read). Then
 * the bundle's own rules: `META-INF/cloud/module.yaml` present and valid, the backend entrypoint
 * files present, a declared frontend with its `META-INF/frontend/module-frontend.json` and entry,
 * and every extension variant's artifact present with the declared sha256. Nothing of a refused
 * bundle is kept.
 */
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { open, readFile } from "node:fs/promises";
import { ApiError } from "../../shared/errors.js";
import type { ArchiveEntry } from "../../templates/archive-limits.js";
import { ArchiveSpool } from "../../templates/archive-spool.js";
import type { FileContent } from "../../templates/file-content.js";
import { unpackTar } from "../../templates/tar.js";
import { looksLikeZip, unpackZip } from "../../templates/zip.js";
import { parseModuleManifest, MANIFEST_BYTES_MAX } from "../manifest/manifest.js";
import { ManifestError } from "../manifest/manifest-checks.js";
import { FRONTEND_DESCRIPTOR, FRONTEND_DIRECTORY, MANIFEST_PATH, type ModuleManifest } from "../manifest/manifest-types.js";
import { BundleRejected } from "./bundle-error.js";
import { FRONTEND_DESCRIPTOR_BYTES_MAX, MODULE_ARCHIVE_LIMITS } from "./bundle-limits.js";

/** The dashboard bundle of a module. */
export interface FrontendBundle {
  /** Files under `META-INF/frontend/`, relative to it, sorted. */
  files: string[];
  /** sha256 over the sorted paths and digests of those files: what changes when the frontend does. */
  contentHash: string;
  /** `module-frontend.json`, parsed. */
  descriptor: Record<string, unknown>;
}

/** A bundle that passed every check; its files are byte ranges of the spool until {@link dispose}. */
export interface OpenedBundle {
  manifest: ModuleManifest;
  /** sha256 of the bundle file (what a signature covers). */
  sha256: string;
  sizeBytes: number;
  files: ReadonlyMap<string, FileContent>;
  frontend: FrontendBundle | null;
  /** sha256 over every file outside `META-INF/frontend/`: unchanged when only the frontend changed. */
  backendHash: string;
  /** Removes the spool. */
  dispose(): Promise<void>;
}

/** The sha256 and size of a file, streamed. */
export async function digestFile(path: string): Promise<{ sha256: string; sizeBytes: number }> {
  const hash = createHash("sha256");
  let sizeBytes = 0;
  for await (const chunk of createReadStream(path)) {
    hash.update(chunk as Buffer);
    sizeBytes += (chunk as Buffer).byteLength;
  }
  return { sha256: hash.digest("hex"), sizeBytes };
}

/** Opens and checks the bundle at `path`, spooling under `spoolDirectory`; a {@link BundleRejected} says why not. */
export async function openModuleBundle(path: string, spoolDirectory: string): Promise<OpenedBundle> {
  const { sha256, sizeBytes } = await digestFile(path);
  const spool = await ArchiveSpool.create(spoolDirectory);
  try {
    const head = Buffer.alloc(4);
    const handle = await open(path, "r");
    try {
      await handle.read(head, 0, 4, 0);
    } finally {
      await handle.close();
    }
    let entries: ArchiveEntry[];
    try {
      entries = looksLikeZip(head)
        ? await unpackZip({ path }, MODULE_ARCHIVE_LIMITS, spool)
        : await unpackTar(createReadStream(path), MODULE_ARCHIVE_LIMITS, spool);
    } catch (error) {
      if (error instanceof ApiError) throw new BundleRejected(`bundle: ${error.message.replace(/^archive: /, "")}`);
      throw error;
    }
    const files = new Map<string, FileContent>();
    for (const entry of entries) if (entry.kind === "file") files.set(entry.path, entry.content);
    const manifest = await readManifest(files);
    checkBackend(manifest, files);
    const frontend = manifest.frontend ? await readFrontend(manifest.frontend.entry, files) : null;
    checkArtifacts(manifest, files);
    return {
      manifest,
      sha256,
      sizeBytes,
      files,
      frontend,
      backendHash: treeHash(files, (p) => !p.startsWith(FRONTEND_DIRECTORY)),
      dispose: () => spool.dispose(),
    };
  } catch (error) {
    await spool.dispose();
    throw error;
  }
}

/** The bytes of a spooled file (small files only: the manifest, the descriptor). */
export async function readSpooled(content: FileContent): Promise<Buffer> {
  const parts: Buffer[] = [];
  for (const source of content.sources.values()) {
    if ("data" in source) parts.push(Buffer.from(source.data));
    else {
      const handle = await open(source.path, "r");
      try {
        const buffer = Buffer.alloc(source.size);
        let filled = 0;
        while (filled < source.size) {
          const { bytesRead } = await handle.read(buffer, filled, source.size - filled, source.offset + filled);
          if (bytesRead === 0) break;
          filled += bytesRead;
        }
        parts.push(buffer.subarray(0, filled));
      } finally {
        await handle.close();
      }
    }
  }
  return Buffer.concat(parts);
}

async function readManifest(files: ReadonlyMap<string, FileContent>): Promise<ModuleManifest> {
  const content = files.get(MANIFEST_PATH);
  if (!content) throw new BundleRejected(`bundle: ${MANIFEST_PATH} is missing`);
  if (content.size > MANIFEST_BYTES_MAX) throw new BundleRejected(`${MANIFEST_PATH}: larger than ${MANIFEST_BYTES_MAX} bytes`);
  const text = new TextDecoder("utf-8", { fatal: true });
  let yaml: string;
  try {
    yaml = text.decode(await readSpooled(content));
  } catch {
    throw new BundleRejected(`${MANIFEST_PATH}: is not valid UTF-8`);
  }
  try {
    return parseModuleManifest(yaml);
  } catch (error) {
    if (error instanceof ManifestError) throw new BundleRejected(`${MANIFEST_PATH}: ${error.message}`);
    throw error;
  }
}

function checkBackend(manifest: ModuleManifest, files: ReadonlyMap<string, FileContent>): void {
  for (const [host, entry] of Object.entries(manifest.backend)) {
    if (entry && !files.has(entry.file)) throw new BundleRejected(`${MANIFEST_PATH}: backend.${host}.entrypoint: file ${entry.file} is not in the bundle`);
  }
}

async function readFrontend(entry: string, files: ReadonlyMap<string, FileContent>): Promise<FrontendBundle> {
  const descriptorContent = files.get(FRONTEND_DESCRIPTOR);
  if (!descriptorContent) throw new BundleRejected(`bundle: the manifest declares a frontend but ${FRONTEND_DESCRIPTOR} is missing`);
  if (descriptorContent.size > FRONTEND_DESCRIPTOR_BYTES_MAX)
    throw new BundleRejected(`${FRONTEND_DESCRIPTOR}: larger than ${FRONTEND_DESCRIPTOR_BYTES_MAX} bytes`);
  let descriptor: unknown;
  try {
    descriptor = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(await readSpooled(descriptorContent)));
  } catch (error) {
    throw new BundleRejected(`${FRONTEND_DESCRIPTOR}: is not valid JSON (${(error as Error).message})`);
  }
  if (typeof descriptor !== "object" || descriptor === null || Array.isArray(descriptor))
    throw new BundleRejected(`${FRONTEND_DESCRIPTOR}: must be a JSON object`);
  const entryPath = `${FRONTEND_DIRECTORY}${entry.replace(/^\.?\//, "")}`;
  if (!files.has(entryPath)) throw new BundleRejected(`${MANIFEST_PATH}: frontend.entry: file ${entryPath} is not in the bundle`);
  const frontendFiles = [...files.keys()].filter((p) => p.startsWith(FRONTEND_DIRECTORY)).sort();
  return {
    files: frontendFiles.map((p) => p.slice(FRONTEND_DIRECTORY.length)),
    contentHash: treeHash(files, (p) => p.startsWith(FRONTEND_DIRECTORY)),
    descriptor: descriptor as Record<string, unknown>,
  };
}

function checkArtifacts(manifest: ModuleManifest, files: ReadonlyMap<string, FileContent>): void {
  manifest.extensions.forEach((extension, e) => {
    extension.variants.forEach((variant, v) => {
      const field = `extensions[${e}].variants[${v}]`;
      const artifact = files.get(variant.artifact);
      if (!artifact) throw new BundleRejected(`${MANIFEST_PATH}: ${field}.artifact: ${variant.artifact} is not in the bundle`);
      if (artifact.sha256 !== variant.sha256)
        throw new BundleRejected(`${MANIFEST_PATH}: ${field}.sha256: does not match ${variant.artifact} (its sha256 is ${artifact.sha256})`);
    });
  });
}

/** sha256 over the sorted `path\0sha256\n` lines of the files `include` selects. */
function treeHash(files: ReadonlyMap<string, FileContent>, include: (path: string) => boolean): string {
  const hash = createHash("sha256");
  for (const path of [...files.keys()].filter(include).sort()) hash.update(`${path}\0${files.get(path)!.sha256}\n`);
  return hash.digest("hex");
}

/** Reads a whole small file; used for sidecars. */
export async function readSmallFile(path: string, bytesMax: number, what: string): Promise<Buffer> {
  const data = await readFile(path);
  if (data.byteLength > bytesMax) throw new BundleRejected(`${what}: larger than ${bytesMax} bytes`, true);
  return data;
}
