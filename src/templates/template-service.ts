/**
 * Templates: versioned, content-addressed file trees (spec document 1, "Templates"). Every distinct
 * file is one blob named by its sha256; a version is a manifest of (path, mode, size, sha256) whose
 * canonical bytes are a blob too, named by the template hash. Metadata lives in `templates`, version
 * records in `template_versions`. Every change of files writes the new blobs, then the manifest, then
 * the version record, then moves the template's current hash and publishes TEMPLATE_UPDATED.
 *
 * Writes (and blob garbage collection) run one at a time per controller: a blob shared by two
 * templates must not be collected while another write is about to reference it again.
 *
 * This module is the public API and holds the write lock. The parts: `template-store.ts` (documents,
 * version records, parsed manifests, blob lookup and garbage collection), `template-text-tools.ts`
 * (variables, placeholder scan, search) and `tree-writes.ts` (the changes an upload or archive makes).
 */
import { createReadStream } from "node:fs";
import { tmpdir } from "node:os";
import { Readable } from "node:stream";
import type { Clock } from "../shared/clock.js";
import { badRequest, conflict, notFound, validationError } from "../shared/errors.js";
import { EventTypes } from "../events/event-types.js";
import type { EventBus } from "../events/types.js";
import type { BlobStore, DocumentStore } from "../store/ports.js";
import { KeyedMutex, type KeyedLock } from "../domain/shared/keyed-mutex.js";
import { ArchiveSpool } from "./archive-spool.js";
import { FileBlobs } from "./file-blobs.js";
import { FileTree } from "./file-tree.js";
import { buildTrees, manifestSizeBytes } from "./manifest.js";
import { isDirEntry, type ManifestEntry } from "../wire/template-manifest.js";
import { baseName, normalizeTemplatePath, parentOf } from "../wire/template-paths.js";
import { packTarGz, unpackTar, type TarMember } from "./tar.js";
import {
  assertTemplateName,
  DEFAULT_TEMPLATE_LIMITS,
  PROTECTED_TEMPLATE_PREFIX,
  TEMPLATES_COLLECTION,
  TEMPLATE_VERSIONS_COLLECTION,
  toTemplate,
  toVersion,
  type StoredTemplate,
  type StoredTemplateVersion,
  type Template,
  type TemplateLimits,
  type FileListing,
  type TemplateChange,
  type TemplateManifest,
  type TemplateVersion,
} from "./template-records.js";
import { noSnapshot, TemplateStore } from "./template-store.js";
import { TemplateTextTools, type ScannedVariable, type SearchHit } from "./template-text-tools.js";
import { applyWrites, isZipUpload, uploadWrites, zipWrites, type UploadedFile } from "./tree-writes.js";
import { decodeText } from "../wire/template-text.js";

export { assertTemplateName } from "./template-records.js";
export type { FileListing, TemplateChange, TemplateManifest } from "./template-records.js";
export type { SearchHit } from "./template-text-tools.js";
export type { UploadedFile } from "./tree-writes.js";

/** Lock key of every template write and of blob collection. */
const WRITE_LOCK = "templates";

/** A file's bytes as a stream, with what the response headers need. */
export interface FileStream {
  entry: ManifestEntry;
  stream: ReadableStream<Uint8Array>;
}

/** An archive to import: bytes in memory, a file on disk (a spooled upload), or a stream. */
export type ArchiveInput = Uint8Array | { path: string } | AsyncIterable<Uint8Array>;

/** A version's files as a tar.gz stream. */
export interface ArchiveStream {
  hash: string;
  /** Total bytes of the files (the archive's own length is known only once it is written). */
  sizeBytes: number;
  stream: Readable;
}

/** Dependencies of {@link TemplateService}. */
export interface TemplateServiceDeps {
  documents: DocumentStore;
  blobs: BlobStore;
  events: EventBus;
  clock: Clock;
  limits?: Partial<TemplateLimits>;
  /** Where archives are unpacked before their files are stored; the system temporary directory by default. */
  spoolDirectory?: string;
  /** Serialises template writes; cluster-wide when the controller passes a key-value lock. This controller's alone by default. */
  writeLock?: KeyedLock;
}

/** Owns templates, their versions and their blobs; routes call this, never the stores. */
export class TemplateService {
  readonly limits: TemplateLimits;
  private readonly store: TemplateStore;
  private readonly text: TemplateTextTools;
  private readonly fileBlobs: FileBlobs;
  private readonly events: EventBus;
  private readonly lock: KeyedLock;
  private readonly spoolDirectory: string;

  constructor(deps: TemplateServiceDeps) {
    this.limits = { ...DEFAULT_TEMPLATE_LIMITS, ...deps.limits };
    this.spoolDirectory = deps.spoolDirectory ?? tmpdir();
    this.lock = deps.writeLock ?? new KeyedMutex();
    this.fileBlobs = new FileBlobs(deps.blobs);
    this.events = deps.events;
    this.store = new TemplateStore({
      templates: deps.documents.collection<StoredTemplate>(TEMPLATES_COLLECTION),
      versions: deps.documents.collection<StoredTemplateVersion>(TEMPLATE_VERSIONS_COLLECTION, {
        indexes: [{ name: "template_versions_template", field: "templateName" }],
      }),
      blobs: deps.blobs,
      fileBlobs: this.fileBlobs,
      clock: deps.clock,
      manifestCacheEntriesMax: this.limits.manifestCacheEntriesMax,
    });
    this.text = new TemplateTextTools(
      { readManifest: (hash, name) => this.store.readManifest(hash, name), read: (entry) => this.fileBlobs.read(entry) },
      this.limits,
    );
  }

  // ---- metadata -------------------------------------------------------------------------------

  /** Every template except the synthetic `_` ones, by name. */
  async list(): Promise<Template[]> {
    const docs = await this.store.list();
    return docs.filter((d) => !d.name.startsWith("_")).map(toTemplate);
  }

  /** One template; 404 `Template not found: <name>`. */
  async get(name: string): Promise<Template> {
    return toTemplate(await this.store.load(name));
  }

  /** Creates an empty template (its first version is the empty manifest). */
  async create(input: { name: string; description?: string; platform?: string }): Promise<Template> {
    assertTemplateName(input.name, "name");
    return this.lock.run(WRITE_LOCK, async () => {
      if (await this.store.find(input.name)) throw conflict(`Template already exists: ${input.name}`);
      return toTemplate(await this.store.insertTemplate(input.name, input.description ?? "", input.platform ?? "", []));
    });
  }

  /** Changes description and/or platform; returns the records before and after. */
  async update(name: string, patch: { description?: string; platform?: string }): Promise<{ before: Template; after: Template }> {
    return this.lock.run(WRITE_LOCK, async () => {
      const doc = await this.store.load(name);
      const next: StoredTemplate = {
        ...doc,
        description: patch.description ?? doc.description,
        platform: patch.platform ?? doc.platform,
        updatedAt: this.store.now(),
      };
      await this.store.put(next);
      return { before: toTemplate(doc), after: toTemplate(next) };
    });
  }

  /** Deletes a template, its versions and every blob no other version uses; 400 PROTECTED for module-plugin templates. */
  async delete(name: string): Promise<Template> {
    if (name.startsWith(PROTECTED_TEMPLATE_PREFIX)) throw badRequest(`Template is protected: ${name}`, "PROTECTED");
    return this.lock.run(WRITE_LOCK, async () => {
      const doc = await this.store.load(name);
      await this.store.deleteTemplate(name);
      return toTemplate(doc);
    });
  }

  // ---- versions -------------------------------------------------------------------------------

  /** Versions newest first; 404 for an unknown template. */
  async listVersions(name: string): Promise<TemplateVersion[]> {
    await this.store.load(name);
    return (await this.store.listVersions(name)).map(toVersion);
  }

  /** Deletes a snapshot (not the current one) and collects blobs no version uses any more. */
  async deleteVersion(name: string, hash: string): Promise<TemplateVersion> {
    return this.lock.run(WRITE_LOCK, async () => {
      const doc = await this.store.load(name);
      const version = await this.store.version(name, hash);
      if (!version) throw notFound(`Version not found: ${hash}`);
      if (doc.hash === hash) throw conflict("The current version cannot be deleted; roll back to another version first");
      await this.store.deleteVersion(version);
      return toVersion(version);
    });
  }

  /**
   * Makes the snapshot `hash` current. 400 BAD_REQUEST for a missing or blank hash, 404 for an
   * unknown template or hash, 422 NO_SNAPSHOT when the version exists but a blob of it is missing.
   */
  async rollback(name: string, hash: string | undefined): Promise<TemplateChange> {
    if (typeof hash !== "string" || hash.trim() === "") throw badRequest("hash is required");
    return this.lock.run(WRITE_LOCK, async () => {
      const doc = await this.store.load(name);
      const version = await this.store.version(name, hash.trim());
      if (!version) throw notFound(`Version not found: ${hash}`);
      const manifest = await this.store.readManifest(version.hash, name);
      if ((await this.store.missingBlobs(manifest)).length > 0) throw noSnapshot(name, version.hash);
      const next: StoredTemplate = {
        ...doc,
        hash: version.hash,
        sizeBytes: version.sizeBytes,
        fileCount: version.fileCount,
        updatedAt: this.store.now(),
      };
      await this.store.put(next);
      if (doc.hash !== version.hash) {
        this.events.publish(EventTypes.TEMPLATE_UPDATED, { templateName: name, oldHash: doc.hash, newHash: version.hash });
      }
      return { template: toTemplate(next), oldHash: doc.hash, newHash: version.hash, changed: doc.hash !== version.hash };
    });
  }

  // ---- files: reading -------------------------------------------------------------------------

  /** The manifest of `version` (a hash of this template) or of the current version. */
  async manifest(name: string, version?: string): Promise<TemplateManifest> {
    const doc = await this.store.load(name);
    const hash = await this.store.resolveVersion(doc, version);
    const parsed = await this.store.readManifest(hash);
    const entries = parsed.entries.map((e) => ({ path: e.path, mode: e.mode, size: e.size, sha256: e.sha256 }));
    return { templateName: name, hash, variables: { ...doc.variables }, entries };
  }

  /**
   * The bytes named `sha256` when they belong to `version` (default: current) of template `name`: a
   * file of that version (whole, however it is stored) or its root tree object.
   */
  async blob(name: string, sha256: string, version?: string): Promise<Uint8Array> {
    const found = await this.store.findBlob(name, sha256, version);
    const data = "tree" in found ? found.tree : await this.fileBlobs.read(found.entry);
    if (!data) throw noSnapshot(name, found.hash);
    return data;
  }

  /** {@link blob} as a stream that holds one stored blob at a time. */
  async openBlob(name: string, sha256: string, version?: string): Promise<{ size: number; stream: ReadableStream<Uint8Array> }> {
    const found = await this.store.findBlob(name, sha256, version);
    if ("tree" in found) return { size: found.tree.byteLength, stream: new Blob([found.tree]).stream() };
    if (!(await this.fileBlobs.has(found.entry))) throw noSnapshot(name, found.hash);
    return { size: found.entry.size, stream: this.fileBlobs.stream(found.entry) };
  }

  /** Lists the directory `path` (root when empty) of `version` (default: current). */
  async listFiles(name: string, path: string | undefined, version?: string): Promise<{ path: string; hash: string; entries: FileListing[] }> {
    const dir = normalizeTemplatePath(path ?? "", "path", { allowRoot: true });
    const { parsed, hash } = await this.store.readVersion(name, version);
    if (dir !== "") {
      const entry = parsed.byPath.get(dir);
      if (!entry || !isDirEntry(entry)) throw notFound(`Directory not found: ${dir}`);
    }
    const entries = parsed.entries
      .filter((e) => parentOf(e.path) === dir)
      .map((e) => ({
        name: baseName(e.path),
        path: e.path,
        type: isDirEntry(e) ? ("directory" as const) : ("file" as const),
        size: e.size,
        mode: e.mode,
        sha256: e.sha256,
      }));
    return { path: dir, hash, entries };
  }

  /** Reads a file's bytes from `version` (default: current). */
  async readFile(name: string, path: string | undefined, version?: string): Promise<{ entry: ManifestEntry; data: Uint8Array }> {
    const file = normalizeTemplatePath(path ?? "", "path");
    const { parsed, hash } = await this.store.readVersion(name, version);
    const entry = parsed.byPath.get(file);
    if (!entry || isDirEntry(entry)) throw notFound(`File not found: ${file}`);
    const data = await this.fileBlobs.read(entry);
    if (!data) throw noSnapshot(name, hash);
    return { entry, data };
  }

  /** A file of `version` (default: current) as a stream that holds one stored blob at a time. */
  async openFile(name: string, path: string | undefined, version?: string): Promise<FileStream> {
    const file = normalizeTemplatePath(path ?? "", "path");
    const { parsed, hash } = await this.store.readVersion(name, version);
    const entry = parsed.byPath.get(file);
    if (!entry || isDirEntry(entry)) throw notFound(`File not found: ${file}`);
    if (!(await this.fileBlobs.has(entry))) throw noSnapshot(name, hash);
    return { entry, stream: this.fileBlobs.stream(entry) };
  }

  /** Reads a text file (UTF-8, at most `textBytesMax`); 422 NOT_TEXT for binary or larger files. */
  async readText(name: string, path: string | undefined, version?: string): Promise<{ path: string; content: string; size: number; sha256: string }> {
    const file = normalizeTemplatePath(path ?? "", "path");
    const { parsed } = await this.store.readVersion(name, version);
    const entry = parsed.byPath.get(file);
    if (entry && !isDirEntry(entry) && entry.size > this.limits.textBytesMax) {
      throw validationError(`File is larger than ${this.limits.textBytesMax} bytes; download it instead`, "NOT_TEXT");
    }
    const { data } = await this.readFile(name, file, version);
    const content = decodeText(data);
    if (content === null) throw validationError(`Not a UTF-8 text file: ${file}`, "NOT_TEXT");
    return { path: file, content, size: data.byteLength, sha256: entry!.sha256 };
  }

  // ---- files: changing ------------------------------------------------------------------------

  /** Creates a directory (and its parents). */
  async mkdir(name: string, path: string): Promise<TemplateChange> {
    const dir = normalizeTemplatePath(path, "path");
    return this.change(name, (tree) => tree.mkdir(dir));
  }

  /** Writes a text file as UTF-8. */
  async writeText(name: string, path: string, content: string): Promise<TemplateChange> {
    const file = normalizeTemplatePath(path, "path");
    const data = new TextEncoder().encode(content);
    if (data.byteLength > this.limits.textBytesMax) throw validationError(`content: longer than ${this.limits.textBytesMax} bytes`);
    return this.change(name, (tree) => tree.writeFile(file, data));
  }

  /**
   * Stores uploaded files under directory `dir`; with `extract`, ZIP files are unpacked there instead
   * (every entry checked before anything is written). A spooled file is stored from disk one chunk
   * at a time; a ZIP to extract is unpacked entry by entry into a spool on disk first.
   */
  async upload(name: string, dir: string | undefined, files: readonly UploadedFile[], extract: boolean): Promise<TemplateChange> {
    const base = normalizeTemplatePath(dir ?? "", "path", { allowRoot: true });
    if (files.length === 0) throw validationError("file: at least one file is required");
    const spool = extract && files.some(isZipUpload) ? await ArchiveSpool.create(this.spoolDirectory) : null;
    try {
      const writes = await uploadWrites(base, files, spool, this.limits);
      return await this.change(name, (tree) => applyWrites(tree, writes));
    } finally {
      await spool?.dispose();
    }
  }

  /**
   * Unpacks the ZIP at `path` into `destination` (default: the ZIP's directory). The ZIP is copied
   * from its blobs to a temporary file (a ZIP is read from its end), then unpacked entry by entry.
   */
  async extract(name: string, path: string, destination?: string): Promise<TemplateChange> {
    const file = normalizeTemplatePath(path ?? "", "path");
    const target = normalizeTemplatePath(destination ?? parentOf(file), "destination", { allowRoot: true });
    const { parsed, hash } = await this.store.readVersion(name);
    const entry = parsed.byPath.get(file);
    if (!entry || isDirEntry(entry)) throw notFound(`File not found: ${file}`);
    if (!(await this.fileBlobs.has(entry))) throw noSnapshot(name, hash);
    const spool = await ArchiveSpool.create(this.spoolDirectory);
    try {
      const writes = await zipWrites(this.fileBlobs.chunks(entry), target, spool, this.limits);
      return await this.change(name, (tree) => applyWrites(tree, writes));
    } finally {
      await spool.dispose();
    }
  }

  /** Moves a file or directory. */
  async rename(name: string, from: string, to: string): Promise<TemplateChange> {
    const source = normalizeTemplatePath(from, "from");
    const target = normalizeTemplatePath(to, "to");
    return this.change(name, (tree) => tree.rename(source, target));
  }

  /** Deletes a file or a directory with everything beneath it. */
  async deleteFile(name: string, path: string | undefined): Promise<TemplateChange> {
    const target = normalizeTemplatePath(path ?? "", "path");
    return this.change(name, (tree) => void tree.remove(target));
  }

  /**
   * Recomputes the current hash from the manifest and checks that every blob is present. Returns the
   * hash, whether it changed, and the blobs found missing.
   */
  async rehash(name: string): Promise<{ hash: string; previousHash: string; changed: boolean; fileCount: number; missingBlobs: string[] }> {
    return this.lock.run(WRITE_LOCK, async () => {
      const doc = await this.store.load(name);
      const parsed = await this.store.readManifest(doc.hash);
      const missingBlobs = await this.store.missingBlobs(parsed);
      const hash = buildTrees(parsed.entries).rootHash;
      const changed = hash !== doc.hash;
      if (changed) {
        await this.store.put({ ...doc, hash, updatedAt: this.store.now() });
        this.events.publish(EventTypes.TEMPLATE_UPDATED, { templateName: name, oldHash: doc.hash, newHash: hash });
      }
      return { hash, previousHash: doc.hash, changed, fileCount: parsed.entries.filter((e) => !isDirEntry(e)).length, missingBlobs };
    });
  }

  // ---- variables, search, inheritance ---------------------------------------------------------

  /** The `{{var}}` substitutions of a template. */
  async variables(name: string): Promise<Record<string, string>> {
    return { ...(await this.store.load(name)).variables };
  }

  /** Replaces every substitution; returns the map before and after. */
  async replaceVariables(name: string, variables: Record<string, string>): Promise<{ before: Record<string, string>; after: Record<string, string> }> {
    const entries = this.text.checkVariables(variables);
    return this.lock.run(WRITE_LOCK, async () => {
      const doc = await this.store.load(name);
      const after = Object.fromEntries(entries);
      await this.store.put({ ...doc, variables: after, updatedAt: this.store.now() });
      return { before: doc.variables, after };
    });
  }

  /** Placeholders found in the current text files, with where they occur and whether they are defined. */
  async scanVariables(name: string): Promise<{ variables: ScannedVariable[]; truncated: boolean }> {
    return this.text.scanVariables(await this.store.load(name));
  }

  /** Case-insensitive search of paths and text lines; at most `maxResults` hits. */
  async search(name: string, query: string, maxResults: number): Promise<{ query: string; results: SearchHit[]; truncated: boolean }> {
    return this.text.search(await this.store.load(name), query, maxResults);
  }

  /** The layers that apply for this template: base, base-<platform>, then itself (existing ones only). */
  async inheritance(name: string): Promise<{ chain: { name: string; hash: string }[] }> {
    const doc = await this.store.load(name);
    const names = ["base", ...(doc.platform ? [`base-${doc.platform}`] : []), name];
    const chain: { name: string; hash: string }[] = [];
    for (const layer of [...new Set(names)]) {
      const found = layer === name ? doc : await this.store.find(layer);
      if (found) chain.push({ name: layer, hash: found.hash });
    }
    return { chain };
  }

  // ---- export / import ------------------------------------------------------------------------

  /**
   * The files of `version` (default: current) as a tar.gz stream, produced as it is read: one stored
   * blob at a time, compressed on the thread pool. Every blob is checked to be present first, so a
   * missing one is 422 NO_SNAPSHOT before anything is sent.
   */
  async exportArchive(name: string, version?: string): Promise<ArchiveStream> {
    const { parsed, hash } = await this.store.readVersion(name, version);
    for (const entry of parsed.entries) {
      if (!isDirEntry(entry) && !(await this.fileBlobs.has(entry))) throw noSnapshot(name, hash);
    }
    const fileBlobs = this.fileBlobs;
    function* members(): Generator<TarMember> {
      for (const entry of parsed.entries) {
        if (isDirEntry(entry)) yield { path: entry.path, kind: "dir", mode: entry.mode };
        else yield { path: entry.path, kind: "file", mode: entry.mode, size: entry.size, data: () => fileBlobs.chunks(entry) };
      }
    }
    return { hash, sizeBytes: manifestSizeBytes(parsed.entries), stream: packTarGz(members()) };
  }

  /**
   * Creates template `name` from a tar.gz (or plain tar) archive; 409 when it exists. The archive is
   * unpacked entry by entry into a spool on disk, and its files are stored only once every entry
   * passed the checks.
   */
  async importArchive(name: string, archive: ArchiveInput, meta: { description?: string; platform?: string } = {}): Promise<Template> {
    assertTemplateName(name, "name");
    if (await this.store.find(name)) throw conflict(`Template already exists: ${name}`); // before unpacking, not after
    const spool = await ArchiveSpool.create(this.spoolDirectory);
    try {
      const input: AsyncIterable<Uint8Array> =
        archive instanceof Uint8Array ? Readable.from([archive]) : "path" in archive ? createReadStream(archive.path) : archive;
      const writes = await unpackTar(input, this.limits, spool);
      return await this.lock.run(WRITE_LOCK, async () => {
        if (await this.store.find(name)) throw conflict(`Template already exists: ${name}`);
        const tree = new FileTree([]);
        applyWrites(tree, writes);
        await this.store.storeFiles(tree);
        return toTemplate(await this.store.insertTemplate(name, meta.description ?? "", meta.platform ?? "", tree.toEntries()));
      });
    } finally {
      await spool.dispose();
    }
  }

  // ---- internals ------------------------------------------------------------------------------

  /** Applies `edit` to the current files and, when they changed, records a new version. */
  private change(name: string, edit: (tree: FileTree) => void): Promise<TemplateChange> {
    return this.lock.run(WRITE_LOCK, async () => {
      const doc = await this.store.load(name);
      const current = await this.store.readManifest(doc.hash, name);
      const tree = new FileTree(current.entries);
      edit(tree);
      if (tree.size > this.limits.entriesMax) throw validationError(`template: more than ${this.limits.entriesMax} entries`);
      const entries = tree.toEntries();
      const treeSet = buildTrees(entries);
      if (treeSet.rootHash === doc.hash) return { template: toTemplate(doc), oldHash: doc.hash, newHash: doc.hash, changed: false };
      await this.store.storeFiles(tree);
      const next = await this.store.recordVersion(doc, entries, treeSet, current.trees);
      this.events.publish(EventTypes.TEMPLATE_UPDATED, { templateName: name, oldHash: doc.hash, newHash: next.hash });
      return { template: toTemplate(next), oldHash: doc.hash, newHash: next.hash, changed: true };
    });
  }
}
