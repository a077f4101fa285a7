/**
 * Templates: versioned, content-addressed file trees (spec document 1, "Templates"). Every distinct
 * file is one blob named by its sha256; a version is a manifest of (path, mode, size, sha256) whose
 * canonical bytes are a blob too, named by the template hash. Metadata lives in `templates`, version
 * records in `template_versions`. Every change of files writes the new blobs, then the manifest, then
 * the version record, then moves the template's current hash and publishes TEMPLATE_UPDATED.
 *
 * Writes (and blob garbage collection) run one at a time per controller: a blob shared by two
 * templates must not be collected while another write is about to reference it again.
 */
import { createReadStream } from "node:fs";
import { open } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import type { Clock } from "../shared/clock.js";
import { ApiError, badRequest, conflict, notFound, validationError } from "../shared/errors.js";
import { EventTypes } from "../events/event-types.js";
import type { EventBus } from "../events/types.js";
import type { BlobStore, Collection, DocumentStore } from "../store/ports.js";
import { KeyedMutex } from "../domain/shared/keyed-mutex.js";
import { isoFromMs } from "../domain/shared/time.js";
import { archiveError, type ArchiveEntry, type ArchiveLimits } from "./archive-limits.js";
import { ArchiveSpool } from "./archive-spool.js";
import { FileBlobs } from "./file-blobs.js";
import { contentOfBytes, storedBlobsOf } from "./file-content.js";
import { FileTree } from "./file-tree.js";
import { NO_CONTENT, buildTrees, decodeTree, manifestSizeBytes } from "./manifest.js";
import { isDirEntry, isDirMode, type ManifestEntry } from "../wire/template-manifest.js";
import { baseName, joinTemplatePath, normalizeTemplatePath, parentOf } from "../wire/template-paths.js";
import { packTarGz, unpackTar, type TarMember } from "./tar.js";
import {
  DEFAULT_TEMPLATE_LIMITS,
  PROTECTED_TEMPLATE_PREFIX,
  TEMPLATE_NAME_LENGTH_MAX,
  TEMPLATE_NAME_PATTERN,
  TEMPLATES_COLLECTION,
  TEMPLATE_VERSIONS_COLLECTION,
  toTemplate,
  toVersion,
  type StoredTemplate,
  type StoredTemplateVersion,
  type Template,
  type TemplateLimits,
  type TemplateVersion,
} from "./template-records.js";
import { decodeText, placeholdersIn } from "../wire/template-text.js";
import type { SpooledFile } from "./upload-spool.js";
import { looksLikeZip, unpackZip } from "./zip.js";

/** Lock key of every template write and of blob collection. */
const WRITE_LOCK = "templates";
/** Files listed per variable in a scan result. */
const SCAN_FILES_PER_VARIABLE_MAX = 50;
/** Variable names: the placeholder syntax. */
const VARIABLE_NAME_PATTERN = /^[A-Za-z0-9_.-]{1,64}$/;
/** Longest variable value, in characters. */
const VARIABLE_VALUE_LENGTH_MAX = 4096;

/** A directory listing row. */
export interface FileListing {
  name: string;
  path: string;
  type: "file" | "directory";
  size: number;
  mode: number;
  sha256: string;
}

/** The outcome of a change: the hashes before and after (equal when nothing changed). */
export interface TemplateChange {
  template: Template;
  oldHash: string;
  newHash: string;
  changed: boolean;
}

/** A version's manifest with what the daemon needs to unpack it. */
export interface TemplateManifest {
  templateName: string;
  hash: string;
  variables: Record<string, string>;
  entries: ManifestEntry[];
}

/** One search hit: a path match (no line) or a matching line of a text file. */
export interface SearchHit {
  path: string;
  line?: number;
  preview?: string;
}

/** A file given to {@link TemplateService.upload}: bytes in memory, or a multipart part spooled to disk. */
export type UploadedFile = { fileName: string; data: Uint8Array } | SpooledFile;

/** A file's bytes as a stream, with what the response headers need. */
export interface FileStream {
  entry: ManifestEntry;
  stream: ReadableStream<Uint8Array>;
}

/** One change of an upload or an archive: a directory, or a file with its content. */
type TreeWrite = ArchiveEntry;

/** An archive to import: bytes in memory, a file on disk (a spooled upload), or a stream. */
export type ArchiveInput = Uint8Array | { path: string } | AsyncIterable<Uint8Array>;

/** A version's files as a tar.gz stream. */
export interface ArchiveStream {
  hash: string;
  /** Total bytes of the files (the archive's own length is known only once it is written). */
  sizeBytes: number;
  stream: Readable;
}

interface ParsedManifest {
  entries: ManifestEntry[];
  byPath: Map<string, ManifestEntry>;
  /** File entries by the sha256 of their bytes (what the blob route serves). */
  files: Map<string, ManifestEntry>;
  /** Blobs holding file bytes: whole files, and the chunks of chunked files. */
  blobs: Set<string>;
  /** Tree objects, the root (the template hash) included. */
  trees: Set<string>;
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
}

/** Owns templates, their versions and their blobs; routes call this, never the stores. */
export class TemplateService {
  readonly limits: TemplateLimits;
  private readonly templates: Collection<StoredTemplate>;
  private readonly versions: Collection<StoredTemplateVersion>;
  private readonly blobs: BlobStore;
  private readonly fileBlobs: FileBlobs;
  private readonly events: EventBus;
  private readonly clock: Clock;
  private readonly lock = new KeyedMutex();
  private readonly manifestCache = new Map<string, ParsedManifest>();
  private readonly spoolDirectory: string;

  constructor(deps: TemplateServiceDeps) {
    this.limits = { ...DEFAULT_TEMPLATE_LIMITS, ...deps.limits };
    this.spoolDirectory = deps.spoolDirectory ?? tmpdir();
    this.templates = deps.documents.collection<StoredTemplate>(TEMPLATES_COLLECTION);
    this.versions = deps.documents.collection<StoredTemplateVersion>(TEMPLATE_VERSIONS_COLLECTION, {
      indexes: [{ name: "template_versions_template", field: "templateName" }],
    });
    this.blobs = deps.blobs;
    this.fileBlobs = new FileBlobs(deps.blobs);
    this.events = deps.events;
    this.clock = deps.clock;
  }

  // ---- metadata -------------------------------------------------------------------------------

  /** Every template except the synthetic `_` ones, by name. */
  async list(): Promise<Template[]> {
    const docs = await this.templates.find({}, { sort: { field: "name", direction: 1 } });
    return docs.filter((d) => !d.name.startsWith("_")).map(toTemplate);
  }

  /** One template; 404 `Template not found: <name>`. */
  async get(name: string): Promise<Template> {
    return toTemplate(await this.load(name));
  }

  /** Creates an empty template (its first version is the empty manifest). */
  async create(input: { name: string; description?: string; platform?: string }): Promise<Template> {
    assertTemplateName(input.name, "name");
    return this.lock.run(WRITE_LOCK, async () => {
      if (await this.templates.get(input.name)) throw conflict(`Template already exists: ${input.name}`);
      return this.insertTemplate(input.name, input.description ?? "", input.platform ?? "", []);
    });
  }

  /** Changes description and/or platform; returns the records before and after. */
  async update(name: string, patch: { description?: string; platform?: string }): Promise<{ before: Template; after: Template }> {
    return this.lock.run(WRITE_LOCK, async () => {
      const doc = await this.load(name);
      const next: StoredTemplate = {
        ...doc,
        description: patch.description ?? doc.description,
        platform: patch.platform ?? doc.platform,
        updatedAt: this.now(),
      };
      await this.templates.put(next);
      return { before: toTemplate(doc), after: toTemplate(next) };
    });
  }

  /** Deletes a template, its versions and every blob no other version uses; 400 PROTECTED for module-plugin templates. */
  async delete(name: string): Promise<Template> {
    if (name.startsWith(PROTECTED_TEMPLATE_PREFIX)) throw badRequest(`Template is protected: ${name}`, "PROTECTED");
    return this.lock.run(WRITE_LOCK, async () => {
      const doc = await this.load(name);
      const versions = await this.versions.find({ templateName: name });
      await this.templates.delete(name);
      for (const v of versions) await this.versions.delete(v._id);
      await this.collectGarbage(versions.map((v) => v.hash));
      return toTemplate(doc);
    });
  }

  // ---- versions -------------------------------------------------------------------------------

  /** Versions newest first; 404 for an unknown template. */
  async listVersions(name: string): Promise<TemplateVersion[]> {
    await this.load(name);
    const docs = await this.versions.find({ templateName: name }, { sort: { field: "seq", direction: -1 } });
    return docs.map(toVersion);
  }

  /** Deletes a snapshot (not the current one) and collects blobs no version uses any more. */
  async deleteVersion(name: string, hash: string): Promise<TemplateVersion> {
    return this.lock.run(WRITE_LOCK, async () => {
      const doc = await this.load(name);
      const version = await this.versions.get(versionId(name, hash));
      if (!version) throw notFound(`Version not found: ${hash}`);
      if (doc.hash === hash) throw conflict("The current version cannot be deleted; roll back to another version first");
      await this.versions.delete(version._id);
      await this.collectGarbage([hash]);
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
      const doc = await this.load(name);
      const version = await this.versions.get(versionId(name, hash.trim()));
      if (!version) throw notFound(`Version not found: ${hash}`);
      const manifest = await this.readManifest(version.hash, name);
      for (const blob of [...manifest.trees, ...manifest.blobs]) {
        if (!(await this.blobs.has(blob))) throw noSnapshot(name, version.hash);
      }
      const next: StoredTemplate = {
        ...doc,
        hash: version.hash,
        sizeBytes: version.sizeBytes,
        fileCount: version.fileCount,
        updatedAt: this.now(),
      };
      await this.templates.put(next);
      if (doc.hash !== version.hash) {
        this.events.publish(EventTypes.TEMPLATE_UPDATED, { templateName: name, oldHash: doc.hash, newHash: version.hash });
      }
      return { template: toTemplate(next), oldHash: doc.hash, newHash: version.hash, changed: doc.hash !== version.hash };
    });
  }

  // ---- files: reading -------------------------------------------------------------------------

  /** The manifest of `version` (a hash of this template) or of the current version. */
  async manifest(name: string, version?: string): Promise<TemplateManifest> {
    const doc = await this.load(name);
    const hash = await this.resolveVersion(doc, version);
    const parsed = await this.readManifest(hash);
    const entries = parsed.entries.map((e) => ({ path: e.path, mode: e.mode, size: e.size, sha256: e.sha256 }));
    return { templateName: name, hash, variables: { ...doc.variables }, entries };
  }

  /**
   * The bytes named `sha256` when they belong to `version` (default: current) of template `name`: a
   * file of that version (whole, however it is stored) or its root tree object.
   */
  async blob(name: string, sha256: string, version?: string): Promise<Uint8Array> {
    const found = await this.findBlob(name, sha256, version);
    const data = "tree" in found ? found.tree : await this.fileBlobs.read(found.entry);
    if (!data) throw noSnapshot(name, found.hash);
    return data;
  }

  /** {@link blob} as a stream that holds one stored blob at a time. */
  async openBlob(name: string, sha256: string, version?: string): Promise<{ size: number; stream: ReadableStream<Uint8Array> }> {
    const found = await this.findBlob(name, sha256, version);
    if ("tree" in found) return { size: found.tree.byteLength, stream: new Blob([found.tree]).stream() };
    if (!(await this.fileBlobs.has(found.entry))) throw noSnapshot(name, found.hash);
    return { size: found.entry.size, stream: this.fileBlobs.stream(found.entry) };
  }

  /** Lists the directory `path` (root when empty) of `version` (default: current). */
  async listFiles(name: string, path: string | undefined, version?: string): Promise<{ path: string; hash: string; entries: FileListing[] }> {
    const dir = normalizeTemplatePath(path ?? "", "path", { allowRoot: true });
    const { parsed, hash } = await this.readVersion(name, version);
    if (dir !== "") {
      const entry = parsed.byPath.get(dir);
      if (!entry || !isDirEntry(entry)) throw notFound(`Directory not found: ${dir}`);
    }
    const entries = parsed.entries
      .filter((e) => parentOf(e.path) === dir)
      .map((e) => ({ name: baseName(e.path), path: e.path, type: isDirEntry(e) ? ("directory" as const) : ("file" as const), size: e.size, mode: e.mode, sha256: e.sha256 }));
    return { path: dir, hash, entries };
  }

  /** Reads a file's bytes from `version` (default: current). */
  async readFile(name: string, path: string | undefined, version?: string): Promise<{ entry: ManifestEntry; data: Uint8Array }> {
    const file = normalizeTemplatePath(path ?? "", "path");
    const { parsed, hash } = await this.readVersion(name, version);
    const entry = parsed.byPath.get(file);
    if (!entry || isDirEntry(entry)) throw notFound(`File not found: ${file}`);
    const data = await this.fileBlobs.read(entry);
    if (!data) throw noSnapshot(name, hash);
    return { entry, data };
  }

  /** A file of `version` (default: current) as a stream that holds one stored blob at a time. */
  async openFile(name: string, path: string | undefined, version?: string): Promise<FileStream> {
    const file = normalizeTemplatePath(path ?? "", "path");
    const { parsed, hash } = await this.readVersion(name, version);
    const entry = parsed.byPath.get(file);
    if (!entry || isDirEntry(entry)) throw notFound(`File not found: ${file}`);
    if (!(await this.fileBlobs.has(entry))) throw noSnapshot(name, hash);
    return { entry, stream: this.fileBlobs.stream(entry) };
  }

  /** Reads a text file (UTF-8, at most `textBytesMax`); 422 NOT_TEXT for binary or larger files. */
  async readText(name: string, path: string | undefined, version?: string): Promise<{ path: string; content: string; size: number; sha256: string }> {
    const file = normalizeTemplatePath(path ?? "", "path");
    const { parsed } = await this.readVersion(name, version);
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
      const writes: TreeWrite[] = [];
      for (const file of files) {
        if (spool && isZipUpload(file)) {
          const source = "data" in file ? { data: file.data } : { path: file.path };
          for (const entry of await unpackZip(source, this.remainingBounds(writes), spool)) writes.push(rebase(entry, base));
        } else {
          const fileName = normalizeTemplatePath(file.fileName, "file name");
          const content = "data" in file ? contentOfBytes(file.data) : file.content;
          writes.push({ path: joinTemplatePath(base, fileName), kind: "file", mode: 0, content });
        }
      }
      this.checkArchiveBounds(writes);
      for (const w of writes) normalizeTemplatePath(w.path, "path");
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
    const { parsed, hash } = await this.readVersion(name);
    const entry = parsed.byPath.get(file);
    if (!entry || isDirEntry(entry)) throw notFound(`File not found: ${file}`);
    if (!(await this.fileBlobs.has(entry))) throw noSnapshot(name, hash);
    const spool = await ArchiveSpool.create(this.spoolDirectory);
    try {
      const zipPath = join(spool.directory, "archive.zip");
      const handle = await open(zipPath, "wx");
      try {
        for await (const chunk of this.fileBlobs.chunks(entry)) await handle.writeFile(chunk);
      } finally {
        await handle.close();
      }
      const head = Buffer.alloc(4);
      const reader = await open(zipPath, "r");
      await reader.read(head, 0, 4, 0).finally(() => reader.close());
      if (!looksLikeZip(head)) throw archiveError("the file is not a ZIP archive");
      const writes = (await unpackZip({ path: zipPath }, this.limits, spool)).map((e) => rebase(e, target));
      for (const w of writes) normalizeTemplatePath(w.path, "path");
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
      const doc = await this.load(name);
      const parsed = await this.readManifest(doc.hash);
      const missingBlobs: string[] = [];
      for (const blob of [...parsed.trees, ...parsed.blobs]) if (!(await this.blobs.has(blob))) missingBlobs.push(blob);
      const hash = buildTrees(parsed.entries).rootHash;
      const changed = hash !== doc.hash;
      if (changed) {
        await this.templates.put({ ...doc, hash, updatedAt: this.now() });
        this.events.publish(EventTypes.TEMPLATE_UPDATED, { templateName: name, oldHash: doc.hash, newHash: hash });
      }
      return { hash, previousHash: doc.hash, changed, fileCount: parsed.entries.filter((e) => !isDirEntry(e)).length, missingBlobs };
    });
  }

  // ---- variables, search, inheritance ---------------------------------------------------------

  /** The `{{var}}` substitutions of a template. */
  async variables(name: string): Promise<Record<string, string>> {
    return { ...(await this.load(name)).variables };
  }

  /** Replaces every substitution; returns the map before and after. */
  async replaceVariables(name: string, variables: Record<string, string>): Promise<{ before: Record<string, string>; after: Record<string, string> }> {
    const entries = Object.entries(variables);
    if (entries.length > this.limits.variablesMax) throw validationError(`variables: more than ${this.limits.variablesMax}`);
    for (const [key, value] of entries) {
      if (!VARIABLE_NAME_PATTERN.test(key)) throw validationError(`variables.${key.slice(0, 80)}: name must match ${VARIABLE_NAME_PATTERN.source}`);
      if (typeof value !== "string" || value.length > VARIABLE_VALUE_LENGTH_MAX) throw validationError(`variables.${key}: must be a string of at most ${VARIABLE_VALUE_LENGTH_MAX} characters`);
    }
    return this.lock.run(WRITE_LOCK, async () => {
      const doc = await this.load(name);
      const after = Object.fromEntries(entries);
      await this.templates.put({ ...doc, variables: after, updatedAt: this.now() });
      return { before: doc.variables, after };
    });
  }

  /** Placeholders found in the current text files, with where they occur and whether they are defined. */
  async scanVariables(name: string): Promise<{ variables: { name: string; defined: boolean; files: string[] }[]; truncated: boolean }> {
    const doc = await this.load(name);
    const found = new Map<string, string[]>();
    const truncated = await this.eachText(doc, (path, text) => {
      for (const variable of placeholdersIn(text)) {
        const files = found.get(variable) ?? [];
        if (files.length < SCAN_FILES_PER_VARIABLE_MAX) files.push(path);
        found.set(variable, files);
      }
      return true;
    });
    const variables = [...found].sort(([a], [b]) => (a < b ? -1 : 1)).map(([variable, files]) => ({ name: variable, defined: Object.hasOwn(doc.variables, variable), files }));
    return { variables, truncated };
  }

  /** Case-insensitive search of paths and text lines; at most `maxResults` hits. */
  async search(name: string, query: string, maxResults: number): Promise<{ query: string; results: SearchHit[]; truncated: boolean }> {
    const doc = await this.load(name);
    const needle = query.toLowerCase();
    const results: SearchHit[] = [];
    const parsed = await this.readManifest(doc.hash);
    for (const entry of parsed.entries) {
      if (results.length >= maxResults) return { query, results, truncated: true };
      if (entry.path.toLowerCase().includes(needle)) results.push({ path: entry.path });
    }
    const scanTruncated = await this.eachText(doc, (path, text) => {
      const lines = text.split("\n");
      for (let i = 0; i < lines.length; i++) {
        if (!lines[i].toLowerCase().includes(needle)) continue;
        if (results.length >= maxResults) return false;
        results.push({ path, line: i + 1, preview: lines[i].slice(0, 200) });
      }
      return true;
    });
    return { query, results, truncated: scanTruncated };
  }

  /** The layers that apply for this template: base, base-<platform>, then itself (existing ones only). */
  async inheritance(name: string): Promise<{ chain: { name: string; hash: string }[] }> {
    const doc = await this.load(name);
    const names = ["base", ...(doc.platform ? [`base-${doc.platform}`] : []), name];
    const chain: { name: string; hash: string }[] = [];
    for (const layer of [...new Set(names)]) {
      const found = layer === name ? doc : await this.templates.get(layer);
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
    const { parsed, hash } = await this.readVersion(name, version);
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
    if (await this.templates.get(name)) throw conflict(`Template already exists: ${name}`); // before unpacking, not after
    const spool = await ArchiveSpool.create(this.spoolDirectory);
    try {
      const input: AsyncIterable<Uint8Array> = archive instanceof Uint8Array ? Readable.from([archive]) : "path" in archive ? createReadStream(archive.path) : archive;
      const writes = await unpackTar(input, this.limits, spool);
      return await this.lock.run(WRITE_LOCK, async () => {
        if (await this.templates.get(name)) throw conflict(`Template already exists: ${name}`);
        const tree = new FileTree([]);
        applyWrites(tree, writes);
        await this.storeBlobs(tree);
        return this.insertTemplate(name, meta.description ?? "", meta.platform ?? "", tree.toEntries());
      });
    } finally {
      await spool.dispose();
    }
  }

  // ---- internals ------------------------------------------------------------------------------

  private now(): string {
    return isoFromMs(this.clock.nowMs());
  }

  private async load(name: string): Promise<StoredTemplate> {
    const doc = typeof name === "string" && name.length <= 256 ? await this.templates.get(name) : null;
    if (!doc) throw notFound(`Template not found: ${name}`);
    return doc;
  }

  private async resolveVersion(doc: StoredTemplate, version: string | undefined): Promise<string> {
    if (version === undefined || version === "" || version === doc.hash) return doc.hash;
    if (!(await this.versions.get(versionId(doc.name, version)))) throw notFound(`Version not found: ${version}`);
    return version;
  }

  private async readVersion(name: string, version?: string): Promise<{ doc: StoredTemplate; hash: string; parsed: ParsedManifest }> {
    const doc = await this.load(name);
    const hash = await this.resolveVersion(doc, version);
    return { doc, hash, parsed: await this.readManifest(hash, name) };
  }

  /** The root tree object or the file entry that `sha256` names in a version; 404 when it names neither. */
  private async findBlob(name: string, sha256: string, version?: string): Promise<{ hash: string; tree: Uint8Array } | { hash: string; entry: ManifestEntry }> {
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

  /** The parsed manifest blob `hash`; 422 NO_SNAPSHOT when the blob is gone. */
  private async readManifest(hash: string, name = ""): Promise<ParsedManifest> {
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
    while (this.manifestCache.size > this.limits.manifestCacheEntriesMax) this.manifestCache.delete(this.manifestCache.keys().next().value!);
    return parsed;
  }

  /** Applies `edit` to the current files and, when they changed, records a new version. */
  private change(name: string, edit: (tree: FileTree) => void): Promise<TemplateChange> {
    return this.lock.run(WRITE_LOCK, async () => {
      const doc = await this.load(name);
      const current = await this.readManifest(doc.hash, name);
      const tree = new FileTree(current.entries);
      edit(tree);
      if (tree.size > this.limits.entriesMax) throw validationError(`template: more than ${this.limits.entriesMax} entries`);
      const entries = tree.toEntries();
      const treeSet = buildTrees(entries);
      if (treeSet.rootHash === doc.hash) return { template: toTemplate(doc), oldHash: doc.hash, newHash: doc.hash, changed: false };
      await this.storeBlobs(tree);
      const next = await this.recordVersion(doc, entries, treeSet, current.trees);
      this.events.publish(EventTypes.TEMPLATE_UPDATED, { templateName: name, oldHash: doc.hash, newHash: next.hash });
      return { template: toTemplate(next), oldHash: doc.hash, newHash: next.hash, changed: true };
    });
  }

  private async storeBlobs(tree: FileTree): Promise<void> {
    await this.fileBlobs.store(tree.pendingBlobs);
  }

  private async insertTemplate(name: string, description: string, platform: string, entries: ManifestEntry[]): Promise<Template> {
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
    return toTemplate(await this.recordVersion(doc, entries));
  }

  /** Stores the new tree objects and the version record, then moves the template to it. */
  private async recordVersion(doc: StoredTemplate, entries: ManifestEntry[], treeSet = buildTrees(entries), knownTrees: ReadonlySet<string> = new Set()): Promise<StoredTemplate> {
    // Trees of the previous version are stored already; only the ones on changed paths are new.
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
   * template: identical files are shared) still uses them. Runs under the write lock.
   */
  private async collectGarbage(hashes: readonly string[]): Promise<number> {
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

  private async eachText(doc: StoredTemplate, visit: (path: string, text: string) => boolean): Promise<boolean> {
    const parsed = await this.readManifest(doc.hash, doc.name);
    let scannedBytes = 0;
    for (const entry of parsed.entries) {
      if (isDirEntry(entry) || entry.size > this.limits.textBytesMax) continue;
      scannedBytes += entry.size;
      if (scannedBytes > this.limits.scanBytesMax) return true;
      const data = await this.fileBlobs.read(entry);
      const text = data ? decodeText(data) : null;
      if (text !== null && !visit(entry.path, text)) return true;
    }
    return false;
  }

  /** The archive limits left for the next ZIP of an upload, after the writes collected so far. */
  private remainingBounds(writes: readonly TreeWrite[]): ArchiveLimits {
    let total = 0;
    for (const w of writes) total += w.kind === "file" ? w.content.size : 0;
    return { entriesMax: Math.max(0, this.limits.entriesMax - writes.length), unpackedBytesMax: Math.max(0, this.limits.unpackedBytesMax - total) };
  }

  private checkArchiveBounds(writes: readonly TreeWrite[]): void {
    if (writes.length > this.limits.entriesMax) throw archiveError(`more than ${this.limits.entriesMax} entries`);
    let total = 0;
    for (const w of writes) total += w.kind === "file" ? w.content.size : 0;
    if (total > this.limits.unpackedBytesMax) throw archiveError(`unpacks to more than ${this.limits.unpackedBytesMax} bytes`);
  }
}

/** 422 for a template name that breaks the naming rule (create and import). */
export function assertTemplateName(name: string, field: string): void {
  if (typeof name !== "string" || name.length === 0 || name.length > TEMPLATE_NAME_LENGTH_MAX || !TEMPLATE_NAME_PATTERN.test(name)) {
    throw validationError(`${field}: must match ${TEMPLATE_NAME_PATTERN.source} and be at most ${TEMPLATE_NAME_LENGTH_MAX} characters`);
  }
}

function versionId(name: string, hash: string): string {
  return `${name}@${hash}`;
}

function noSnapshot(name: string, hash: string): ApiError {
  return new ApiError(422, "NO_SNAPSHOT", `Snapshot unavailable: ${name ? `${name}@` : ""}${hash}`);
}

/** An archive entry moved below directory `base` of the template. */
function rebase(entry: ArchiveEntry, base: string): TreeWrite {
  return { ...entry, path: joinTemplatePath(base, entry.path) };
}

function applyWrites(tree: FileTree, writes: readonly TreeWrite[]): void {
  for (const write of writes) {
    if (write.kind === "dir") tree.mkdir(write.path);
    else tree.writeContent(write.path, write.content, write.mode);
  }
}

function isZipUpload(file: UploadedFile): boolean {
  return file.fileName.toLowerCase().endsWith(".zip") || looksLikeZip("data" in file ? file.data : file.head);
}
