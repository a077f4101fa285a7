/**
 * tar.gz reading and writing (POSIX ustar, with PAX `path` records for long names). The reader
 * accepts regular files and directories only: symbolic links, hard links, devices and FIFOs are
 * refused, as are unsafe paths (see `paths.ts`), so an archive can never write outside a template.
 */
import { gunzipSync, gzipSync } from "node:zlib";
import { archiveError, type ArchiveEntry, type ArchiveLimits } from "./archive-limits.js";
import { normalizeTemplatePath } from "../wire/template-paths.js";

const BLOCK_BYTES = 512;
const textDecoder = new TextDecoder("utf-8", { fatal: false });

/** One member to write: a directory, or a file with its bytes. */
export interface TarMember {
  path: string;
  kind: "file" | "dir";
  mode: number;
  data?: Uint8Array;
  mtimeSeconds?: number;
}

function writeString(block: Uint8Array, offset: number, length: number, value: string): void {
  const bytes = new TextEncoder().encode(value);
  block.set(bytes.subarray(0, length), offset);
}

function writeOctal(block: Uint8Array, offset: number, length: number, value: number): void {
  writeString(block, offset, length, `${value.toString(8).padStart(length - 1, "0")}\0`);
}

function header(name: string, prefix: string, typeflag: string, mode: number, size: number, mtimeSeconds: number): Uint8Array {
  const block = new Uint8Array(BLOCK_BYTES);
  writeString(block, 0, 100, name);
  writeOctal(block, 100, 8, mode & 0o7777);
  writeOctal(block, 108, 8, 0);
  writeOctal(block, 116, 8, 0);
  writeOctal(block, 124, 12, size);
  writeOctal(block, 136, 12, mtimeSeconds);
  block.fill(0x20, 148, 156);
  writeString(block, 156, 1, typeflag);
  writeString(block, 257, 6, "ustar\0");
  writeString(block, 263, 2, "00");
  writeString(block, 345, 155, prefix);
  let sum = 0;
  for (const byte of block) sum += byte;
  writeString(block, 148, 8, `${sum.toString(8).padStart(6, "0")}\0 `);
  return block;
}

/** Splits a path into ustar prefix and name, or null when it does not fit. */
function splitUstar(path: string): [string, string] | null {
  const bytes = Buffer.byteLength(path);
  if (bytes <= 100) return ["", path];
  for (let at = path.indexOf("/"); at >= 0; at = path.indexOf("/", at + 1)) {
    const prefix = path.slice(0, at);
    const name = path.slice(at + 1);
    if (Buffer.byteLength(prefix) <= 155 && Buffer.byteLength(name) <= 100) return [prefix, name];
  }
  return null;
}

function paxRecord(key: string, value: string): string {
  const bodyBytes = Buffer.byteLength(` ${key}=${value}\n`);
  let length = bodyBytes + 1;
  while (bodyBytes + String(length).length !== length) length = bodyBytes + String(length).length;
  return `${length} ${key}=${value}\n`;
}

function padding(size: number): Uint8Array {
  const rest = size % BLOCK_BYTES;
  return new Uint8Array(rest === 0 ? 0 : BLOCK_BYTES - rest);
}

/** Encodes members as an uncompressed tar stream (chunks), ending with the two zero blocks. */
export function* tarChunks(members: Iterable<TarMember>): Generator<Uint8Array> {
  for (const member of members) {
    const path = member.kind === "dir" ? `${member.path}/` : member.path;
    const size = member.kind === "dir" ? 0 : (member.data?.byteLength ?? 0);
    const mtime = member.mtimeSeconds ?? 0;
    const typeflag = member.kind === "dir" ? "5" : "0";
    let split = splitUstar(path);
    if (!split) {
      const pax = new TextEncoder().encode(paxRecord("path", path));
      yield header("PaxHeader", "", "x", 0o644, pax.byteLength, mtime);
      yield pax;
      yield padding(pax.byteLength);
      split = ["", path.slice(0, 99)];
    }
    yield header(split[1], split[0], typeflag, member.mode, size, mtime);
    if (size > 0) {
      yield member.data!;
      yield padding(size);
    }
  }
  yield new Uint8Array(BLOCK_BYTES * 2);
}

/** Encodes members as a gzip-compressed tar archive. */
export function writeTarGz(members: Iterable<TarMember>): Buffer {
  return gzipSync(Buffer.concat([...tarChunks(members)]), { level: 6 });
}

function readString(block: Uint8Array, offset: number, length: number): string {
  const slice = block.subarray(offset, offset + length);
  const end = slice.indexOf(0);
  return textDecoder.decode(end < 0 ? slice : slice.subarray(0, end));
}

function readOctal(block: Uint8Array, offset: number, length: number, what: string): number {
  const text = readString(block, offset, length).trim();
  if (text === "") return 0;
  if (!/^[0-7]+$/.test(text)) throw archiveError(`malformed ${what} in a tar header`);
  return parseInt(text, 8);
}

function parsePax(data: Uint8Array): Map<string, string> {
  const records = new Map<string, string>();
  const text = textDecoder.decode(data);
  let at = 0;
  while (at < text.length) {
    const space = text.indexOf(" ", at);
    if (space < 0) break;
    const length = Number(text.slice(at, space));
    if (!Number.isInteger(length) || length <= 0) throw archiveError("malformed PAX record");
    const record = text.slice(space + 1, at + length - 1);
    const eq = record.indexOf("=");
    if (eq > 0) records.set(record.slice(0, eq), record.slice(eq + 1));
    at += length;
  }
  return records;
}

/**
 * Reads a tar.gz (or plain tar) archive into confined entries. Refuses links, special files, unsafe
 * paths, malformed headers, and archives above `limits` (checked while decompressing).
 */
export function readTarGz(archive: Uint8Array, limits: ArchiveLimits): ArchiveEntry[] {
  let tar: Uint8Array;
  if (archive[0] === 0x1f && archive[1] === 0x8b) {
    try {
      // The tar framing adds at most one header block per entry plus the end blocks.
      tar = gunzipSync(archive, { maxOutputLength: limits.unpackedBytesMax + (limits.entriesMax + 4) * BLOCK_BYTES * 3 });
    } catch (err) {
      if (err instanceof RangeError || (err as { code?: string }).code === "ERR_BUFFER_TOO_LARGE") {
        throw archiveError(`unpacks to more than ${limits.unpackedBytesMax} bytes`);
      }
      throw archiveError("not a valid gzip stream");
    }
  } else {
    tar = archive;
  }
  const entries: ArchiveEntry[] = [];
  const seen = new Set<string>();
  let unpackedBytes = 0;
  let offset = 0;
  let pendingPath: string | undefined;
  while (offset + BLOCK_BYTES <= tar.byteLength) {
    const block = tar.subarray(offset, offset + BLOCK_BYTES);
    if (block.every((b) => b === 0)) break;
    let sum = 0;
    for (let i = 0; i < BLOCK_BYTES; i++) sum += i >= 148 && i < 156 ? 0x20 : block[i];
    if (readOctal(block, 148, 8, "checksum") !== sum) throw archiveError("tar header checksum mismatch");
    const size = readOctal(block, 124, 12, "size");
    const typeflag = String.fromCharCode(block[156] || 0x30);
    const dataStart = offset + BLOCK_BYTES;
    const dataEnd = dataStart + size;
    if (dataEnd > tar.byteLength) throw archiveError("truncated tar entry");
    const data = tar.subarray(dataStart, dataEnd);
    offset = dataStart + Math.ceil(size / BLOCK_BYTES) * BLOCK_BYTES;
    if (typeflag === "x") {
      pendingPath = parsePax(data).get("path") ?? pendingPath;
      continue;
    }
    if (typeflag === "L") {
      pendingPath = readString(data, 0, data.byteLength);
      continue;
    }
    if (typeflag === "g") continue;
    const prefix = readString(block, 345, 155);
    const rawName = pendingPath ?? (prefix ? `${prefix}/${readString(block, 0, 100)}` : readString(block, 0, 100));
    pendingPath = undefined;
    if (typeflag === "1" || typeflag === "2" || typeflag === "K") throw archiveError(`${JSON.stringify(rawName)} is a link; links are not allowed`);
    if (typeflag !== "0" && typeflag !== "5" && typeflag !== "7") throw archiveError(`${JSON.stringify(rawName)} is not a regular file or directory`);
    if (rawName.includes("\0")) throw archiveError("entry name contains NUL");
    const kind = typeflag === "5" || rawName.endsWith("/") ? "dir" : "file";
    const path = normalizeTemplatePath(rawName, "archive entry", { archive: true, allowRoot: kind === "dir" });
    if (path === "") continue;
    if (seen.has(path)) throw archiveError(`duplicate entry ${path}`);
    seen.add(path);
    if (entries.length >= limits.entriesMax) throw archiveError(`more than ${limits.entriesMax} entries`);
    unpackedBytes += kind === "file" ? size : 0;
    if (unpackedBytes > limits.unpackedBytesMax) throw archiveError(`unpacks to more than ${limits.unpackedBytesMax} bytes`);
    entries.push({ path, kind, mode: readOctal(block, 100, 8, "mode"), data: kind === "file" ? data : new Uint8Array(0) });
  }
  return entries;
}
