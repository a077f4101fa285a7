/**
 * ZIP reading (stored and deflated entries) from the central directory. Refuses encrypted, ZIP64,
 * multi-disk and symbolic-link entries, unsafe paths, CRC mismatches, and archives above the
 * entry-count or unpacked-size limits; each entry inflates with an output bound equal to its declared
 * size, so a zip bomb stops at the first byte beyond what it declared.
 */
import { crc32, inflateRawSync } from "node:zlib";
import { archiveError, type ArchiveEntry, type ArchiveLimits } from "./archive-limits.js";
import { normalizeTemplatePath } from "../wire/template-paths.js";

const EOCD_SIGNATURE = 0x06054b50;
const CENTRAL_SIGNATURE = 0x02014b50;
const LOCAL_SIGNATURE = 0x04034b50;
const EOCD_BYTES = 22;
const COMMENT_BYTES_MAX = 0xffff;
const S_IFMT = 0o170000;
const S_IFDIR = 0o040000;
const S_IFREG = 0o100000;
const UNIX_HOST = 3;
const utf8 = new TextDecoder("utf-8", { fatal: false });

/** True when `data` starts like a ZIP archive (local header or empty-archive end record). */
export function looksLikeZip(data: Uint8Array): boolean {
  return data.byteLength >= 4 && data[0] === 0x50 && data[1] === 0x4b && (data[2] === 3 || data[2] === 5);
}

function findEndOfCentralDirectory(view: DataView): number {
  const lowest = Math.max(0, view.byteLength - EOCD_BYTES - COMMENT_BYTES_MAX);
  for (let at = view.byteLength - EOCD_BYTES; at >= lowest; at--) {
    if (view.getUint32(at, true) === EOCD_SIGNATURE) return at;
  }
  throw archiveError("not a ZIP archive (no end of central directory)");
}

/** Reads a ZIP archive into confined entries; see the module comment for what is refused. */
export function readZip(archive: Uint8Array, limits: ArchiveLimits): ArchiveEntry[] {
  const view = new DataView(archive.buffer, archive.byteOffset, archive.byteLength);
  const eocd = findEndOfCentralDirectory(view);
  const disk = view.getUint16(eocd + 4, true);
  const count = view.getUint16(eocd + 10, true);
  const directoryBytes = view.getUint32(eocd + 12, true);
  const directoryOffset = view.getUint32(eocd + 16, true);
  if (disk !== 0) throw archiveError("multi-disk ZIP archives are not supported");
  if (count === 0xffff || directoryOffset === 0xffffffff) throw archiveError("ZIP64 archives are not supported");
  if (count > limits.entriesMax) throw archiveError(`more than ${limits.entriesMax} entries`);
  if (directoryOffset + directoryBytes > eocd) throw archiveError("central directory out of bounds");
  const entries: ArchiveEntry[] = [];
  const seen = new Set<string>();
  let unpackedBytes = 0;
  let at = directoryOffset;
  for (let index = 0; index < count; index++) {
    if (at + 46 > eocd || view.getUint32(at, true) !== CENTRAL_SIGNATURE) throw archiveError("malformed central directory");
    const madeBy = view.getUint16(at + 4, true);
    const flags = view.getUint16(at + 8, true);
    const method = view.getUint16(at + 10, true);
    const crc = view.getUint32(at + 16, true);
    const compressedBytes = view.getUint32(at + 20, true);
    const declaredBytes = view.getUint32(at + 24, true);
    const nameBytes = view.getUint16(at + 28, true);
    const extraBytes = view.getUint16(at + 30, true);
    const commentBytes = view.getUint16(at + 32, true);
    const externalAttributes = view.getUint32(at + 38, true);
    const localOffset = view.getUint32(at + 42, true);
    const rawNameBytes = archive.subarray(at + 46, at + 46 + nameBytes);
    at += 46 + nameBytes + extraBytes + commentBytes;
    if (rawNameBytes.includes(0)) throw archiveError("entry name contains NUL");
    const rawName = utf8.decode(rawNameBytes);
    const label = JSON.stringify(rawName);
    if (flags & 0x1) throw archiveError(`${label} is encrypted`);
    if (compressedBytes === 0xffffffff || declaredBytes === 0xffffffff || localOffset === 0xffffffff) throw archiveError("ZIP64 entries are not supported");
    const unixMode = madeBy >> 8 === UNIX_HOST ? externalAttributes >>> 16 : 0;
    const type = unixMode & S_IFMT;
    if (type !== 0 && type !== S_IFDIR && type !== S_IFREG) throw archiveError(`${label} is a link or special file; only files and directories are allowed`);
    const isDir = rawName.endsWith("/") || type === S_IFDIR || (externalAttributes & 0x10) !== 0;
    const path = normalizeTemplatePath(rawName, "archive entry", { archive: true, allowRoot: isDir });
    if (path === "") continue;
    if (seen.has(path)) throw archiveError(`duplicate entry ${path}`);
    seen.add(path);
    if (isDir) {
      entries.push({ path, kind: "dir", mode: unixMode & 0o7777, data: new Uint8Array(0) });
      continue;
    }
    unpackedBytes += declaredBytes;
    if (unpackedBytes > limits.unpackedBytesMax) throw archiveError(`unpacks to more than ${limits.unpackedBytesMax} bytes`);
    if (localOffset + 30 > archive.byteLength || view.getUint32(localOffset, true) !== LOCAL_SIGNATURE) throw archiveError(`${label}: malformed local header`);
    const dataStart = localOffset + 30 + view.getUint16(localOffset + 26, true) + view.getUint16(localOffset + 28, true);
    if (dataStart + compressedBytes > archive.byteLength) throw archiveError(`${label}: data out of bounds`);
    const compressed = archive.subarray(dataStart, dataStart + compressedBytes);
    let data: Uint8Array;
    if (method === 0) {
      data = compressed;
    } else if (method === 8) {
      try {
        data = inflateRawSync(compressed, { maxOutputLength: Math.max(declaredBytes, 1) });
      } catch (err) {
        if (err instanceof RangeError || (err as { code?: string }).code === "ERR_BUFFER_TOO_LARGE") throw archiveError(`${label} inflates beyond its declared size`);
        throw archiveError(`${label}: corrupt deflate data`);
      }
    } else {
      throw archiveError(`${label}: compression method ${method} is not supported (stored and deflate only)`);
    }
    if (data.byteLength !== declaredBytes) throw archiveError(`${label}: size differs from the declared size`);
    if (crc32(data) !== crc) throw archiveError(`${label}: CRC mismatch`);
    entries.push({ path, kind: "file", mode: unixMode & 0o7777, data });
  }
  return entries;
}
