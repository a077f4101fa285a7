/**
 * Filesystem {@link BlobStore}: blob `h` lives at `<directory>/<h[0..2]>/<h>`. A put writes a temp
 * file in `<directory>/tmp`, fsyncs it, renames it into place and fsyncs the fan-out directory, so
 * a blob is either absent or complete after a crash and present once put resolves. Reads check
 * the sha256 of what they return.
 */
import { createHash, randomBytes } from "node:crypto";
import { mkdir, open, readdir, readFile, rename, rm, stat, unlink } from "node:fs/promises";
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

function isNotFound(error: unknown): boolean {
  return typeof error === "object" && error !== null && (error as { code?: unknown }).code === "ENOENT";
}
