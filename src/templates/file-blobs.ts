/**
 * Template files on the blob store: storing the blobs an edit wrote (from memory or from a spooled
 * upload, one chunk at a time) and reading a file back, whole or as a stream of its blobs. A file is
 * one blob or a list of chunk blobs (`file-content.ts`); callers see its bytes only.
 */
import { open, type FileHandle } from "node:fs/promises";
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
    // Sources of one archive or upload are ranges of a few spool files: one open handle per file.
    const reading: { path: string; handle: FileHandle | null } = { path: "", handle: null };
    try {
      for (const [hash, source] of sources) {
        if (await this.blobs.has(hash)) continue;
        let data: Uint8Array;
        if ("data" in source) {
          data = source.data;
        } else {
          if (buffer === null || buffer.byteLength < source.size) buffer = Buffer.allocUnsafe(source.size);
          if (reading.handle === null || reading.path !== source.path) {
            await reading.handle?.close();
            reading.handle = null;
            reading.handle = await open(source.path, "r");
            reading.path = source.path;
          }
          data = await readRange(reading.handle, source, buffer.subarray(0, source.size));
        }
        const stored = await this.blobs.put(data);
        assert(stored === hash, `blob read back from its source hashes to ${hash}`);
      }
    } finally {
      await reading.handle?.close();
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
   * The file's stored blobs in order, read one at a time as they are pulled. A blob that vanished
   * after {@link has} throws.
   */
  async *chunks(file: StoredFile): AsyncGenerator<Uint8Array> {
    let sentBytes = 0;
    for (const hash of storedBlobsOf(file)) {
      const part = await this.blobs.get(hash);
      if (!part) throw new Error(`blob of ${file.path} is missing`);
      sentBytes += part.byteLength;
      yield part;
    }
    assert(sentBytes === file.size, `blobs of ${file.path} add up to its recorded size`);
  }

  /**
   * The file as a stream that reads one blob per pull, so serving it holds one chunk at a time.
   * A blob that vanished after {@link has} errors the stream.
   */
  stream(file: StoredFile): ReadableStream<Uint8Array> {
    const chunks = this.chunks(file);
    return new ReadableStream<Uint8Array>(
      {
        pull: async (controller) => {
          try {
            const next = await chunks.next();
            if (next.done) controller.close();
            else controller.enqueue(next.value);
          } catch (err) {
            controller.error(err);
          }
        },
        cancel: async () => {
          await chunks.return(undefined);
        },
      },
      { highWaterMark: 0 },
    );
  }
}

/** Reads the spooled byte range `source` into `data` (exactly its size). */
async function readRange(handle: FileHandle, source: { path: string; offset: number; size: number }, data: Buffer): Promise<Buffer> {
  let filled = 0;
  while (filled < source.size) {
    const { bytesRead } = await handle.read(data, filled, source.size - filled, source.offset + filled);
    assert(bytesRead > 0, `spooled file ${source.path} holds every byte that was hashed`);
    filled += bytesRead;
  }
  return data;
}
