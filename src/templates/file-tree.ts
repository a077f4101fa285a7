/**
 * A mutable view of one version's entries, keyed by path, with the operations the files API needs.
 * Pure: new file contents are collected in `pendingBlobs` for the caller to store after every check
 * passed, so a refused operation writes nothing.
 */
import { conflict, notFound } from "../shared/errors.js";
import { contentOfBytes, type BlobSource, type FileContent } from "./file-content.js";
import { DIR_MODE, FILE_MODE, NO_CONTENT, fileMode, sortEntries } from "./manifest.js";
import { isDirEntry, type ManifestEntry } from "../wire/template-manifest.js";
import { ancestorsOf, isWithin } from "../wire/template-paths.js";

/** The entries of a version being edited. */
export class FileTree {
  private readonly entries: Map<string, ManifestEntry>;
  /** Blobs written by this edit, by sha256, with where their bytes are; stored by the service before the manifest. */
  readonly pendingBlobs = new Map<string, BlobSource>();

  constructor(entries: Iterable<ManifestEntry>) {
    this.entries = new Map([...entries].map((e) => [e.path, e]));
  }

  get(path: string): ManifestEntry | undefined {
    return this.entries.get(path);
  }

  /** The entries, sorted by path. */
  toEntries(): ManifestEntry[] {
    return sortEntries(this.entries.values());
  }

  get size(): number {
    return this.entries.size;
  }

  /** Creates `path` and its ancestors as directories; 409 when one of them is a file. */
  mkdir(path: string): void {
    for (const dir of [...ancestorsOf(path), path]) {
      const existing = this.entries.get(dir);
      if (existing && !isDirEntry(existing)) throw conflict(`Not a directory: ${dir}`);
      if (!existing) this.entries.set(dir, { path: dir, mode: DIR_MODE, size: 0, sha256: NO_CONTENT });
    }
  }

  /** Writes a file from bytes in memory; see {@link writeContent}. */
  writeFile(path: string, data: Uint8Array, mode?: number): void {
    this.writeContent(path, contentOfBytes(data), mode);
  }

  /** Writes a file (replacing one at `path`); 409 when `path` is a directory or under a file. */
  writeContent(path: string, content: FileContent, mode?: number): void {
    const existing = this.entries.get(path);
    if (existing && isDirEntry(existing)) throw conflict(`Is a directory: ${path}`);
    for (const dir of ancestorsOf(path)) this.mkdir(dir);
    for (const [hash, source] of content.sources) this.pendingBlobs.set(hash, source);
    const entry: ManifestEntry = { path, mode: fileMode(mode ?? existing?.mode ?? FILE_MODE), size: content.size, sha256: content.sha256 };
    this.entries.set(path, content.chunks ? { ...entry, chunks: content.chunks } : entry);
  }

  /** Removes `path` and everything beneath it; 404 when nothing is there. Returns how many entries. */
  remove(path: string): number {
    if (!this.entries.has(path)) throw notFound(`File not found: ${path}`);
    let removed = 0;
    for (const key of [...this.entries.keys()]) {
      if (isWithin(key, path)) {
        this.entries.delete(key);
        removed++;
      }
    }
    return removed;
  }

  /** Moves `from` (and everything beneath it) to `to`; 404 without a source, 409 when `to` exists. */
  rename(from: string, to: string): void {
    if (!this.entries.has(from)) throw notFound(`File not found: ${from}`);
    if (this.entries.has(to)) throw conflict(`Target exists: ${to}`);
    if (isWithin(to, from)) throw conflict(`Cannot move ${from} into itself`);
    for (const dir of ancestorsOf(to)) this.mkdir(dir);
    for (const [key, entry] of [...this.entries]) {
      if (!isWithin(key, from)) continue;
      this.entries.delete(key);
      const moved = to + key.slice(from.length);
      this.entries.set(moved, { ...entry, path: moved });
    }
  }
}
