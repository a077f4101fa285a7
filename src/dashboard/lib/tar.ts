/**
 * A tar archive (POSIX ustar) of a few small in-memory files (gzipped by lib/gzip.ts): enough for the
 * diagnostics bundle, which the page assembles itself so that it downloads the same tar.gz as
 * `cloudctl diagnostics bundle`. Regular files only; a name is at most 100 bytes of ASCII (no prefix
 * field), a file under 8 GiB (eleven octal digits).
 */

export interface TarEntry {
  name: string;
  content: string | Uint8Array;
  /** Permission bits; 0o600 by default (the bundle is support data, not for everyone). */
  mode?: number;
  mtimeMs: number;
}

const BLOCK_BYTES = 512;
const NAME_BYTES_MAX = 100;

function writeText(block: Uint8Array, offset: number, length: number, text: string): void {
  for (let i = 0; i < text.length && i < length; i++) block[offset + i] = text.charCodeAt(i);
}

/** `value` as zero-padded octal in a field of `length` bytes (digits, then a NUL). */
function octal(value: number, length: number): string {
  const digits = Math.floor(value).toString(8);
  if (digits.length > length - 1) throw new RangeError(`${value} does not fit a tar field of ${length} bytes`);
  return digits.padStart(length - 1, "0");
}

function header(name: string, size: number, mode: number, mtimeMs: number): Uint8Array {
  if (!/^[\x20-\x7e]+$/.test(name) || name.length > NAME_BYTES_MAX)
    throw new RangeError(`tar entry name must be 1 to ${NAME_BYTES_MAX} printable ASCII characters: ${name}`);
  const block = new Uint8Array(BLOCK_BYTES);
  writeText(block, 0, 100, name);
  writeText(block, 100, 8, octal(mode, 8));
  writeText(block, 108, 8, octal(0, 8));
  writeText(block, 116, 8, octal(0, 8));
  writeText(block, 124, 12, octal(size, 12));
  writeText(block, 136, 12, octal(mtimeMs / 1000, 12));
  writeText(block, 148, 8, "        ");
  writeText(block, 156, 1, "0");
  writeText(block, 257, 6, "ustar\0");
  writeText(block, 263, 2, "00");
  let sum = 0;
  for (const byte of block) sum += byte;
  writeText(block, 148, 8, `${sum.toString(8).padStart(6, "0")}\0 `);
  return block;
}

/** The archive of `entries`, in order, ending with the two zero blocks. */
export function tarArchive(entries: readonly TarEntry[]): Uint8Array {
  const encoder = new TextEncoder();
  const parts: Uint8Array[] = [];
  let total = 0;
  for (const entry of entries) {
    const body = typeof entry.content === "string" ? encoder.encode(entry.content) : entry.content;
    const head = header(entry.name, body.length, entry.mode ?? 0o600, entry.mtimeMs);
    const padded = Math.ceil(body.length / BLOCK_BYTES) * BLOCK_BYTES;
    parts.push(head, body);
    if (padded > body.length) parts.push(new Uint8Array(padded - body.length));
    total += BLOCK_BYTES + padded;
  }
  parts.push(new Uint8Array(2 * BLOCK_BYTES));
  total += 2 * BLOCK_BYTES;
  const out = new Uint8Array(total);
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}
