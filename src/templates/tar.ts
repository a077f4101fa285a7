/**
 * tar.gz reading and writing on `tar-stream` (POSIX ustar, PAX and GNU long names) and streaming
 * `node:zlib`, whose work runs on the thread pool. Neither side holds an archive in memory: the
 * reader appends each entry to an {@link ArchiveSpool} as it is decompressed, the writer pulls one
 * stored blob at a time and honours back-pressure down to the socket.
 *
 * The reader accepts regular files and directories only: symbolic links, hard links, devices and
 * FIFOs are refused, as are unsafe paths (see `paths.ts`), so an archive can never write outside a
 * template. Entry count and unpacked bytes are bounded while reading: each header's size is checked
 * against `unpackedBytesMax` before its data is read, and the decompressed stream as a whole may not
 * exceed that bound plus the tar framing, so a gzip bomb stops at the bound, not at the end.
 */
import { Readable, Transform, pipeline, type TransformCallback } from "node:stream";
import { createGunzip, createGzip } from "node:zlib";
import tarStream from "tar-stream";
import { ApiError } from "../shared/errors.js";
import { archiveError, type ArchiveEntry, type ArchiveLimits } from "./archive-limits.js";
import type { ArchiveSpool } from "./archive-spool.js";
import { normalizeTemplatePath } from "../wire/template-paths.js";

const BLOCK_BYTES = 512;
/** Export entries carry no time, so the same files always make the same archive. */
const EPOCH = new Date(0);
/** gzip level of exports: zlib's default trade of speed for size. */
const GZIP_LEVEL = 6;

/** One member to write: a directory, or a file with its size and its bytes (pulled when written). */
export type TarMember =
  { path: string; kind: "dir"; mode: number } | { path: string; kind: "file"; mode: number; size: number; data: () => AsyncIterable<Uint8Array> };

/**
 * The members as a gzip-compressed tar stream. Members and their bytes are pulled only as fast as
 * the consumer reads: a file's next blob is read when the gzip stage has room for it. An error of a
 * member's bytes (a blob that vanished) destroys the stream; so does a consumer that goes away,
 * which stops the pulling.
 */
export function packTarGz(members: AsyncIterable<TarMember> | Iterable<TarMember>): Readable {
  const pack = tarStream.pack();
  const gzip = createGzip({ level: GZIP_LEVEL });
  pipeline(pack, gzip, () => undefined); // errors reach the consumer through gzip
  // A consumer that goes away destroys gzip, then pack, after pipeline has let go of its listeners.
  pack.on("error", () => undefined);
  void (async () => {
    try {
      for await (const member of members) {
        if (gzip.destroyed) return;
        await writeMember(pack, member);
      }
      pack.finalize();
    } catch (err) {
      pack.destroy(err as Error);
    }
  })();
  return gzip;
}

async function writeMember(pack: tarStream.Pack, member: TarMember): Promise<void> {
  let sink!: ReturnType<tarStream.Pack["entry"]>;
  const written = new Promise<void>((resolve, reject) => {
    const header: Parameters<tarStream.Pack["entry"]>[0] =
      member.kind === "dir"
        ? { name: member.path, type: "directory", mode: member.mode & 0o7777, mtime: EPOCH }
        : { name: member.path, type: "file", mode: member.mode & 0o7777, size: member.size, mtime: EPOCH };
    sink = pack.entry(header, (err) => (err ? reject(err) : resolve()));
  });
  sink.on("error", () => undefined); // the entry's callback reports it
  written.catch(() => undefined); // awaited below; a failed write may end the loop first
  if (member.kind === "file") {
    for await (const chunk of member.data()) {
      if (!sink.write(chunk)) await Promise.race([new Promise<void>((resolve) => sink.once("drain", () => resolve())), written]);
    }
    sink.end(undefined);
  }
  await written;
}

/** Counts decompressed bytes and errors with the refusal once they pass `bytesMax` (backups read bundles through it too). */
export class ByteBound extends Transform {
  private bytes = 0;

  constructor(
    private readonly bytesMax: number,
    private readonly refusal: () => Error,
  ) {
    super();
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.bytes += chunk.byteLength;
    if (this.bytes > this.bytesMax) callback(this.refusal());
    else callback(null, chunk);
  }
}

/**
 * Reads a tar.gz (or plain tar) archive from `source`, appending file bytes to `spool`, into confined
 * entries. Refuses links, special files, unsafe paths, malformed headers, and archives above
 * `limits` (checked while decompressing); see the module comment.
 */
export async function unpackTar(source: AsyncIterable<Uint8Array>, limits: ArchiveLimits, spool: ArchiveSpool): Promise<ArchiveEntry[]> {
  const { head, input } = await peek(source);
  const gzipped = head.byteLength >= 2 && head[0] === 0x1f && head[1] === 0x8b;
  const tooLarge = () => archiveError(`unpacks to more than ${limits.unpackedBytesMax} bytes`);
  // The tar framing adds at most a few header blocks per entry plus the end blocks.
  const bound = new ByteBound(limits.unpackedBytesMax + (limits.entriesMax + 4) * BLOCK_BYTES * 3, tooLarge);
  // Archives without the ustar magic (old tar writers) are read like the rest.
  const extract = tarStream.extract({ allowUnknownFormat: true } as Parameters<typeof tarStream.extract>[0]);
  extract.on("error", () => undefined); // reported through the loop or the pipeline, never unhandled
  const stages: NodeJS.ReadWriteStream[] = gzipped ? [createGunzip(), bound] : [bound];
  let pipeError: Error | null = null;
  const piped = new Promise<void>((resolve) => {
    pipeline([input, ...stages, extract] as unknown as [Readable, NodeJS.WritableStream], (err) => {
      pipeError = err ?? null;
      resolve();
    });
  });
  const entries: ArchiveEntry[] = [];
  try {
    const seen = new Set<string>();
    let unpackedBytes = 0;
    for await (const entry of extract) {
      const header = entry.header;
      const rawName = header.name;
      const label = JSON.stringify(rawName);
      if (header.type === "link" || header.type === "symlink") throw archiveError(`${label} is a link; links are not allowed`);
      if (header.type !== "file" && header.type !== "contiguous-file" && header.type !== "directory")
        throw archiveError(`${label} is not a regular file or directory`);
      if (rawName.includes("\0")) throw archiveError("entry name contains NUL");
      const kind = header.type === "directory" || rawName.endsWith("/") ? "dir" : "file";
      const path = normalizeTemplatePath(rawName, "archive entry", { archive: true, allowRoot: kind === "dir" });
      const size = header.size ?? 0;
      if (path === "") {
        entry.resume();
        continue;
      }
      if (seen.has(path)) throw archiveError(`duplicate entry ${path}`);
      seen.add(path);
      if (entries.length >= limits.entriesMax) throw archiveError(`more than ${limits.entriesMax} entries`);
      unpackedBytes += kind === "file" ? size : 0;
      if (unpackedBytes > limits.unpackedBytesMax) throw tooLarge();
      const mode = header.mode ?? 0;
      if (kind === "dir") {
        entry.resume();
        entries.push({ path, kind, mode });
        continue;
      }
      const content = await spool.append(entry as AsyncIterable<Uint8Array>);
      if (content.size !== size) throw archiveError(`truncated tar entry ${path}`);
      entries.push({ path, kind, mode, content });
    }
  } catch (err) {
    extract.destroy();
    await piped;
    // A refusal of the loop says why; otherwise the pipeline's own failure (gzip, bound) does.
    throw asArchiveError(err instanceof ApiError ? err : (pipeError ?? err), gzipped);
  }
  await piped;
  if (pipeError) throw asArchiveError(pipeError, gzipped);
  return entries;
}

/** The first chunk of `source` (to recognise gzip) and a stream of all of it, that chunk included. */
async function peek(source: AsyncIterable<Uint8Array>): Promise<{ head: Uint8Array; input: Readable }> {
  const iterator = source[Symbol.asyncIterator]();
  const first = await iterator.next();
  const head = first.done ? new Uint8Array(0) : first.value;
  async function* all(): AsyncGenerator<Uint8Array> {
    if (!first.done) yield first.value;
    for (let next = await iterator.next(); !next.done; next = await iterator.next()) yield next.value;
  }
  return { head, input: Readable.from(all(), { objectMode: false }) };
}

/** A typed 422 as it is; a failure of the gzip stream or of the tar framing as a 422 saying so. */
function asArchiveError(err: unknown, gzipped: boolean): Error {
  if (err instanceof ApiError) return err;
  const code = (err as { code?: string }).code;
  if (gzipped && typeof code === "string" && code.startsWith("Z_")) return archiveError("not a valid gzip stream");
  return archiveError(`malformed tar archive (${(err as Error).message ?? String(err)})`);
}
