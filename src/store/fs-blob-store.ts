/**
 * Filesystem {@link BlobStore}: blob `h` lives at `<directory>/<h[0..2]>/<h>`. A put writes a temp
 * file in `<directory>/tmp`, fsyncs it, renames it into place and fsyncs the fan-out directory, so
 * a blob is either absent or complete after a crash and present once put resolves. Reads check
 * the sha256 of what they return.
 *
 * Beyond the port, for bulk work that must not hold the event loop (a restore): {@link
 * FsBlobStore.putStream} takes a blob as the chunks it arrives in, hashing each chunk as it is
 * written, and {@link FsBlobStore.copyTo} copies a blob out the same way; neither holds the whole
 * blob in memory or hashes it in one call.
 */
import { createHash, randomBytes } from "node:crypto";
import { createReadStream } from "node:fs";
import { mkdir, open, readdir, readFile, rename, rm, stat, unlink, type FileHandle } from "node:fs/promises";
import { join } from "node:path";
import { AssertionError } from "../shared/errors.js";
import type { BlobStore } from "./ports.js";

const hashPattern = /^[0-9a-f]{64}$/;

/** Hex sha256 of `data`. */
export function sha256Hex(data: Uint8Array): string {
  return createHash("sha256").update(data).digest("hex");
}

/** True when `hash` has the form of a blob name (64 lower-case hex digits). */
export function isBlobHash(hash: string): boolean {
  return hashPattern.test(hash);
}

/** Checks a blob read back from storage against its name; a mismatch is corruption. */
export function assertBlobIntact(hash: string, data: Uint8Array): void {
  if (sha256Hex(data) !== hash) throw new AssertionError(`blob ${hash} is corrupt: content hash differs`);
}

async function fsyncPath(path: string): Promise<void> {
  const handle = await open(path, "r");
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** Opens (creating when missing) a blob store under `directory`, removing leftover temp files. */
export async function openFsBlobStore(directory: string): Promise<FsBlobStore> {
  await mkdir(directory, { recursive: true });
  const tmp = join(directory, "tmp");
  await rm(tmp, { recursive: true, force: true }); // partial writes of a previous process
  await mkdir(tmp);
  return new FsBlobStore(directory);
}

/** The filesystem blob store; create it with {@link openFsBlobStore}. */
export class FsBlobStore implements BlobStore {
  constructor(private readonly directory: string) {}

  async has(hash: string): Promise<boolean> {
    if (!isBlobHash(hash)) return false;
    try {
      await stat(this.pathOf(hash));
      return true;
    } catch (error) {
      if (isNotFound(error)) return false;
      throw error;
    }
  }

  async put(data: Uint8Array): Promise<string> {
    const hash = sha256Hex(data);
    if (await this.has(hash)) return hash;
    const fanOut = join(this.directory, hash.slice(0, 2));
    await mkdir(fanOut, { recursive: true });
    const temp = join(this.directory, "tmp", `${hash}.${randomBytes(6).toString("hex")}`);
    const handle = await open(temp, "wx");
    try {
      await handle.writeFile(data);
      await handle.sync();
    } finally {
      await handle.close();
    }
    try {
      await rename(temp, this.pathOf(hash));
    } catch (error) {
      await unlink(temp).catch(() => undefined); // the rename's error is the one to report
      throw error;
    }
    await fsyncPath(fanOut); // makes the rename itself durable
    return hash;
  }

  /**
   * Stores a blob given as chunks, which must hash to `expectedHash`: each chunk is hashed as it is
   * written to a temp file, and the file is renamed into place only when the whole matches (an
   * AssertionError otherwise, with nothing stored). A blob already there is left as it is, its
   * chunks still read and checked.
   */
  async putStream(chunks: AsyncIterable<Uint8Array>, expectedHash: string): Promise<string> {
    if (!isBlobHash(expectedHash)) throw new AssertionError(`${JSON.stringify(expectedHash.slice(0, 80))} is not a blob name`);
    const hash = createHash("sha256");
    if (await this.has(expectedHash)) {
      for await (const chunk of chunks) hash.update(chunk);
      assertHashMatches(expectedHash, hash.digest("hex"));
      return expectedHash;
    }
    const fanOut = join(this.directory, expectedHash.slice(0, 2));
    await mkdir(fanOut, { recursive: true });
    const temp = join(this.directory, "tmp", `${expectedHash}.${randomBytes(6).toString("hex")}`);
    const handle = await open(temp, "wx");
    let renamed = false;
    try {
      try {
        for await (const chunk of chunks) {
          hash.update(chunk);
          await writeAll(handle, chunk);
        }
        assertHashMatches(expectedHash, hash.digest("hex"));
        await handle.sync();
      } finally {
        await handle.close();
      }
      await rename(temp, this.pathOf(expectedHash));
      renamed = true;
    } finally {
      if (!renamed) await unlink(temp).catch(() => undefined); // the first error is the one to report
    }
    await fsyncPath(fanOut); // makes the rename itself durable
    return expectedHash;
  }

  /**
   * Copies blob `hash` to `path` (through `<path>.partial`, fsynced, then renamed), reading and
   * hashing it chunk by chunk: false when there is no such blob, an AssertionError when its bytes
   * no longer match its name (then `path` is not written).
   */
  async copyTo(hash: string, path: string): Promise<boolean> {
    if (!isBlobHash(hash)) return false;
    const source = createReadStream(this.pathOf(hash));
    const opened = new Promise<boolean>((resolve, reject) => {
      source.once("open", () => resolve(true));
      source.once("error", (error) => (isNotFound(error) ? resolve(false) : reject(error)));
    });
    if (!(await opened)) return false;
    const digest = createHash("sha256");
    const temp = `${path}.partial`;
    const handle = await open(temp, "w");
    let renamed = false;
    try {
      try {
        for await (const chunk of source as AsyncIterable<Buffer>) {
          digest.update(chunk);
          await writeAll(handle, chunk);
        }
        if (digest.digest("hex") !== hash) throw new AssertionError(`blob ${hash} is corrupt: content hash differs`);
        await handle.sync();
      } finally {
        await handle.close();
      }
      await rename(temp, path);
      renamed = true;
    } finally {
      source.destroy();
      if (!renamed) await unlink(temp).catch(() => undefined);
    }
    return true;
  }

  async get(hash: string): Promise<Uint8Array | null> {
    if (!isBlobHash(hash)) return null;
    try {
      const data = new Uint8Array(await readFile(this.pathOf(hash)));
      assertBlobIntact(hash, data);
      return data;
    } catch (error) {
      if (isNotFound(error)) return null;
      throw error;
    }
  }

  async delete(hash: string): Promise<boolean> {
    if (!isBlobHash(hash)) return false;
    try {
      await unlink(this.pathOf(hash));
      return true;
    } catch (error) {
      if (isNotFound(error)) return false;
      throw error;
    }
  }

  async list(): Promise<string[]> {
    const hashes: string[] = [];
    for (const entry of await readdir(this.directory)) {
      if (!/^[0-9a-f]{2}$/.test(entry)) continue;
      for (const name of await readdir(join(this.directory, entry))) if (isBlobHash(name)) hashes.push(name);
    }
    return hashes.sort();
  }

  /** Nothing to release; present so every blob store can be closed alike. */
  async close(): Promise<void> {}

  private pathOf(hash: string): string {
    return join(this.directory, hash.slice(0, 2), hash);
  }
}

function assertHashMatches(expected: string, actual: string): void {
  if (actual !== expected) throw new AssertionError(`blob bytes hash to ${actual}, not to their name ${expected}`);
}

async function writeAll(handle: FileHandle, chunk: Uint8Array): Promise<void> {
  for (let at = 0; at < chunk.byteLength;) at += (await handle.write(chunk, at)).bytesWritten;
}

function isNotFound(error: unknown): boolean {
  return typeof error === "object" && error !== null && (error as { code?: unknown }).code === "ENOENT";
}
