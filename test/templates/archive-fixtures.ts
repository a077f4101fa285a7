/**
 * Hand-built archives for the template tests: a minimal ZIP writer (stored or deflated entries, any
 * name, attributes and declared size) and raw tar headers with any type flag, so tests can build the
 * hostile archives real tools refuse to write; and the production readers and writer wrapped for
 * bytes in memory (tiny archives in a test, synchronous zlib is fine here).
 */
import { randomBytes } from "node:crypto";
import { createReadStream } from "node:fs";
import { readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { Readable } from "node:stream";
import { crc32, deflateRawSync, gzipSync } from "node:zlib";
import type { ArchiveEntry, ArchiveLimits } from "../../src/templates/archive-limits.js";
import { ArchiveSpool } from "../../src/templates/archive-spool.js";
import { packTarGz, unpackTar, type TarMember } from "../../src/templates/tar.js";
import { unpackZip } from "../../src/templates/zip.js";

/** One ZIP member. */
export interface ZipMember {
  name: string;
  data?: Uint8Array | string;
  method?: 0 | 8;
  /** Unix mode written into the external attributes (host = Unix). */
  unixMode?: number;
  /** Uncompressed size to declare instead of the real one. */
  declaredBytes?: number;
}

/** Builds a ZIP archive from members. */
export function buildZip(members: readonly ZipMember[]): Buffer {
  const locals: Buffer[] = [];
  const centrals: Buffer[] = [];
  let offset = 0;
  for (const m of members) {
    const data = typeof m.data === "string" ? Buffer.from(m.data) : Buffer.from(m.data ?? new Uint8Array(0));
    const method = m.method ?? 8;
    const body = method === 8 ? deflateRawSync(data) : data;
    const name = Buffer.from(m.name, "utf8");
    const crc = crc32(data);
    const size = m.declaredBytes ?? data.byteLength;
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4);
    local.writeUInt16LE(0x800, 6);
    local.writeUInt16LE(method, 8);
    local.writeUInt32LE(crc, 14);
    local.writeUInt32LE(body.byteLength, 18);
    local.writeUInt32LE(size, 22);
    local.writeUInt16LE(name.byteLength, 26);
    locals.push(local, name, body);
    const central = Buffer.alloc(46);
    central.writeUInt32LE(0x02014b50, 0);
    central.writeUInt16LE((3 << 8) | 20, 4);
    central.writeUInt16LE(20, 6);
    central.writeUInt16LE(0x800, 8);
    central.writeUInt16LE(method, 10);
    central.writeUInt32LE(crc, 16);
    central.writeUInt32LE(body.byteLength, 20);
    central.writeUInt32LE(size, 24);
    central.writeUInt16LE(name.byteLength, 28);
    central.writeUInt32LE(((m.unixMode ?? (m.name.endsWith("/") ? 0o040755 : 0o100644)) << 16) >>> 0, 38);
    central.writeUInt32LE(offset, 42);
    centrals.push(central, name);
    offset += local.byteLength + name.byteLength + body.byteLength;
  }
  const directory = Buffer.concat(centrals);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(members.length, 8);
  end.writeUInt16LE(members.length, 10);
  end.writeUInt32LE(directory.byteLength, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...locals, directory, end]);
}

/** One raw tar member: any name (written verbatim into the 100-byte field) and type flag. */
export interface RawTarMember {
  name: string;
  typeflag?: string;
  data?: string | Uint8Array;
  linkName?: string;
}

/** Builds a gzip-compressed tar from raw members. */
export function buildRawTarGz(members: readonly RawTarMember[]): Buffer {
  const blocks: Buffer[] = [];
  for (const m of members) {
    const data = typeof m.data === "string" ? Buffer.from(m.data) : Buffer.from(m.data ?? new Uint8Array(0));
    const header = Buffer.alloc(512);
    Buffer.from(m.name, "utf8").copy(header, 0, 0, 100);
    header.write("0000644\0", 100);
    header.write("0000000\0", 108);
    header.write("0000000\0", 116);
    header.write(`${data.byteLength.toString(8).padStart(11, "0")}\0`, 124);
    header.write("00000000000\0", 136);
    header.fill(0x20, 148, 156);
    header.write(m.typeflag ?? "0", 156);
    if (m.linkName) header.write(m.linkName, 157);
    header.write("ustar\0", 257);
    header.write("00", 263);
    let sum = 0;
    for (const byte of header) sum += byte;
    header.write(`${sum.toString(8).padStart(6, "0")}\0 `, 148);
    blocks.push(header, data, Buffer.alloc((512 - (data.byteLength % 512)) % 512));
  }
  blocks.push(Buffer.alloc(1024));
  return gzipSync(Buffer.concat(blocks));
}

/** A member to pack in a test: a directory, or a file with its bytes in memory. */
export interface TestTarMember {
  path: string;
  kind: "file" | "dir";
  mode: number;
  data?: Uint8Array;
}

/** Every byte of a stream. */
export async function collect(stream: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const parts: Uint8Array[] = [];
  for await (const part of stream) parts.push(part);
  return Buffer.concat(parts);
}

/** Members packed by the production writer ({@link packTarGz}), as the bytes of a tar.gz. */
export async function packTarGzBytes(members: readonly TestTarMember[]): Promise<Buffer> {
  const tarMembers: TarMember[] = members.map((m) =>
    m.kind === "dir"
      ? { path: m.path, kind: "dir", mode: m.mode }
      : {
          path: m.path,
          kind: "file",
          mode: m.mode,
          size: m.data?.byteLength ?? 0,
          data: async function* () {
            if (m.data && m.data.byteLength > 0) yield m.data;
          },
        },
  );
  return collect(packTarGz(tarMembers));
}

/** An unpacked entry with its bytes read back from the spool. */
export interface UnpackedTestEntry {
  path: string;
  kind: "file" | "dir";
  mode: number;
  data: Uint8Array;
}

async function withSpool(unpack: (spool: ArchiveSpool) => Promise<ArchiveEntry[]>): Promise<UnpackedTestEntry[]> {
  const spool = await ArchiveSpool.create(tmpdir());
  try {
    const entries = await unpack(spool);
    const out: UnpackedTestEntry[] = [];
    for (const entry of entries) {
      if (entry.kind === "dir") {
        out.push({ ...entry, data: new Uint8Array(0) });
        continue;
      }
      const parts: Buffer[] = [];
      for (const source of entry.content.sources.values()) {
        if ("data" in source) parts.push(Buffer.from(source.data));
        else parts.push((await readFile(source.path)).subarray(source.offset, source.offset + source.size));
      }
      out.push({ path: entry.path, kind: "file", mode: entry.mode, data: Buffer.concat(parts) });
    }
    return out;
  } finally {
    await spool.dispose();
  }
}

/** A tar.gz (or plain tar) in memory, unpacked by the production reader. */
export function unpackTarBytes(archive: Uint8Array, limits: ArchiveLimits): Promise<UnpackedTestEntry[]> {
  return withSpool((spool) => unpackTar(Readable.from([archive]), limits, spool));
}

/** A ZIP in memory or on disk, unpacked by the production reader. */
export function unpackZipOf(source: Uint8Array | { path: string }, limits: ArchiveLimits): Promise<UnpackedTestEntry[]> {
  return withSpool((spool) => unpackZip(source instanceof Uint8Array ? { data: source } : source, limits, spool));
}

/** A multipart/form-data body with one part `file` streamed from `path`. */
export function multipartFromFile(path: string, fileName: string): { body: ReadableStream<Uint8Array>; contentType: string } {
  const boundary = `----cloud-test-${randomBytes(8).toString("hex")}`;
  async function* parts(): AsyncGenerator<Uint8Array> {
    yield Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${fileName}"\r\nContent-Type: application/gzip\r\n\r\n`);
    for await (const chunk of createReadStream(path)) yield chunk as Buffer;
    yield Buffer.from(`\r\n--${boundary}--\r\n`);
  }
  const iterator = parts();
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      const next = await iterator.next();
      if (next.done) controller.close();
      else controller.enqueue(next.value);
    },
  });
  return { body, contentType: `multipart/form-data; boundary=${boundary}` };
}
