/**
 * Where the files of an archive go while it is read: one temporary file per archive, each entry's
 * bytes appended as they stream out of the decompressor and hashed on the way (whole file and 4 MiB
 * chunks, `file-content.ts`). An entry is then a byte range of that file, so nothing of an archive is
 * ever whole in memory, and its blobs are stored from disk only once every entry passed the checks.
 */
import { mkdtemp, open, rm, type FileHandle } from "node:fs/promises";
import { join } from "node:path";
import { assert } from "../shared/errors.js";
import { ContentHasher, type FileContent } from "./file-content.js";

/** Prefix of an unpack spool directory; it names the process, like the upload spool. */
export function unpackSpoolPrefix(): string {
  return `cloud-unpack-${process.pid}-`;
}

/** One archive's unpacked bytes on disk; create with {@link ArchiveSpool.create}, then dispose. */
export class ArchiveSpool {
  private offset = 0;

  private constructor(
    /** The spool's own directory (other temporary files of the same request may go here too). */
    readonly directory: string,
    private readonly path: string,
    private readonly handle: FileHandle,
  ) {}

  /** A new spool in a directory of its own under `parent`. */
  static async create(parent: string): Promise<ArchiveSpool> {
    const directory = await mkdtemp(join(parent, unpackSpoolPrefix()));
    try {
      const path = join(directory, "entries");
      return new ArchiveSpool(directory, path, await open(path, "wx"));
    } catch (err) {
      await rm(directory, { recursive: true, force: true });
      throw err;
    }
  }

  /**
   * Appends one entry's bytes, as they come, and describes them. The source decides when it ends and
   * may throw (a size or CRC check); what was appended of a refused entry is simply never referenced.
   */
  async append(bytes: AsyncIterable<Uint8Array>): Promise<FileContent> {
    const hasher = new ContentHasher();
    const start = this.offset;
    for await (const chunk of bytes) {
      hasher.update(chunk);
      for (let at = 0; at < chunk.byteLength;) {
        const { bytesWritten } = await this.handle.write(chunk, at, chunk.byteLength - at, this.offset);
        assert(bytesWritten > 0, "a write to the unpack spool makes progress");
        at += bytesWritten;
        this.offset += bytesWritten;
      }
    }
    return hasher.finish(this.path, start);
  }

  /** Closes and removes the spool; call once the entries are stored or refused. */
  async dispose(): Promise<void> {
    await this.handle.close().catch(() => undefined);
    await rm(this.directory, { recursive: true, force: true });
  }
}
