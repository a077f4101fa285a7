/**
 * Reads a module bundle on the operator's machine for `cloudctl module doctor`: a `.tgz`/`.tar.gz`,
 * a plain `.tar` or a `.zip`, into memory (nothing is written to disk, so a hostile path cannot land
 * anywhere). Every entry is kept with what is wrong with it (a link, a special file, an unsafe path,
 * a duplicate), so the doctor reports each problem instead of stopping at the first; the sizes are
 * bounded like the controller bounds them.
 */
import { readFile } from "node:fs/promises";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { createGunzip } from "node:zlib";
import tarStream from "tar-stream";
import yauzl from "yauzl";

/** Largest bundle file the controller accepts (src/modules/bundle/bundle-limits.ts). */
export const BUNDLE_BYTES_MAX = 64 * 1024 * 1024;
/** Entries read at most; the controller refuses more. */
export const BUNDLE_ENTRIES_MAX = 10_000;
/** Bytes unpacked at most, summed over the entries. */
export const BUNDLE_UNPACKED_BYTES_MAX = 256 * 1024 * 1024;

/** One entry of a bundle: its path as written, its bytes (files only) and the problem with it, if any. */
export interface BundleEntry {
  path: string;
  kind: "file" | "dir" | "other";
  data: Buffer | null;
  problem: string | null;
}

/** The problem with an entry name, or null when it is a safe relative path. */
export function unsafePathProblem(name: string): string | null {
  if (name.includes("\0")) return "its name contains NUL";
  if (name.includes("\\")) return "its name contains a backslash";
  if (name.startsWith("/") || /^[A-Za-z]:/.test(name)) return "its path is absolute";
  if (name.split("/").some((part) => part === "..")) return "its path leaves the bundle (..)";
  return null;
}

function normalized(name: string): string {
  return name.replace(/^(\.\/)+/, "").replace(/\/+$/, "");
}

/** True when `data` starts like a ZIP archive. */
function looksLikeZip(data: Buffer): boolean {
  return data.byteLength >= 4 && data[0] === 0x50 && data[1] === 0x4b && (data[2] === 3 || data[2] === 5);
}

/** The entries of the bundle at `path`; throws (with the reason) when it is not a readable archive or breaks a bound. */
export async function readBundleEntries(path: string): Promise<BundleEntry[]> {
  const data = await readFile(path);
  if (data.byteLength > BUNDLE_BYTES_MAX) throw new Error(`the file is larger than ${BUNDLE_BYTES_MAX / 1024 ** 2} MiB, the most a controller accepts`);
  const entries = looksLikeZip(data) ? await readZip(data) : await readTar(data);
  const seen = new Set<string>();
  for (const entry of entries) {
    entry.problem ??= unsafePathProblem(entry.path);
    entry.path = normalized(entry.path);
    if (entry.kind !== "dir" && seen.has(entry.path)) entry.problem ??= "it is in the bundle twice";
    seen.add(entry.path);
  }
  return entries;
}

class Budget {
  private entries = 0;
  private bytes = 0;
  count(size: number): void {
    if (++this.entries > BUNDLE_ENTRIES_MAX) throw new Error(`more than ${BUNDLE_ENTRIES_MAX} entries`);
    this.bytes += size;
    if (this.bytes > BUNDLE_UNPACKED_BYTES_MAX) throw new Error(`unpacks to more than ${BUNDLE_UNPACKED_BYTES_MAX / 1024 ** 2} MiB`);
  }
}

async function readTar(data: Buffer): Promise<BundleEntry[]> {
  const gzipped = data[0] === 0x1f && data[1] === 0x8b;
  const extract = tarStream.extract({ allowUnknownFormat: true } as Parameters<typeof tarStream.extract>[0]);
  const entries: BundleEntry[] = [];
  const budget = new Budget();
  const reading = (async () => {
    for await (const entry of extract) {
      const { name, type, size } = entry.header;
      budget.count(size ?? 0);
      if (type === "file" || type === "contiguous-file") {
        const chunks: Buffer[] = [];
        for await (const chunk of entry as AsyncIterable<Buffer>) chunks.push(chunk);
        entries.push({ path: name, kind: "file", data: Buffer.concat(chunks), problem: null });
        continue;
      }
      entry.resume();
      if (type === "directory") entries.push({ path: name, kind: "dir", data: null, problem: null });
      else
        entries.push({
          path: name,
          kind: "other",
          data: null,
          problem: type === "symlink" || type === "link" ? "it is a link" : `it is a ${type}, not a file`,
        });
    }
  })();
  try {
    await Promise.all([
      pipeline([Readable.from([data]), ...(gzipped ? [createGunzip()] : []), extract] as unknown as [Readable, NodeJS.WritableStream]),
      reading,
    ]);
  } catch (error) {
    extract.destroy();
    throw new Error(`not a readable ${gzipped ? "tar.gz" : "tar"} archive: ${(error as Error).message}`, { cause: error });
  }
  return entries;
}

const S_IFMT = 0o170000;
const S_IFLNK = 0o120000;
const S_IFREG = 0o100000;
const S_IFDIR = 0o040000;

async function readZip(data: Buffer): Promise<BundleEntry[]> {
  const zip = await yauzl.fromBufferPromise(data, { lazyEntries: true, autoClose: false, strictFileNames: false }).catch((error: Error) => {
    throw new Error(`not a readable ZIP archive: ${error.message}`, { cause: error });
  });
  const entries: BundleEntry[] = [];
  const budget = new Budget();
  try {
    for await (const entry of zip.eachEntry()) {
      budget.count(entry.uncompressedSize);
      const mode = (entry.externalFileAttributes >>> 16) & S_IFMT;
      const isDir = entry.fileName.endsWith("/") || mode === S_IFDIR;
      if (isDir) {
        entries.push({ path: entry.fileName, kind: "dir", data: null, problem: null });
        continue;
      }
      if (mode !== 0 && mode !== S_IFREG) {
        entries.push({ path: entry.fileName, kind: "other", data: null, problem: mode === S_IFLNK ? "it is a link" : "it is not a regular file" });
        continue;
      }
      const chunks: Buffer[] = [];
      for await (const chunk of (await zip.openReadStreamPromise(entry)) as AsyncIterable<Buffer>) chunks.push(chunk);
      entries.push({ path: entry.fileName, kind: "file", data: Buffer.concat(chunks), problem: null });
    }
  } catch (error) {
    throw new Error(`not a readable ZIP archive: ${(error as Error).message}`, { cause: error });
  } finally {
    zip.close();
  }
  return entries;
}
