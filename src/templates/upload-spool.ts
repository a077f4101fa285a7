/**
 * Spools the files of a multipart request to disk as the body streams in: each file part of the
 * expected fields goes to its own temporary file while its sha256 and chunk hashes are computed, so
 * neither the body nor a file is ever whole in memory. Other parts are read and dropped. The caller
 * stores the files from disk, then disposes of the spool.
 */
import { mkdtemp, open, rm, type FileHandle } from "node:fs/promises";
import { join } from "node:path";
import { ApiError, badRequest } from "../shared/errors.js";
import { ContentHasher, type FileContent } from "./file-content.js";
import { MultipartParser, multipartBoundary, type MultipartEvent, type MultipartLimits } from "./multipart-parser.js";

/** Bytes kept from the start of each file, for recognising its format. */
const HEAD_BYTES = 4;

/** One spooled file part. */
export interface SpooledFile {
  /** The form field it came in. */
  field: string;
  fileName: string;
  /** The temporary file holding its bytes. */
  path: string;
  content: FileContent;
  /** Its first bytes (at most four). */
  head: Uint8Array;
}

/** The files of one request on disk. */
export interface MultipartSpool {
  files: SpooledFile[];
  /** Removes the temporary files; call it once the files are stored or refused. */
  dispose(): Promise<void>;
}

/** Where and what to spool. */
export interface SpoolOptions {
  /** Parent directory of the per-request temporary directory. */
  directory: string;
  /** Form field (or fields) whose file parts are kept. */
  field: string | readonly string[];
  limits?: MultipartLimits;
}

/** Prefix of a request's spool directory; it names the process, so each process can find its own. */
export function spoolDirectoryPrefix(): string {
  return `cloud-upload-${process.pid}-`;
}

/**
 * Reads `body` to its end, spooling the file parts of `options.field`. A malformed body is 400, too
 * many parts 422, a typed error of the stream (such as the body limit's 413) is rethrown, and any
 * other failure to read it (the client went away) is 400; on any failure the files written so far
 * are removed.
 */
export async function spoolMultipart(body: ReadableStream<Uint8Array> | null, contentType: string | undefined, options: SpoolOptions): Promise<MultipartSpool> {
  const parser = new MultipartParser(multipartBoundary(contentType), options.limits);
  const directory = await mkdtemp(join(options.directory, spoolDirectoryPrefix()));
  const dispose = () => rm(directory, { recursive: true, force: true });
  const writer = new SpoolWriter(directory, typeof options.field === "string" ? [options.field] : options.field);
  try {
    if (body) {
      const reader = body.getReader();
      for (;;) {
        const { done, value } = await reader.read().catch((err: unknown) => {
          throw err instanceof ApiError ? err : badRequest("The request body ended before it was complete");
        });
        if (done) break;
        for (const event of parser.push(value)) await writer.apply(event);
      }
    }
    parser.end();
    return { files: writer.files, dispose };
  } catch (err) {
    await writer.abandon();
    await dispose();
    throw err;
  }
}

/** Routes parser events: file parts of the field to disk, everything else nowhere. */
class SpoolWriter {
  readonly files: SpooledFile[] = [];
  private current: SpoolingFile | null = null;

  constructor(
    private readonly directory: string,
    private readonly fields: readonly string[],
  ) {}

  async apply(event: MultipartEvent): Promise<void> {
    if (event.type === "part") {
      const { name, fileName } = event.part;
      this.current =
        this.fields.includes(name) && fileName !== undefined
          ? await SpoolingFile.create(join(this.directory, String(this.files.length)), name, fileName)
          : null;
    } else if (event.type === "data") {
      await this.current?.write(event.bytes);
    } else if (this.current) {
      this.files.push(await this.current.finish());
      this.current = null;
    }
  }

  async abandon(): Promise<void> {
    await this.current?.abandon();
  }
}

/** A file part being written: bytes go to disk and through the hasher. */
class SpoolingFile {
  private readonly hasher = new ContentHasher();
  private head = new Uint8Array(0);

  private constructor(
    private readonly path: string,
    private readonly field: string,
    private readonly fileName: string,
    private readonly handle: FileHandle,
  ) {}

  static async create(path: string, field: string, fileName: string): Promise<SpoolingFile> {
    return new SpoolingFile(path, field, fileName, await open(path, "wx"));
  }

  async write(bytes: Uint8Array): Promise<void> {
    if (this.head.byteLength < HEAD_BYTES) this.head = Buffer.concat([this.head, bytes.subarray(0, HEAD_BYTES - this.head.byteLength)]);
    this.hasher.update(bytes);
    for (let at = 0; at < bytes.byteLength;) {
      const { bytesWritten } = await this.handle.write(bytes, at, bytes.byteLength - at);
      at += bytesWritten;
    }
  }

  async finish(): Promise<SpooledFile> {
    await this.handle.close();
    return { field: this.field, fileName: this.fileName, path: this.path, content: this.hasher.finish(this.path), head: this.head };
  }

  async abandon(): Promise<void> {
    // Abandoning follows a failure that is already being reported; a second one from close adds nothing.
    await this.handle.close().catch(() => undefined);
  }
}
