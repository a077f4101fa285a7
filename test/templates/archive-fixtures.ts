/**
 * Hand-built archives for the template tests: a minimal ZIP writer (stored or deflated entries, any
 * name, attributes and declared size) and raw tar headers with any type flag, so tests can build the
 * hostile archives real tools refuse to write.
 */
import { crc32, deflateRawSync, gzipSync } from "node:zlib";

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
