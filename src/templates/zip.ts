/**
 * ZIP reading on `yauzl`, from a file (random access: the central directory is at the end) or from
 * bytes in memory. Stored and deflated entries, ZIP64 archives and entries written with data
 * descriptors are read; encrypted and multi-disk archives, other compression methods, and entries
 * whose Unix mode says link or special file are refused, as are unsafe paths. Every entry is checked
 * before any is unpacked (names, types, duplicates, the entry count and the declared sizes against
 * the limits); then each one streams out of the thread-pool inflater into the {@link ArchiveSpool},
 * stopped at the first byte beyond its declared size (a zip bomb), and checked against its CRC-32.
 */
import { crc32 } from "node:zlib";
import yauzl from "yauzl";
import { ApiError } from "../shared/errors.js";
import { archiveError, type ArchiveEntry, type ArchiveLimits } from "./archive-limits.js";
import type { ArchiveSpool } from "./archive-spool.js";
import { normalizeTemplatePath } from "../wire/template-paths.js";

const S_IFMT = 0o170000;
const S_IFDIR = 0o040000;
const S_IFREG = 0o100000;
const UNIX_HOST = 3;
const MSDOS_DIRECTORY = 0x10;
const FLAG_ENCRYPTED = 0x1;
const utf8 = new TextDecoder("utf-8", { fatal: false });

/** Where a ZIP is: a file on disk, or bytes in memory. */
export type ZipSource = { path: string } | { data: Uint8Array };

/** True when `data` starts like a ZIP archive (local header or empty-archive end record). */
export function looksLikeZip(data: Uint8Array): boolean {
  return data.byteLength >= 4 && data[0] === 0x50 && data[1] === 0x4b && (data[2] === 3 || data[2] === 5);
}

/** A file entry checked from the central directory, to be unpacked. */
interface PlannedFile {
  entry: yauzl.Entry;
  path: string;
  mode: number;
  label: string;
}

/** Reads a ZIP archive into confined entries, file bytes into `spool`; see the module comment. */
export async function unpackZip(source: ZipSource, limits: ArchiveLimits, spool: ArchiveSpool): Promise<ArchiveEntry[]> {
  // Names are decoded here (UTF-8), so that every name meets the template path rules, not yauzl's.
  const options: yauzl.Options = { lazyEntries: true, autoClose: false, decodeStrings: false, validateEntrySizes: false, strictFileNames: false };
  const zip = await (
    "path" in source
      ? yauzl.openPromise(source.path, options)
      : yauzl.fromBufferPromise(Buffer.from(source.data.buffer, source.data.byteOffset, source.data.byteLength), options)
  ).catch((err: unknown) => {
    throw asArchiveError(err);
  });
  try {
    if (zip.entryCount > limits.entriesMax) throw archiveError(`more than ${limits.entriesMax} entries`);
    const entries: ArchiveEntry[] = [];
    const files: PlannedFile[] = [];
    const seen = new Set<string>();
    let unpackedBytes = 0;
    try {
      for await (const entry of zip.eachEntry()) {
        const rawNameBytes = entry.fileName as unknown as Buffer;
        if (rawNameBytes.includes(0)) throw archiveError("entry name contains NUL");
        const rawName = utf8.decode(rawNameBytes);
        const label = JSON.stringify(rawName);
        if (entry.generalPurposeBitFlag & FLAG_ENCRYPTED) throw archiveError(`${label} is encrypted`);
        const unixMode = entry.versionMadeBy >> 8 === UNIX_HOST ? entry.externalFileAttributes >>> 16 : 0;
        const type = unixMode & S_IFMT;
        if (type !== 0 && type !== S_IFDIR && type !== S_IFREG)
          throw archiveError(`${label} is a link or special file; only files and directories are allowed`);
        const isDir = rawName.endsWith("/") || type === S_IFDIR || (entry.externalFileAttributes & MSDOS_DIRECTORY) !== 0;
        const path = normalizeTemplatePath(rawName, "archive entry", { archive: true, allowRoot: isDir });
        if (path === "") continue;
        if (seen.has(path)) throw archiveError(`duplicate entry ${path}`);
        seen.add(path);
        if (isDir) {
          entries.push({ path, kind: "dir", mode: unixMode & 0o7777 });
          continue;
        }
        if (entry.compressionMethod !== 0 && entry.compressionMethod !== 8)
          throw archiveError(`${label}: compression method ${entry.compressionMethod} is not supported (stored and deflate only)`);
        unpackedBytes += entry.uncompressedSize;
        if (unpackedBytes > limits.unpackedBytesMax) throw archiveError(`unpacks to more than ${limits.unpackedBytesMax} bytes`);
        files.push({ entry, path, mode: unixMode & 0o7777, label });
      }
    } catch (err) {
      throw asArchiveError(err);
    }
    for (const file of files) {
      const stream = await zip.openReadStreamPromise(file.entry).catch((err: unknown) => {
        throw asArchiveError(err, file.label);
      });
      const content = await spool.append(checked(stream, file.entry, file.label));
      entries.push({ path: file.path, kind: "file", mode: file.mode, content });
    }
    return entries;
  } finally {
    zip.close();
  }
}

/** The entry's bytes, refused past the declared size, short of it, or with another CRC-32. */
async function* checked(stream: AsyncIterable<Buffer> & { destroy(): void }, entry: yauzl.Entry, label: string): AsyncGenerator<Uint8Array> {
  let bytes = 0;
  let crc = 0;
  try {
    for await (const chunk of stream) {
      bytes += chunk.byteLength;
      if (bytes > entry.uncompressedSize) throw archiveError(`${label} inflates beyond its declared size`);
      crc = crc32(chunk, crc);
      yield chunk;
    }
  } catch (err) {
    throw asArchiveError(err, label);
  } finally {
    stream.destroy();
  }
  if (bytes !== entry.uncompressedSize) throw archiveError(`${label}: size differs from the declared size`);
  if (crc !== entry.crc32) throw archiveError(`${label}: CRC mismatch`);
}

/** A typed error as it is; anything yauzl or zlib reports as a 422 naming the archive (and entry). */
function asArchiveError(err: unknown, label?: string): Error {
  if (err instanceof ApiError) return err;
  const message = (err as Error).message ?? String(err);
  if (/multi-disk/.test(message)) return archiveError("multi-disk ZIP archives are not supported");
  if (/signature not found/i.test(message)) return archiveError("not a ZIP archive (no end of central directory)");
  if ((err as { code?: string }).code?.startsWith("Z_")) return archiveError(`${label ?? "entry"}: corrupt deflate data`);
  return archiveError(`${label ? `${label}: ` : ""}malformed ZIP archive (${message})`);
}
