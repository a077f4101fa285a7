/**
 * Packs a module directory (its `META-INF/cloud/module.yaml`, the backend files, an optional
 * `META-INF/frontend/`) into a bundle: a gzip-compressed tar of regular files in sorted order with
 * no times, so the same directory always gives the same bytes (and the same signature). Symbolic
 * links and special files are refused, as the controller would refuse them.
 */
import { createReadStream, createWriteStream } from "node:fs";
import { lstat, readdir } from "node:fs/promises";
import { join, relative, sep } from "node:path";
import { pipeline } from "node:stream/promises";
import { packTarGz, type TarMember } from "../../templates/tar.js";

/** The files of `dir`, relative with `/`, sorted; `exclude` skips relative paths (and their contents). */
export async function bundleFilesOf(
  dir: string,
  exclude: (relativePath: string) => boolean = () => false,
): Promise<{ path: string; size: number; full: string }[]> {
  const out: { path: string; size: number; full: string }[] = [];
  async function walk(current: string): Promise<void> {
    for (const name of (await readdir(current)).sort()) {
      const full = join(current, name);
      const path = relative(dir, full).split(sep).join("/");
      if (exclude(path)) continue;
      const stat = await lstat(full);
      if (stat.isSymbolicLink()) throw new Error(`${path} is a symbolic link; a bundle holds regular files only`);
      if (stat.isDirectory()) await walk(full);
      else if (stat.isFile()) out.push({ path, size: stat.size, full });
      else throw new Error(`${path} is not a regular file`);
    }
  }
  await walk(dir);
  return out;
}

/** Writes the bundle of `dir` to `outFile`. */
export async function packModuleDirectory(dir: string, outFile: string, exclude?: (relativePath: string) => boolean): Promise<void> {
  const files = await bundleFilesOf(dir, exclude);
  const members: TarMember[] = files.map((file) => ({
    path: file.path,
    kind: "file",
    mode: 0o644,
    size: file.size,
    data: () => createReadStream(file.full),
  }));
  await pipeline(packTarGz(members), createWriteStream(outFile));
}
