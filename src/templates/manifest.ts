/**
 * Version manifests: the sorted list of (path, mode, size, sha256) entries of one template version.
 * The canonical encoding is deterministic (entries sorted by path, fixed field order, no whitespace),
 * so the template hash — the sha256 of that encoding — depends on the files only. The encoding is
 * itself stored as a blob named by that hash, which is how the daemon fetches a version.
 */
import { createHash } from "node:crypto";
import { assert } from "../shared/errors.js";

/** Mode bits of a directory entry (POSIX S_IFDIR | 0755). */
export const DIR_MODE = 0o040755;
/** Mode bits of a regular file written through the API (POSIX S_IFREG | 0644). */
export const FILE_MODE = 0o100644;
/** The sha256 field of directory entries. */
export const NO_CONTENT = "";
/** Format marker of the canonical encoding. */
export const MANIFEST_FORMAT = 1;

/** One file or directory of a version. Directories have size 0 and an empty sha256. */
export interface ManifestEntry {
  path: string;
  mode: number;
  size: number;
  sha256: string;
}

/** True for directory entries. */
export function isDirEntry(entry: ManifestEntry): boolean {
  return (entry.mode & 0o170000) === 0o040000;
}

/** A regular-file mode keeping only the permission bits of `mode` (executable bits survive). */
export function fileMode(mode: number): number {
  const permissions = mode & 0o755;
  return permissions === 0 ? FILE_MODE : 0o100000 | permissions;
}

/** Entries sorted by path (code-unit order, the same on every platform). */
export function sortEntries(entries: Iterable<ManifestEntry>): ManifestEntry[] {
  return [...entries].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

/** The canonical bytes of a manifest. */
export function encodeManifest(entries: Iterable<ManifestEntry>): Uint8Array {
  const rows = sortEntries(entries).map((e) => [e.path, e.mode, e.size, e.sha256]);
  return new TextEncoder().encode(JSON.stringify({ format: MANIFEST_FORMAT, entries: rows }));
}

/** Parses canonical manifest bytes; a malformed manifest is corruption (an assertion). */
export function decodeManifest(bytes: Uint8Array): ManifestEntry[] {
  const parsed = JSON.parse(new TextDecoder().decode(bytes)) as { format?: unknown; entries?: unknown };
  assert(parsed.format === MANIFEST_FORMAT && Array.isArray(parsed.entries), "manifest has the canonical shape");
  return (parsed.entries as unknown[]).map((row) => {
    assert(Array.isArray(row) && row.length === 4, "manifest row has four fields");
    const [path, mode, size, sha256] = row as [unknown, unknown, unknown, unknown];
    assert(typeof path === "string" && typeof mode === "number" && typeof size === "number" && typeof sha256 === "string", "manifest row types");
    return { path, mode, size, sha256 };
  });
}

/** The template hash of a manifest: the hex sha256 of its canonical bytes. */
export function manifestHash(entries: Iterable<ManifestEntry>): string {
  return createHash("sha256").update(encodeManifest(entries)).digest("hex");
}

/** Total bytes of the files of a manifest. */
export function manifestSizeBytes(entries: Iterable<ManifestEntry>): number {
  let total = 0;
  for (const e of entries) total += e.size;
  return total;
}
