/**
 * Applies a verified bundle in one streaming pass.
 *
 * Datastores: every bundled collection is replaced wholesale through the document store's import
 * (one transaction on PostgreSQL), users with a token version above any they had, so every token
 * issued before the restore stops verifying (see {@link restoredTokenVersion}); the key-value
 * counters are raised to the bundle's values, never lowered; the key-value data parts (the platform
 * modules' keys) are replaced: under their prefix exactly the bundle's keys remain, each with the
 * time to live it had left when the bundle was written.
 *
 * Filesystem: every blob of the bundle is stored (content-addressed, so one already there is left
 * as it is); blobs the bundle does not hold are copied under the rollback root, then removed.
 *
 * Nothing here holds the event loop for long (the controller also runs Raft): blob bytes are
 * hashed chunk by chunk as they come out of the archive and, on the filesystem blob store, written
 * as they come (never joined into one buffer, hashed once), set-aside blobs copied the same way;
 * documents are imported in batches bounded by count and bytes, with a turn of the event loop
 * between batches.
 *
 * Every step can run again with the same outcome, which is what lets an interrupted restore be
 * finished on the next start (the journal in backup-service.ts).
 */
import { createHash } from "node:crypto";
import { mkdir, open, rename } from "node:fs/promises";
import { join } from "node:path";
import { setImmediate as nextTurn } from "node:timers/promises";
import type { Clock } from "../shared/clock.js";
import { assert, AssertionError } from "../shared/errors.js";
import { FsBlobStore } from "../store/fs-blob-store.js";
import type { BlobStore, Doc, DocumentImportBatch, DocumentStore, KvStore } from "../store/ports.js";
import { isBundledCollection, KV_PARTS, prefixGroupOf, type BundleManifest } from "./bundle-format.js";
import { linesOf, readBundle, type BundleLimits } from "./bundle-reader.js";
import { LINE_BYTES_MAX } from "./bundle-validator.js";

/** Most documents per import batch. */
const IMPORT_BATCH_DOCUMENTS = 100;
/** Most bytes of document lines per import batch (a batch is parsed and written in one go). */
const IMPORT_BATCH_BYTES = 512 * 1024;
/** Attempts at raising one key-value counter against concurrent writers. */
const COUNTER_ATTEMPTS_MAX = 16;

/** What a restore writes to. */
export interface RestoreTargets {
  documents: DocumentStore;
  kv: KvStore;
  blobs: BlobStore;
  clock: Clock;
}

export interface RestoreParts {
  datastores: boolean;
  filesystem: boolean;
}

export interface AppliedRestore {
  /** Blob entries stored. */
  entryCount: number;
  collections: string[];
  prefixGroups: string[];
  kvPrefixes: string[];
  /** Blobs moved to the rollback root. */
  rolledAside: number;
}

/**
 * The token version a restored user gets: above the bundle's, above the user's current one, and at
 * least the restore time in ms. Tokens carry the version they were issued under, and versions only
 * grow by one per password or role change, so every token issued before this moment (even to a
 * user deleted since the backup, whose current version is unknown) carries a lower one.
 */
export function restoredTokenVersion(bundled: unknown, current: number | undefined, nowMs: number): number {
  const fromBundle = typeof bundled === "number" && Number.isSafeInteger(bundled) ? bundled : 0;
  return Math.max(fromBundle + 1, (current ?? 0) + 1, Math.floor(nowMs));
}

/** What a restore of `parts` would change, without reading the archive again. */
export function plannedRestore(manifest: BundleManifest, parts: RestoreParts): Omit<AppliedRestore, "rolledAside"> {
  const collections = parts.datastores ? manifest.collections.map((c) => c.name) : [];
  for (const name of collections) assert(isBundledCollection(name), `a verified manifest names only allowlisted collections (${name})`);
  return {
    entryCount: parts.filesystem ? manifest.blobs.count : 0,
    collections,
    prefixGroups: [...new Set(collections.map(prefixGroupOf))].sort(),
    kvPrefixes: parts.datastores ? manifest.kv.map((k) => k.prefix) : [],
  };
}

/** Applies the bundle at `path` (already verified against `manifest`); see the module comment. */
export async function applyBundle(
  path: string,
  manifest: BundleManifest,
  parts: RestoreParts,
  targets: RestoreTargets,
  rollbackRoot: string,
  limits?: BundleLimits,
  /** Aborts the restore between two batches (the maintenance flag it runs under was lost): nothing more is written. */
  signal?: AbortSignal,
): Promise<AppliedRestore> {
  const planned = plannedRestore(manifest, parts);
  const currentVersions = new Map<string, number>();
  if (parts.datastores) {
    for (const user of await targets.documents.collection("users").find()) {
      if (typeof user.tokenVersion === "number") currentVersions.set(user._id, user.tokenVersion);
    }
  }
  const restoreMs = targets.clock.nowMs();
  const counters: { key: string; value: string }[] = [];
  const replacements = new Map<string, KvLine[]>();
  const bundleBlobs = new Set<string>();
  let entryCount = 0;

  async function* batches(): AsyncGenerator<DocumentImportBatch> {
    for await (const entry of readBundle(path, limits)) {
      if (entry.kind === "documents" && parts.datastores) {
        // The reader refuses these already; the restore never writes outside the allowlist whatever reads for it.
        assert(isBundledCollection(entry.key), `restored collections are allowlisted (${entry.key})`);
        let batch: Doc[] = [];
        let batchBytes = 0;
        let yielded = false;
        for await (const line of linesOf(entry.body, LINE_BYTES_MAX)) {
          const doc = JSON.parse(line) as Doc;
          if (entry.key === "users") doc.tokenVersion = restoredTokenVersion(doc.tokenVersion, currentVersions.get(doc._id), restoreMs);
          batch.push(doc);
          batchBytes += line.length;
          if (batch.length >= IMPORT_BATCH_DOCUMENTS || batchBytes >= IMPORT_BATCH_BYTES) {
            signal?.throwIfAborted();
            yield { collection: entry.key, documents: batch };
            yielded = true;
            batch = [];
            batchBytes = 0;
            await nextTurn(); // timers and I/O (Raft among them) between two batches
          }
        }
        signal?.throwIfAborted();
        if (batch.length > 0 || !yielded) yield { collection: entry.key, documents: batch };
      } else if (entry.kind === "kv" && parts.datastores) {
        const part = KV_PARTS.find((p) => p.part === entry.key);
        assert(part !== undefined, `a verified bundle holds known key-value parts only (${entry.key})`);
        const lines: KvLine[] = part.restore === "raise" ? counters : [];
        if (part.restore === "replace") replacements.set(part.prefix, lines);
        for await (const line of linesOf(entry.body, LINE_BYTES_MAX)) lines.push(JSON.parse(line) as KvLine);
      } else if (entry.kind === "blob-index" && parts.filesystem) {
        for await (const line of linesOf(entry.body, 128)) bundleBlobs.add(line);
      } else if (entry.kind === "blob" && parts.filesystem) {
        await restoreBlob(targets.blobs, entry.key, entry.body);
        entryCount++;
      }
    }
  }

  if (parts.datastores) {
    await targets.documents.importCollections(batches());
  } else {
    for await (const batch of batches()) void batch; // never yields: documents are not restored
  }
  for (const { key, value } of counters) {
    signal?.throwIfAborted();
    await raiseCounter(targets.kv, key, value);
  }

  for (const [prefix, lines] of replacements) await replaceKeys(targets.kv, prefix, lines, signal);

  let rolledAside = 0;
  if (parts.filesystem) {
    const extra = (await targets.blobs.list()).filter((hash) => !bundleBlobs.has(hash));
    if (extra.length > 0) await mkdir(join(rollbackRoot, "blobs"), { recursive: true });
    for (const hash of extra) {
      const aside = join(rollbackRoot, "blobs", hash);
      if (targets.blobs instanceof FsBlobStore) await targets.blobs.copyTo(hash, aside);
      else {
        const data = await targets.blobs.get(hash);
        if (data) await writeDurably(aside, data);
      }
      await targets.blobs.delete(hash);
      rolledAside++;
    }
  }
  return { ...planned, entryCount, rolledAside };
}

/**
 * Stores the blob `hash` from its archive entry's chunks, which must hash to that name (an
 * AssertionError otherwise, with nothing stored). The filesystem store writes the chunks as they
 * come; another store gets the joined bytes, and only when it does not hold the blob yet.
 */
async function restoreBlob(blobs: BlobStore, hash: string, body: AsyncIterable<Buffer>): Promise<void> {
  if (blobs instanceof FsBlobStore) {
    await blobs.putStream(body, hash);
    return;
  }
  const digest = createHash("sha256");
  const held = await blobs.has(hash);
  const chunks: Buffer[] = [];
  for await (const chunk of body) {
    digest.update(chunk);
    if (!held) chunks.push(chunk);
  }
  if (digest.digest("hex") !== hash) throw new AssertionError(`restored blob ${hash} does not hash to its name`);
  if (!held) await blobs.put(Buffer.concat(chunks));
}

/** One line of a key-value part. */
interface KvLine {
  key: string;
  value: string;
  ttlMs?: number;
}

/** Makes the keys under `prefix` exactly `lines`: the others are deleted, each of these set (with its time to live). */
async function replaceKeys(kv: KvStore, prefix: string, lines: readonly KvLine[], signal?: AbortSignal): Promise<void> {
  const wanted = new Set(lines.map((line) => line.key));
  for (const key of await kv.keys(prefix)) {
    signal?.throwIfAborted();
    if (!wanted.has(key)) await kv.delete(key);
  }
  for (const { key, value, ttlMs } of lines) {
    assert(key.startsWith(prefix), `a verified bundle's ${prefix} part holds only keys under it (${key})`);
    signal?.throwIfAborted();
    await kv.set(key, value, typeof ttlMs === "number" && ttlMs > 0 ? { ttlMs } : undefined);
  }
}

/** Sets `key` to `value` unless it already holds a number at least as high. */
async function raiseCounter(kv: KvStore, key: string, value: string): Promise<void> {
  const wanted = Number(value);
  if (!Number.isSafeInteger(wanted)) return;
  for (let attempt = 0; attempt < COUNTER_ATTEMPTS_MAX; attempt++) {
    const current = await kv.get(key);
    if (current === null) {
      if (await kv.setIfAbsent(key, value)) return;
      continue;
    }
    if (Number(current) >= wanted) return;
    if (await kv.compareAndSet(key, current, value)) return;
  }
  throw new Error(`could not raise ${key} to ${value}: it kept changing`);
}

/** Writes a file through a temporary name with fsync, so it is there whole or not at all. */
export async function writeDurably(path: string, data: Uint8Array): Promise<void> {
  const temp = `${path}.partial`;
  const handle = await open(temp, "w");
  try {
    await handle.writeFile(data);
    await handle.sync();
  } finally {
    await handle.close();
  }
  await rename(temp, path);
}
