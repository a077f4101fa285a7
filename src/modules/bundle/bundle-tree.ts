/**
 * Lays a checked bundle's files out as a directory tree (what a module's worker imports from):
 * written into a fresh temporary sibling, then renamed into place, so a tree is there whole or not
 * at all. Paths were confined when the archive was read (`normalizeTemplatePath`), so none leaves it.
 */
import { createReadStream, createWriteStream } from "node:fs";
import { mkdir, rename, rm } from "node:fs/promises";
import { dirname, join } from "node:path";
import { pipeline } from "node:stream/promises";
import type { FileContent } from "../../templates/file-content.js";

/** Writes `files` under `target` (replacing what is there); returns `target`. */
export async function writeBundleTree(files: ReadonlyMap<string, FileContent>, target: string): Promise<string> {
  const staging = `${target}.staging-${process.pid}-${Math.random().toString(36).slice(2, 10)}`;
  await rm(staging, { recursive: true, force: true });
  try {
    for (const [path, content] of files) {
      const file = join(staging, path);
      await mkdir(dirname(file), { recursive: true });
      const out = createWriteStream(file, { flags: "wx", mode: 0o644 });
      await pipeline(async function* () {
        for (const source of content.sources.values()) {
          if ("data" in source) yield source.data;
          else if (source.size > 0) yield* createReadStream(source.path, { start: source.offset, end: source.offset + source.size - 1 });
        }
      }, out);
    }
    await mkdir(staging, { recursive: true });
    await rm(target, { recursive: true, force: true });
    await mkdir(dirname(target), { recursive: true });
    await rename(staging, target);
    return target;
  } catch (error) {
    await rm(staging, { recursive: true, force: true });
    throw error;
  }
}
