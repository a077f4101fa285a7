/**
 * What a restore would change, for a dry run: per bundled collection, the documents the restore
 * would add (in the bundle, not here), replace (here with other content), remove (here, not in the
 * bundle) and leave unchanged; and the template blobs it would store and set aside. Each list names
 * at most {@link restoreDiffIdsMax} ids (the first in the order read); the counts are whole.
 *
 * One streaming pass over the verified bundle, like the restore itself. Memory: one fingerprint
 * (sha1 of the document's canonical JSON) per document of the collection being compared, read
 * from a snapshot of this store in batches, and the hashes of the blob index; a turn of the event
 * loop every {@link diffDocsPerTurn} documents. A user's `tokenVersion` is left out of the
 * comparison: a restore raises every one anyway (everybody signs in again).
 */
import { createHash } from "node:crypto";
import { setImmediate as nextTurn } from "node:timers/promises";
import type { BlobStore, Doc, DocumentStore } from "../store/ports.js";
import { restoreDiffIdsMax, type BundleManifest, type CollectionDiff, type IdList, type RestoreDiff } from "./bundle-format.js";
import { linesOf, readBundle, type BundleLimits } from "./bundle-reader.js";
import { LINE_BYTES_MAX } from "./bundle-validator.js";
import type { RestoreParts } from "./restore.js";

/** Documents fingerprinted between two turns of the event loop. */
export const diffDocsPerTurn = 500;
/** Documents per batch read from the store's snapshot. */
const SNAPSHOT_BATCH_DOCUMENTS = 500;

const emptyList = (): IdList => ({ count: 0, ids: [] });

function note(list: IdList, id: string): void {
  list.count++;
  if (list.ids.length < restoreDiffIdsMax) list.ids.push(id);
}

/** JSON with object keys sorted at every depth: equal documents give equal text whatever the store's key order. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.keys(value as Record<string, unknown>)
      .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`);
    return `{${entries.join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

function fingerprint(collection: string, doc: Doc): string {
  const compared = collection === "users" ? { ...doc, tokenVersion: undefined } : doc;
  return createHash("sha1").update(canonicalJson(compared)).digest("hex");
}

/** What restoring `parts` of the verified bundle at `path` would change here; nothing is written. */
export async function diffRestore(
  path: string,
  manifest: BundleManifest,
  parts: RestoreParts,
  targets: { documents: DocumentStore; blobs: BlobStore },
  limits?: BundleLimits,
): Promise<RestoreDiff> {
  const collections: CollectionDiff[] = [];
  let bundleBlobs: Set<string> | null = null;
  const bundled = new Set(manifest.collections.map((c) => c.name));
  const snapshot = parts.datastores ? await targets.documents.snapshot() : null;
  try {
    for await (const entry of readBundle(path, limits)) {
      if (entry.kind === "documents" && snapshot && bundled.has(entry.key)) {
        const here = await fingerprintsOf(snapshot, entry.key);
        const diff: CollectionDiff = { name: entry.key, added: emptyList(), replaced: emptyList(), removed: emptyList(), unchanged: 0 };
        let seen = 0;
        for await (const line of linesOf(entry.body, LINE_BYTES_MAX)) {
          const doc = JSON.parse(line) as Doc;
          const current = here.get(doc._id);
          here.delete(doc._id);
          if (current === undefined) note(diff.added, doc._id);
          else if (current === fingerprint(entry.key, doc)) diff.unchanged++;
          else note(diff.replaced, doc._id);
          if (++seen % diffDocsPerTurn === 0) await nextTurn();
        }
        for (const id of here.keys()) note(diff.removed, id);
        collections.push(diff);
      } else if (entry.kind === "blob-index" && parts.filesystem) {
        bundleBlobs = new Set();
        for await (const line of linesOf(entry.body, 128)) bundleBlobs.add(line);
      }
    }
  } finally {
    await snapshot?.release();
  }
  if (!parts.filesystem) return { collections, blobs: null };
  const stored = new Set(await targets.blobs.list());
  const blobs = { added: emptyList(), removed: emptyList() };
  for (const hash of [...(bundleBlobs ?? [])].sort()) if (!stored.has(hash)) note(blobs.added, hash);
  for (const hash of [...stored].sort()) if (!bundleBlobs?.has(hash)) note(blobs.removed, hash);
  return { collections, blobs };
}

/** Id → fingerprint of every document of `collection` in the snapshot. */
async function fingerprintsOf(snapshot: Awaited<ReturnType<DocumentStore["snapshot"]>>, collection: string): Promise<Map<string, string>> {
  const here = new Map<string, string>();
  for await (const batch of snapshot.documents(collection, SNAPSHOT_BATCH_DOCUMENTS)) {
    for (const doc of batch) here.set(doc._id, fingerprint(collection, doc));
    await nextTurn();
  }
  return here;
}
