/**
 * Template files on the blob store: storing the blobs an edit wrote (from memory or from a spooled
 * upload, one chunk at a time) and reading a file back, whole or as a stream of its blobs. A file is
 * one blob or a list of chunk blobs (`file-content.ts`); callers see its bytes only.
 */
import { open } from "node:fs/promises";
import { assert } from "../shared/errors.js";
import type { BlobStore } from "../store/ports.js";
import { storedBlobsOf, type BlobSource } from "./file-content.js";

/** The part of a manifest entry that locates a file's bytes. */
export interface StoredFile {
  path: string;
  size: number;
  sha256: string;
  chunks?: readonly string[];
}

/** Reads and writes template files through a {@link BlobStore}. */
export class FileBlobs {
  constructor(private readonly blobs: BlobStore) {}

  /**
   * Stores every blob of `sources` the store does not hold yet, one at a time. Chunks of spooled
   * files are read into one buffer in turn: a put is done with its bytes once it resolves, like any
   * write call, so a 256 MiB upload passes through one chunk's worth of memory.
   */
  async store(sources: ReadonlyMap<string, BlobSource>): Promise<void> {
    let buffer: Buffer | null = null;
    for (const [hash, source] of sources) {
      if (await this.blobs.has(hash)) continue;
      let data: Uint8Array;
      if ("data" in source) {
        data = source.data;
      } else {
        if (buffer === null || buffer.byteLength < source.size) buffer = Buffer.allocUnsafe(source.size);
        data = await readRange(source, buffer.subarray(0, source.size));
      }
      const stored = await this.blobs.put(data);
      assert(stored === hash, `blob read back from its source hashes to ${hash}`);
    }
  }

  /** True when every blob of `file` is present. */
  async has(file: StoredFile): Promise<boolean> {
    for (const hash of storedBlobsOf(file)) if (!(await this.blobs.has(hash))) return false;
    return true;
  }

  /** The whole file in memory, or null when one of its blobs is missing. */
  async read(file: StoredFile): Promise<Uint8Array | null> {
    const parts: Uint8Array[] = [];
    for (const hash of storedBlobsOf(file)) {
      const part = await this.blobs.get(hash);
      if (!part) return null;
      parts.push(part);
    }
    const data = parts.length === 1 ? parts[0] : Buffer.concat(parts);
    assert(data.byteLength === file.size, `blobs of ${file.path} add up to its recorded size`);
    return data;
  }

  /**
   * The file as a stream that reads one blob per pull, so serving it holds one chunk at a time.
   * A blob that vanished after {@link has} errors the stream.
   */
  stream(file: StoredFile): ReadableStream<Uint8Array> {
    const hashes = storedBlobsOf(file);
    let next = 0;
    let sentBytes = 0;
    return new ReadableStream<Uint8Array>(
      {
        pull: async (controller) => {
          if (next === hashes.length) {
            assert(sentBytes === file.size, `blobs of ${file.path} add up to its recorded size`);
            controller.close();
            return;
          }
          const part = await this.blobs.get(hashes[next++]);
          if (!part) {
            controller.error(new Error(`blob of ${file.path} is missing`));
            return;
          }
          sentBytes += part.byteLength;
          controller.enqueue(part);
        },
      },
      { highWaterMark: 0 },
    );
  }
}

/** Reads the spooled byte range `source` into `data` (exactly its size). */
async function readRange(source: { path: string; offset: number; size: number }, data: Buffer): Promise<Buffer> {
  const handle = await open(source.path, "r");
  try {
    let filled = 0;
    while (filled < source.size) {
      const { bytesRead } = await handle.read(data, filled, source.size - filled, source.offset + filled);
      assert(bytesRead > 0, `spooled file ${source.path} holds every byte that was hashed`);
      filled += bytesRead;
    }
    return data;
  } finally {
    await handle.close();
  }
}
