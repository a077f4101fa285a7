/**
 * The persistence core of templates: the `templates` and `template_versions` documents, the tree
 * objects and file blobs of every version, and the cache of parsed manifests. It knows how a version
 * is recorded (new blobs, then new tree objects, then the version record, then the template's hash)
 * and how trees and blobs no version uses any more are collected; it decides nothing about who may
 * change what, takes no lock and publishes no event. Its writes run under the template service's
 * write lock.
 */
import type { Clock } from "../shared/clock.js";
import { ApiError, notFound } from "../shared/errors.js";
import type { BlobStore, Collection } from "../store/ports.js";
import { isoFromMs } from "../domain/shared/time.js";
import { isDirEntry, isDirMode, type ManifestEntry } from "../wire/template-manifest.js";
import type { FileBlobs } from "./file-blobs.js";
import { storedBlobsOf } from "./file-content.js";
import type { FileTree } from "./file-tree.js";
import { NO_CONTENT, buildTrees, decodeTree, manifestSizeBytes, type TreeSet } from "./manifest.js";
import type { StoredTemplate, StoredTemplateVersion } from "./template-records.js";

/** One version's files read back from its tree objects, with the lookups the service needs. */
export interface ParsedManifest {
  entries: ManifestEntry[];
  byPath: Map<string, ManifestEntry>;
  /** File entries by the sha256 of their bytes (what the blob route serves). */
  files: Map<string, ManifestEntry>;
  /** Blobs holding file bytes: whole files, and the chunks of chunked files. */
  blobs: Set<string>;
  /** Tree objects, the root (the template hash) included. */
  trees: Set<string>;
}

/** What the blob route asks for: the root tree object itself, or a file of the version. */
export type FoundBlob = { hash: string; tree: Uint8Array } | { hash: string; entry: ManifestEntry };

/** Dependencies of {@link TemplateStore}. */
export interface TemplateStoreDeps {
  templates: Collection<StoredTemplate>;
  versions: Collection<StoredTemplateVersion>;
  blobs: BlobStore;
  fileBlobs: FileBlobs;
  clock: Clock;
  /** Parsed manifests kept in memory, least recently used dropped first. */
  manifestCacheEntriesMax: number;
}

/**
 * Template documents, version records and the blobs behind them. Reads turn missing documents into
 * 404 and missing tree objects into 422 NO_SNAPSHOT; writes (`put`, `insertTemplate`,
 * `recordVersion`, `deleteTemplate`, `deleteVersion`, `collectGarbage`) assume the caller holds the
 * template write lock, because collection must not race a write that re-references a shared blob.
 */
export class TemplateStore {
  private readonly templates: Collection<StoredTemplate>;
  private readonly versions: Collection<StoredTemplateVersion>;
  private readonly blobs: BlobStore;
  private readonly fileBlobs: FileBlobs;
  private readonly clock: Clock;
  private readonly manifestCacheEntriesMax: number;
  private readonly manifestCache = new Map<string, ParsedManifest>();

  constructor(deps: TemplateStoreDeps) {
    this.templates = deps.templates;
    this.versions = deps.versions;
    this.blobs = deps.blobs;
    this.fileBlobs = deps.fileBlobs;
    this.clock = deps.clock;
    this.manifestCacheEntriesMax = deps.manifestCacheEntriesMax;
  }

  /** The clock's instant as the documents' timestamps spell it. */
  now(): string {
    return isoFromMs(this.clock.nowMs());
  }

  // ---- template documents ---------------------------------------------------------------------

  /** Every template document (the synthetic `_` ones included), by name. */
  list(): Promise<StoredTemplate[]> {
    return this.templates.find({}, { sort: { field: "name", direction: 1 } });
  }

  /** The template document `name`, or null. */
  find(name: string): Promise<StoredTemplate | null> {
    return this.templates.get(name);
  }

  /** The template document `name`; 404 `Template not found: <name>`. */
  async load(name: string): Promise<StoredTemplate> {
    const doc = typeof name === "string" && name.length <= 256 ? await this.templates.get(name) : null;
    if (!doc) throw notFound(`Template not found: ${name}`);
    return doc;
  }

  /** Replaces a template document (metadata, variables or the current hash). */
  async put(doc: StoredTemplate): Promise<void> {
    await this.templates.put(doc);
  }

  /** Creates template `name` with `entries` (whose blobs are stored) as its first version. */
  async insertTemplate(name: string, description: string, platform: string, entries: ManifestEntry[]): Promise<StoredTemplate> {
    const now = this.now();
    const doc: StoredTemplate = {
      _id: name,
      name,
      description,
      platform,
      hash: "",
      sizeBytes: 0,
      fileCount: 0,
      variables: {},
      versionSeq: 0,
      createdAt: now,
      updatedAt: now,
    };
    return this.recordVersion(doc, entries);
  }

  /** Deletes template `name`, its version records, and every tree and blob no other version uses. */
  async deleteTemplate(name: string): Promise<void> {
    const versions = await this.versions.find({ templateName: name });
    await this.templates.delete(name);
    for (const v of versions) await this.versions.delete(v._id);
    await this.collectGarbage(versions.map((v) => v.hash));
  }

  // ---- versions -------------------------------------------------------------------------------

  /** The version records of template `name`, newest first. */
  listVersions(name: string): Promise<StoredTemplateVersion[]> {
    return this.versions.find({ templateName: name }, { sort: { field: "seq", direction: -1 } });
  }

  /** The version record of `hash` in template `name`, or null. */
  version(name: string, hash: string): Promise<StoredTemplateVersion | null> {
    return this.versions.get(versionId(name, hash));
  }

  /** Deletes a version record and collects the trees and blobs no remaining version uses. */
  async deleteVersion(version: StoredTemplateVersion): Promise<void> {
    await this.versions.delete(version._id);
    await this.collectGarbage([version.hash]);
  }

  /** `version` when it is a version of `doc`, the current hash when it is absent; 404 otherwise. */
  async resolveVersion(doc: StoredTemplate, version: string | undefined): Promise<string> {
    if (version === undefined || version === "" || version === doc.hash) return doc.hash;
    if (!(await this.version(doc.name, version))) throw notFound(`Version not found: ${version}`);
    return version;
  }

  /** A template, the hash `version` resolves to, and that version's parsed manifest. */
  async readVersion(name: string, version?: string): Promise<{ doc: StoredTemplate; hash: string; parsed: ParsedManifest }> {
    const doc = await this.load(name);
    const hash = await this.resolveVersion(doc, version);
    return { doc, hash, parsed: await this.readManifest(hash, name) };
  }

  /** The root tree object or the file entry that `sha256` names in a version; 404 when it names neither. */
  async findBlob(name: string, sha256: string, version?: string): Promise<FoundBlob> {
    const doc = await this.load(name);
    const hash = await this.resolveVersion(doc, version);
    const parsed = await this.readManifest(hash);
    if (sha256 === hash) {
      const tree = await this.blobs.get(hash);
      if (!tree) throw noSnapshot(name, hash);
      return { hash, tree };
    }
    const entry = parsed.files.get(sha256);
    if (!entry) throw notFound(`Blob not found in ${name}@${hash}: ${sha256}`);
    return { hash, entry };
  }

  /** The parsed manifest blob `hash`; 422 NO_SNAPSHOT (naming `name` when given) when a tree object is gone. */
  async readManifest(hash: string, name = ""): Promise<ParsedManifest> {
    const cached = this.manifestCache.get(hash);
    if (cached) {
      this.manifestCache.delete(hash);
      this.manifestCache.set(hash, cached);
      return cached;
    }
    const entries: ManifestEntry[] = [];
    const trees = new Set<string>();
    // Depth-first over the tree objects; depth is bounded by the path rules, count by the entry bound.
    const pending: { dir: string; hash: string }[] = [{ dir: "", hash }];
    while (pending.length > 0) {
      const tree = pending.pop()!;
      trees.add(tree.hash);
      const bytes = await this.blobs.get(tree.hash);
      if (!bytes) throw noSnapshot(name, hash);
      for (const child of decodeTree(bytes)) {
        const path = tree.dir === "" ? child.name : `${tree.dir}/${child.name}`;
        if (isDirMode(child.mode)) {
          entries.push({ path, mode: child.mode, size: 0, sha256: NO_CONTENT });
          pending.push({ dir: path, hash: child.sha256 });
        } else {
          const entry: ManifestEntry = { path, mode: child.mode, size: child.size, sha256: child.sha256 };
          entries.push(child.chunks ? { ...entry, chunks: child.chunks } : entry);
        }
      }
    }
    entries.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
    const fileEntries = entries.filter((e) => !isDirEntry(e));
    const parsed: ParsedManifest = {
      entries,
      byPath: new Map(entries.map((e) => [e.path, e])),
      files: new Map(fileEntries.map((e) => [e.sha256, e])),
      blobs: new Set(fileEntries.flatMap((e) => storedBlobsOf(e))),
      trees,
    };
    this.manifestCache.set(hash, parsed);
    while (this.manifestCache.size > this.manifestCacheEntriesMax) this.manifestCache.delete(this.manifestCache.keys().next().value!);
    return parsed;
  }

  /** The tree objects and file blobs of `parsed` that the blob store no longer holds, trees first. */
  async missingBlobs(parsed: ParsedManifest): Promise<string[]> {
    const missing: string[] = [];
    for (const blob of [...parsed.trees, ...parsed.blobs]) if (!(await this.blobs.has(blob))) missing.push(blob);
    return missing;
  }

  // ---- writing versions -----------------------------------------------------------------------

  /** Stores the file blobs an edit of `tree` wrote (those the blob store does not hold yet). */
  async storeFiles(tree: FileTree): Promise<void> {
    await this.fileBlobs.store(tree.pendingBlobs);
  }

  /**
   * Stores the new tree objects of `entries` and a version record, then moves the template to it.
   * `knownTrees` are tree objects known to be stored already (those of the previous version): only
   * the ones on changed paths are new.
   */
  async recordVersion(
    doc: StoredTemplate,
    entries: ManifestEntry[],
    treeSet: TreeSet = buildTrees(entries),
    knownTrees: ReadonlySet<string> = new Set(),
  ): Promise<StoredTemplate> {
    for (const [treeHash, bytes] of treeSet.trees) {
      if (!knownTrees.has(treeHash) && !(await this.blobs.has(treeHash))) await this.blobs.put(bytes);
    }
    const hash = treeSet.rootHash;
    const sizeBytes = manifestSizeBytes(entries);
    const fileCount = entries.filter((e) => !isDirEntry(e)).length;
    const seq = doc.versionSeq + 1;
    const now = this.now();
    await this.versions.put({ _id: versionId(doc.name, hash), templateName: doc.name, hash, sizeBytes, createdAt: now, seq, fileCount });
    const next: StoredTemplate = { ...doc, hash, sizeBytes, fileCount, versionSeq: seq, updatedAt: now };
    await this.templates.put(next);
    return next;
  }

  /**
   * Deletes the versions `hashes`' tree objects and file blobs unless a remaining version (of any
   * template: identical files are shared) still uses them. Returns how many blobs were deleted.
   */
  async collectGarbage(hashes: readonly string[]): Promise<number> {
    const candidates = new Set<string>();
    for (const hash of new Set(hashes)) {
      candidates.add(hash);
      try {
        const parsed = await this.readManifest(hash);
        for (const blob of [...parsed.trees, ...parsed.blobs]) candidates.add(blob);
      } catch (err) {
        if (!(err instanceof ApiError)) throw err; // a missing manifest leaves only itself to delete
      }
    }
    for (const version of await this.versions.find({})) {
      if (candidates.size === 0) break;
      candidates.delete(version.hash);
      try {
        const parsed = await this.readManifest(version.hash);
        for (const blob of [...parsed.trees, ...parsed.blobs]) candidates.delete(blob);
      } catch (err) {
        if (!(err instanceof ApiError)) throw err; // a version whose trees are missing keeps only its root hash (above)
      }
    }
    for (const blob of candidates) {
      await this.blobs.delete(blob);
      this.manifestCache.delete(blob);
    }
    return candidates.size;
  }
}

/** 422 NO_SNAPSHOT: a tree object or file blob of version `hash` is gone from the blob store. */
export function noSnapshot(name: string, hash: string): ApiError {
  return new ApiError(422, "NO_SNAPSHOT", `Snapshot unavailable: ${name ? `${name}@` : ""}${hash}`);
}

function versionId(name: string, hash: string): string {
  return `${name}@${hash}`;
}
