/**
 * Reads a bundle entry by entry, streaming: gunzip on the thread pool, then tar headers, each
 * entry's bytes handed to the caller as they come. Hostile input stops the read with a
 * {@link BundleRefusal}: links and special files, names outside the bundle's fixed layout (which
 * also rules out traversal and absolute paths), duplicates, more entries or bytes than the limits
 * (a gzip bomb stops at the bound, checked on the decompressed stream), entries larger than their
 * kind allows, documents of a collection outside the allowlist (bundle-format.ts). Nothing here
 * writes anything.
 */
import { createReadStream } from "node:fs";
import { pipeline, type Readable } from "node:stream";
import { createGunzip } from "node:zlib";
import tarStream from "tar-stream";
import { ByteBound } from "../templates/tar.js";
import { AUTHENTICATION_BYTES_MAX } from "./bundle-auth.js";
import { AUTHENTICATION_ENTRY, BLOB_INDEX_ENTRY, BUNDLE_DIRECTORIES, COLLECTION_NAME_PATTERN, MANIFEST_ENTRY, isBundledCollection } from "./bundle-format.js";

/** Bounds applied while reading one bundle. */
export interface BundleLimits {
  entriesMax: number;
  /** All entries together, decompressed. */
  unpackedBytesMax: number;
  /** One blob entry (template blobs are chunks of at most 4 MiB). */
  blobBytesMax: number;
  /** manifest.json. */
  manifestBytesMax: number;
}

export const DEFAULT_BUNDLE_LIMITS: BundleLimits = {
  entriesMax: 2_000_000,
  unpackedBytesMax: 64 * 1024 ** 3,
  blobBytesMax: 8 * 1024 * 1024,
  manifestBytesMax: 4 * 1024 * 1024,
};

/** Why a bundle cannot be read; nothing of it was applied. */
export class BundleRefusal extends Error {
  constructor(message: string) {
    super(message);
    this.name = "BundleRefusal";
  }
}

export type BundleEntryKind = "directory" | "manifest" | "authentication" | "documents" | "kv" | "blob-index" | "blob";

/** One entry; `body` is read to its end, or not at all (then it is skipped), before the next is asked for. */
export interface BundleEntry {
  name: string;
  kind: BundleEntryKind;
  /** The collection, kv part or blob hash the name carries. */
  key: string;
  size: number;
  body: AsyncIterable<Buffer>;
}

const TAR_BLOCK_BYTES = 512;

/** What an entry name means, or null when the bundle layout has no such entry. */
export function classifyEntry(name: string): { kind: BundleEntryKind; key: string } | null {
  if ((BUNDLE_DIRECTORIES as readonly string[]).includes(name)) return { kind: "directory", key: name };
  if (name === MANIFEST_ENTRY) return { kind: "manifest", key: "" };
  if (name === AUTHENTICATION_ENTRY) return { kind: "authentication", key: "" };
  if (name === BLOB_INDEX_ENTRY) return { kind: "blob-index", key: "" };
  const documents = /^documents\/([^/]+)\.ndjson$/.exec(name);
  if (documents && COLLECTION_NAME_PATTERN.test(documents[1])) return { kind: "documents", key: documents[1] };
  const kv = /^kv\/([a-z0-9-]{1,40})\.ndjson$/.exec(name);
  if (kv) return { kind: "kv", key: kv[1] };
  const blob = /^blobs\/([0-9a-f]{64})$/.exec(name);
  if (blob) return { kind: "blob", key: blob[1] };
  return null;
}

/** The entries of the bundle file at `path`, in archive order (see the module comment for the checks). */
export async function* readBundle(path: string, limits: BundleLimits = DEFAULT_BUNDLE_LIMITS): AsyncGenerator<BundleEntry> {
  const source = createReadStream(path);
  const bound = new ByteBound(
    limits.unpackedBytesMax + (limits.entriesMax + 4) * TAR_BLOCK_BYTES * 3,
    () => new BundleRefusal(`unpacks to more than ${limits.unpackedBytesMax} bytes`),
  );
  const extract = tarStream.extract();
  extract.on("error", () => undefined); // reported through the loop or the pipeline
  let pipeError: Error | null = null;
  const piped = new Promise<void>((resolve) => {
    pipeline([source, createGunzip(), bound, extract] as unknown as [Readable, NodeJS.WritableStream], (err) => {
      pipeError = err ?? null;
      resolve();
    });
  });
  let completed = false;
  try {
    const seen = new Set<string>();
    let unpackedBytes = 0;
    for await (const entry of extract) {
      const header = entry.header;
      const name = header.name;
      const label = JSON.stringify(name.slice(0, 200));
      if (header.type === "link" || header.type === "symlink") throw new BundleRefusal(`${label} is a link; links are not allowed`);
      if (header.type !== "file" && header.type !== "contiguous-file" && header.type !== "directory")
        throw new BundleRefusal(`${label} is not a regular file or directory`);
      const meaning = classifyEntry(name);
      if (!meaning || (meaning.kind === "directory") !== (header.type === "directory")) throw new BundleRefusal(`${label} is not an entry of a backup bundle`);
      // The allowlist, whatever the manifest says: identity, secrets and unknown collections never come in.
      if (meaning.kind === "documents" && !isBundledCollection(meaning.key))
        throw new BundleRefusal(`${label} holds collection ${meaning.key}, which a backup bundle never holds`);
      if (seen.has(name)) throw new BundleRefusal(`duplicate entry ${label}`);
      seen.add(name);
      if (seen.size > limits.entriesMax) throw new BundleRefusal(`more than ${limits.entriesMax} entries`);
      const size = header.size ?? 0;
      unpackedBytes += size;
      if (unpackedBytes > limits.unpackedBytesMax) throw new BundleRefusal(`unpacks to more than ${limits.unpackedBytesMax} bytes`);
      if (meaning.kind === "blob" && size > limits.blobBytesMax) throw new BundleRefusal(`${label} is larger than a blob can be`);
      if (meaning.kind === "manifest" && size > limits.manifestBytesMax) throw new BundleRefusal(`${label} is larger than ${limits.manifestBytesMax} bytes`);
      if (meaning.kind === "authentication" && size > AUTHENTICATION_BYTES_MAX)
        throw new BundleRefusal(`${label} is larger than ${AUTHENTICATION_BYTES_MAX} bytes`);
      let consumed = false;
      const body = (async function* () {
        consumed = true;
        try {
          for await (const chunk of entry as AsyncIterable<Buffer>) yield chunk;
        } catch (err) {
          throw asRefusal(err); // a gzip or tar failure in the middle of an entry
        }
      })();
      yield { name, kind: meaning.kind, key: meaning.key, size, body };
      if (!consumed) entry.resume();
    }
    completed = true;
  } catch (err) {
    extract.destroy();
    await piped;
    if (err instanceof BundleRefusal) throw err;
    throw asRefusal(pipeError ?? err);
  } finally {
    if (!completed) {
      extract.destroy();
      source.destroy();
    }
  }
  await piped;
  if (pipeError) throw asRefusal(pipeError);
}

function asRefusal(err: unknown): Error {
  if (err instanceof BundleRefusal) return err;
  const code = (err as { code?: string }).code;
  if (typeof code === "string" && code.startsWith("Z_")) return new BundleRefusal("not a valid gzip stream");
  if (code === "ENOENT" || code === "EACCES") return err as Error;
  return new BundleRefusal(`malformed tar archive (${(err as Error).message ?? String(err)})`);
}

/** The lines of an entry's body (UTF-8, without the newline), refusing a line above `lineBytesMax`. */
export async function* linesOf(body: AsyncIterable<Buffer>, lineBytesMax: number): AsyncGenerator<string> {
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  for await (const chunk of body) {
    let start = 0;
    for (let at = chunk.indexOf(10); at >= 0; at = chunk.indexOf(10, start)) {
      if (pending.length === 0)
        yield chunk.toString("utf8", start, at); // the common case: no copy
      else {
        pending.push(chunk.subarray(start, at));
        yield Buffer.concat(pending).toString("utf8");
        pending = [];
        pendingBytes = 0;
      }
      start = at + 1;
    }
    if (start < chunk.length) {
      pending.push(chunk.subarray(start));
      pendingBytes += chunk.length - start;
      if (pendingBytes > lineBytesMax) throw new BundleRefusal(`a line longer than ${lineBytesMax} bytes`);
    }
  }
  if (pendingBytes > 0) yield Buffer.concat(pending).toString("utf8");
}
