/**
 * File contents as the template store keeps them. A file of at most {@link FILE_CHUNK_BYTES} is one
 * blob named by its sha256; a larger file is a list of chunk blobs of `FILE_CHUNK_BYTES` each (the
 * last one shorter), so no blob store call carries more than one chunk and a file never has to be
 * whole in memory to be stored or served. The file's own sha256 stays what the manifest and the
 * daemon see.
 */
import { createHash, type Hash } from "node:crypto";

/**
 * Size of one chunk blob. Small enough that storing or serving a large file holds one chunk at a
 * time; large enough that a 256 MiB file lists 64 chunks. Changing it changes the tree objects (and
 * so the template hash) of files above it.
 */
export const FILE_CHUNK_BYTES = 4 * 1024 * 1024;

/** Where a blob's bytes are before they are stored: in memory, or a byte range of a spooled file. */
export type BlobSource = { readonly data: Uint8Array } | { readonly path: string; readonly offset: number; readonly size: number };

/** A file's identity and the blobs that hold it. */
export interface FileContent {
  sha256: string;
  size: number;
  /** The chunk blobs in order; only for files above {@link FILE_CHUNK_BYTES}. */
  chunks?: readonly string[];
  /** Every blob of the file (the whole file, or each chunk) with where its bytes are. */
  sources: ReadonlyMap<string, BlobSource>;
}

/** The blobs that hold a file: its chunks, or the single blob named by its sha256. */
export function storedBlobsOf(file: { sha256: string; chunks?: readonly string[] }): readonly string[] {
  return file.chunks ?? [file.sha256];
}

function hex(data: Uint8Array): string {
  return createHash("sha256").update(data).digest("hex");
}

/** The content of bytes held in memory (chunks are views, not copies). */
export function contentOfBytes(data: Uint8Array): FileContent {
  const sha256 = hex(data);
  if (data.byteLength <= FILE_CHUNK_BYTES) return { sha256, size: data.byteLength, sources: new Map([[sha256, { data }]]) };
  const chunks: string[] = [];
  const sources = new Map<string, BlobSource>();
  for (let offset = 0; offset < data.byteLength; offset += FILE_CHUNK_BYTES) {
    const chunk = data.subarray(offset, offset + FILE_CHUNK_BYTES);
    const chunkHash = hex(chunk);
    chunks.push(chunkHash);
    sources.set(chunkHash, { data: chunk });
  }
  return { sha256, size: data.byteLength, chunks, sources };
}

/**
 * Hashes a file as it streams past: its sha256 and the sha256 of each chunk, so a spooled file is
 * described without being read again.
 */
export class ContentHasher {
  private readonly whole = createHash("sha256");
  private chunk: Hash = createHash("sha256");
  private chunkBytes = 0;
  private readonly chunkHashes: string[] = [];
  private size = 0;

  update(bytes: Uint8Array): void {
    this.whole.update(bytes);
    this.size += bytes.byteLength;
    let at = 0;
    while (at < bytes.byteLength) {
      const take = Math.min(FILE_CHUNK_BYTES - this.chunkBytes, bytes.byteLength - at);
      this.chunk.update(bytes.subarray(at, at + take));
      this.chunkBytes += take;
      at += take;
      if (this.chunkBytes === FILE_CHUNK_BYTES) this.closeChunk();
    }
  }

  /**
   * The content of every byte seen, to be read back from `path` (where the first byte is at
   * `offset`) when stored; call once, at the end.
   */
  finish(path: string, offset = 0): FileContent {
    if (this.chunkBytes > 0 || this.chunkHashes.length === 0) this.closeChunk();
    const sha256 = this.whole.digest("hex");
    const ranges = this.chunkHashes.map((hash, index) => {
      const start = index * FILE_CHUNK_BYTES;
      return [hash, { path, offset: offset + start, size: Math.min(FILE_CHUNK_BYTES, this.size - start) }] as const;
    });
    if (ranges.length === 1) return { sha256, size: this.size, sources: new Map([[sha256, ranges[0][1]]]) };
    return { sha256, size: this.size, chunks: [...this.chunkHashes], sources: new Map(ranges) };
  }

  private closeChunk(): void {
    this.chunkHashes.push(this.chunk.digest("hex"));
    this.chunk = createHash("sha256");
    this.chunkBytes = 0;
  }
}
