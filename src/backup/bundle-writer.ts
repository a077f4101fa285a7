/**
 * Writes a bundle (layout in bundle-format.ts). The documents are read from one store snapshot, so
 * the bundle is a point-in-time view however groups and instances change meanwhile: each
 * collection goes to a staging file as NDJSON (hashed and counted on the way), the snapshot is
 * released, then the staged parts, the key-value counters and the blobs are packed with the
 * templates' streaming tar.gz writer. Nothing is ever whole in memory but one blob (at most one
 * 4 MiB chunk) and one batch of documents. Only the collections of the allowlist are written
 * (bundle-format.ts); the manifest is followed by the cluster's authentication of it (bundle-auth.ts).
 */
import { createHash } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import { mkdir, open, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import { Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import { assert } from "../shared/errors.js";
import type { BlobStore, DocumentStore, KvStore } from "../store/ports.js";
import { packTarGz, type TarMember } from "../templates/tar.js";
import { authenticationEntry, type BundleKey } from "./bundle-auth.js";
import {
  AUTHENTICATION_ENTRY,
  BLOB_INDEX_ENTRY,
  BUNDLE_DIRECTORIES,
  BUNDLE_FORMAT,
  KV_PARTS,
  MANIFEST_ENTRY,
  REQUIRED_COLLECTIONS,
  blobEntry,
  documentsEntry,
  isBundledCollection,
  kvEntry,
  NEVER_BUNDLED_COLLECTIONS,
  prefixGroupOf,
  type BundleManifest,
} from "./bundle-format.js";

/** Documents read from the snapshot per batch. */
const EXPORT_BATCH_DOCUMENTS = 500;
/** Key-value lines staged before they are written: a module may hold many keys. */
const KV_LINES_PER_WRITE = 1_000;

/** What {@link writeBundle} wrote: the manifest inside, and the bundle file's size and sha256. */
export interface WrittenBundle {
  manifest: BundleManifest;
  sizeBytes: number;
  sha256: string;
  /** Collections of the store outside the allowlist that were left out (a service forgot to list one). */
  leftOut: string[];
}

/** Where the data comes from. */
export interface BundleSources {
  documents: DocumentStore;
  kv: KvStore;
  blobs: BlobStore;
}

/** The manifest fields that describe where and when, not what. */
export type BundleOrigin = Pick<BundleManifest, "id" | "createdAt" | "controller" | "profile" | "documentStore">;

interface StagedPart {
  path: string;
  sizeBytes: number;
  sha256: string;
  lines: number;
}

/** Writes lines to a file while hashing and counting them. */
class StagingFile {
  private readonly hash = createHash("sha256");
  private bytes = 0;
  private lines = 0;

  private constructor(
    readonly path: string,
    private readonly handle: Awaited<ReturnType<typeof open>>,
  ) {}

  static async create(path: string): Promise<StagingFile> {
    return new StagingFile(path, await open(path, "wx"));
  }

  async writeLines(lines: readonly string[]): Promise<void> {
    if (lines.length === 0) return;
    const data = Buffer.from(lines.join("\n") + "\n", "utf8");
    this.hash.update(data);
    this.bytes += data.byteLength;
    this.lines += lines.length;
    for (let at = 0; at < data.byteLength;) at += (await this.handle.write(data, at)).bytesWritten;
  }

  async finish(): Promise<StagedPart> {
    await this.handle.close();
    return { path: this.path, sizeBytes: this.bytes, sha256: this.hash.digest("hex"), lines: this.lines };
  }
}

/**
 * Writes the bundle of `sources` to `outPath` (a new file, fsynced), staging in `stagingDir` (removed
 * afterwards), authenticated with `key`. Returns the manifest written into it.
 */
export async function writeBundle(sources: BundleSources, origin: BundleOrigin, key: BundleKey, outPath: string, stagingDir: string): Promise<WrittenBundle> {
  await mkdir(stagingDir, { recursive: true });
  try {
    const collections: BundleManifest["collections"] = [];
    const staged = new Map<string, StagedPart>();
    const leftOut: string[] = [];
    const snapshot = await sources.documents.snapshot();
    try {
      const held = await snapshot.collections();
      leftOut.push(...held.filter((name) => !isBundledCollection(name) && !NEVER_BUNDLED_COLLECTIONS.has(name)).sort());
      const names = new Set([...held, ...REQUIRED_COLLECTIONS].filter(isBundledCollection));
      for (const name of [...names].sort()) {
        const file = await StagingFile.create(join(stagingDir, `documents-${name}.ndjson`));
        try {
          for await (const batch of snapshot.documents(name, EXPORT_BATCH_DOCUMENTS)) await file.writeLines(batch.map((doc) => JSON.stringify(doc)));
        } finally {
          const part = await file.finish();
          staged.set(documentsEntry(name), part);
          collections.push({ name, documentCount: part.lines, file: documentsEntry(name), sizeBytes: part.sizeBytes, sha256: part.sha256 });
        }
      }
    } finally {
      await snapshot.release();
    }

    const kv: BundleManifest["kv"] = [];
    for (const { part, prefix, restore } of KV_PARTS) {
      const file = await StagingFile.create(join(stagingDir, `kv-${part}.ndjson`));
      let lines: string[] = [];
      for (const key of (await sources.kv.keys(prefix)).sort()) {
        const value = await sources.kv.get(key);
        if (value === null) continue;
        // Data keeps the time it had left; a counter has none.
        const ttlMs = restore === "replace" ? await sources.kv.ttlMs(key) : null;
        lines.push(JSON.stringify(ttlMs === null ? { key, value } : { key, value, ttlMs }));
        if (lines.length >= KV_LINES_PER_WRITE) {
          await file.writeLines(lines);
          lines = [];
        }
      }
      await file.writeLines(lines);
      const staging = await file.finish();
      staged.set(kvEntry(part), staging);
      kv.push({ part, prefix, keyCount: staging.lines, file: kvEntry(part), sizeBytes: staging.sizeBytes, sha256: staging.sha256 });
    }

    const hashes = await sources.blobs.list();
    const indexFile = await StagingFile.create(join(stagingDir, "blob-index.txt"));
    await indexFile.writeLines(hashes);
    const index = await indexFile.finish();
    staged.set(BLOB_INDEX_ENTRY, index);

    const groups = new Map<string, number>();
    for (const { name } of collections) groups.set(prefixGroupOf(name), (groups.get(prefixGroupOf(name)) ?? 0) + 1);
    let blobBytes = 0;
    const manifest = (): BundleManifest => ({
      format: BUNDLE_FORMAT,
      ...origin,
      clusterId: key.clusterId,
      mongoDocumentCount: collections.reduce((sum, c) => sum + c.documentCount, 0),
      collections,
      collectionPrefixGroups: [...groups.entries()].sort().map(([prefix, collectionCount]) => ({ prefix, collectionCount })),
      kv,
      blobs: { count: hashes.length, totalBytes: blobBytes, index: { file: BLOB_INDEX_ENTRY, sizeBytes: index.sizeBytes, sha256: index.sha256 } },
    });

    async function* members(): AsyncGenerator<TarMember> {
      const stagedMember = (entry: string): TarMember => {
        const part = staged.get(entry);
        assert(part, `staged part ${entry}`);
        return { path: entry, kind: "file", mode: 0o644, size: part.sizeBytes, data: () => createReadStream(part.path) };
      };
      yield { path: BUNDLE_DIRECTORIES[0], kind: "dir", mode: 0o755 };
      for (const { file } of collections) yield stagedMember(file);
      yield { path: BUNDLE_DIRECTORIES[1], kind: "dir", mode: 0o755 };
      for (const { file } of kv) yield stagedMember(file);
      yield { path: BUNDLE_DIRECTORIES[2], kind: "dir", mode: 0o755 };
      yield stagedMember(BLOB_INDEX_ENTRY);
      for (const hash of hashes) {
        const data = await sources.blobs.get(hash);
        // Content-addressed blobs are never rewritten; one that vanished was collected meanwhile.
        if (!data) throw new Error(`blob ${hash} disappeared while the backup was written; try again`);
        blobBytes += data.byteLength;
        yield {
          path: blobEntry(hash),
          kind: "file",
          mode: 0o644,
          size: data.byteLength,
          data: async function* () {
            yield data;
          },
        };
      }
      const text = Buffer.from(JSON.stringify(manifest(), null, 2) + "\n", "utf8");
      const authentication = authenticationEntry(key, text);
      for (const [path, bytes] of [
        [MANIFEST_ENTRY, text],
        [AUTHENTICATION_ENTRY, authentication],
      ] as const) {
        yield {
          path,
          kind: "file",
          mode: 0o644,
          size: bytes.byteLength,
          data: async function* () {
            yield bytes;
          },
        };
      }
    }

    const bundleHash = createHash("sha256");
    let sizeBytes = 0;
    const tap = new Transform({
      transform(chunk: Buffer, _encoding, callback) {
        bundleHash.update(chunk);
        sizeBytes += chunk.byteLength;
        callback(null, chunk);
      },
    });
    await pipeline(packTarGz(members()), tap, createWriteStream(outPath, { flags: "wx" }));
    const handle = await open(outPath, "r");
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
    assert((await stat(outPath)).size === sizeBytes, "the bundle file holds what was written");
    return { manifest: manifest(), sizeBytes, sha256: bundleHash.digest("hex"), leftOut };
  } finally {
    await rm(stagingDir, { recursive: true, force: true });
  }
}
