/**
 * Version manifests: the (path, mode, size, sha256) entries of one template version, stored as a
 * tree of directory objects as git does: each directory is one canonical blob listing its direct
 * children (sorted by name; a subdirectory is listed with the hash of its own tree object), and the
 * template hash is the hash of the root tree. The encoding is deterministic, so the hash depends on
 * the files only, and an edit of one file stores that file plus the tree objects on its path — not a
 * new copy of the whole listing. A file stored in chunks (see `file-content.ts`) carries its chunk
 * hashes as a fifth field of its row.
 */
import { createHash } from "node:crypto";
import { assert } from "../shared/errors.js";
import { baseName, parentOf } from "../wire/template-paths.js";
import { isDirEntry, type ManifestEntry } from "../wire/template-manifest.js";

/** Mode bits of a directory entry (POSIX S_IFDIR | 0755). */
export const DIR_MODE = 0o040755;
/** Mode bits of a regular file written through the API (POSIX S_IFREG | 0644). */
export const FILE_MODE = 0o100644;
/** The sha256 field of directory entries. */
export const NO_CONTENT = "";
/** Format marker of the canonical tree encoding. */
export const TREE_FORMAT = 2;

/** A regular-file mode keeping only the permission bits of `mode` (executable bits survive). */
export function fileMode(mode: number): number {
  const permissions = mode & 0o755;
  return permissions === 0 ? FILE_MODE : 0o100000 | permissions;
}

/** Entries sorted by path (code-unit order, the same on every platform). */
export function sortEntries(entries: Iterable<ManifestEntry>): ManifestEntry[] {
  return [...entries].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

/** One child of a tree object: a file (sha256 of its bytes) or a directory (hash of its tree). */
export interface TreeChild {
  name: string;
  mode: number;
  /** File bytes; for a directory, the total file bytes beneath it. */
  size: number;
  sha256: string;
  /** Chunk blobs of a chunked file. */
  chunks?: readonly string[];
}

/** The tree objects of a version: the root hash (the template hash) and every tree by hash. */
export interface TreeSet {
  rootHash: string;
  trees: Map<string, Uint8Array>;
}

/** The canonical bytes of one tree object. */
export function encodeTree(children: readonly TreeChild[]): Uint8Array {
  const rows = [...children]
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    .map((c) => (c.chunks ? [c.name, c.mode, c.size, c.sha256, c.chunks] : [c.name, c.mode, c.size, c.sha256]));
  return new TextEncoder().encode(JSON.stringify({ format: TREE_FORMAT, tree: rows }));
}

/** Parses tree bytes; a malformed tree is corruption (an assertion). */
export function decodeTree(bytes: Uint8Array): TreeChild[] {
  const parsed = JSON.parse(new TextDecoder().decode(bytes)) as { format?: unknown; tree?: unknown };
  assert(parsed.format === TREE_FORMAT && Array.isArray(parsed.tree), "tree object has the canonical shape");
  return (parsed.tree as unknown[]).map((row) => {
    assert(Array.isArray(row) && (row.length === 4 || row.length === 5), "tree row has four or five fields");
    const [name, mode, size, sha256, chunks] = row as [unknown, unknown, unknown, unknown, unknown];
    assert(typeof name === "string" && typeof mode === "number" && typeof size === "number" && typeof sha256 === "string", "tree row types");
    if (chunks === undefined) return { name, mode, size, sha256 };
    assert(Array.isArray(chunks) && chunks.length > 1 && chunks.every((c) => typeof c === "string"), "chunk list of a tree row");
    return { name, mode, size, sha256, chunks: chunks as string[] };
  });
}

function sha256Hex(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex");
}

/**
 * Builds the tree objects of a flat entry list. Every ancestor directory of every entry must itself
 * be an entry (the file tree and the archive readers guarantee it).
 */
export function buildTrees(entries: Iterable<ManifestEntry>): TreeSet {
  const children = new Map<string, ManifestEntry[]>([["", []]]);
  const all = [...entries];
  for (const e of all) if (isDirEntry(e)) children.set(e.path, []);
  for (const e of all) {
    const list = children.get(parentOf(e.path));
    assert(list !== undefined, `parent directory of ${e.path} is an entry`);
    list.push(e);
  }
  const depth = (path: string) => (path === "" ? -1 : path.split("/").length);
  const dirs = [...children.keys()].sort((a, b) => depth(b) - depth(a));
  const treeOf = new Map<string, { hash: string; size: number }>();
  const trees = new Map<string, Uint8Array>();
  for (const dir of dirs) {
    let size = 0;
    const rows: TreeChild[] = children.get(dir)!.map((e) => {
      if (!isDirEntry(e)) {
        size += e.size;
        return { name: baseName(e.path), mode: e.mode, size: e.size, sha256: e.sha256, chunks: e.chunks };
      }
      const sub = treeOf.get(e.path)!;
      size += sub.size;
      return { name: baseName(e.path), mode: e.mode, size: sub.size, sha256: sub.hash };
    });
    const bytes = encodeTree(rows);
    const hash = sha256Hex(bytes);
    trees.set(hash, bytes);
    treeOf.set(dir, { hash, size });
  }
  return { rootHash: treeOf.get("")!.hash, trees };
}

/** The template hash of a flat entry list: the hash of its root tree. */
export function manifestHash(entries: Iterable<ManifestEntry>): string {
  return buildTrees(entries).rootHash;
}

/** Total bytes of the files of a manifest. */
export function manifestSizeBytes(entries: Iterable<ManifestEntry>): number {
  let total = 0;
  for (const e of entries) total += e.size;
  return total;
}
