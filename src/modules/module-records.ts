/**
 * Installed modules as the cluster knows them: one document per module in `platform_modules` (the
 * validated manifest, the bundle's digest and chunk blobs, the signature and the key that made it,
 * the generation every change raises) and the bundle's bytes in the shared blob store, chunked like
 * template files. Every controller runs what these records say; backups carry both.
 */
import { createWriteStream } from "node:fs";
import { pipeline } from "node:stream/promises";
import type { BlobStore, Collection, Doc, DocumentStore } from "../store/ports.js";
import { FileBlobs } from "../templates/file-blobs.js";
import { storedBlobsOf, type FileContent } from "../templates/file-content.js";
import type { ModuleManifest } from "./manifest/manifest-types.js";

/** The collection of installed modules. */
export const MODULE_RECORDS_COLLECTION = "platform_modules";

/** One installed module. */
export interface ModuleRecord extends Doc {
  /** The module id. */
  _id: string;
  version: string;
  manifest: ModuleManifest;
  bundle: { sha256: string; sizeBytes: number; chunks?: string[] };
  /** The detached signature (base64), null for an unsigned module. */
  signature: string | null;
  /** The id of the trusted key that verified it. */
  signedBy: string | null;
  /** sha256 over the files outside the frontend. */
  backendHash: string;
  frontend: { entry: string; contentHash: string; files: number } | null;
  /** `upload`, or the registry index URL it came from. */
  source: string;
  installedAt: string;
  updatedAt: string;
  installedBy: string;
  /** Raised by every install, upgrade and frontend change: controllers compare it with what they run. */
  generation: number;
}

/** See the module comment. */
export class ModuleRecords {
  readonly collection: Collection<ModuleRecord>;
  private readonly files: FileBlobs;

  constructor(
    documents: DocumentStore,
    private readonly blobs: BlobStore,
  ) {
    this.collection = documents.collection<ModuleRecord>(MODULE_RECORDS_COLLECTION);
    this.files = new FileBlobs(blobs);
  }

  list(): Promise<ModuleRecord[]> {
    return this.collection.find({}, { sort: { field: "_id", direction: 1 } });
  }

  get(id: string): Promise<ModuleRecord | null> {
    return this.collection.get(id);
  }

  async put(record: ModuleRecord): Promise<void> {
    await this.collection.put(record);
  }

  delete(id: string): Promise<boolean> {
    return this.collection.delete(id);
  }

  /** Stores a bundle file's blobs (one chunk in memory at a time). */
  storeBundle(content: FileContent): Promise<void> {
    return this.files.store(content.sources);
  }

  /** Writes a record's bundle from the blob store to `path`; false when a blob is missing. */
  async fetchBundle(record: ModuleRecord, path: string): Promise<boolean> {
    const file = { path: record._id, size: record.bundle.sizeBytes, sha256: record.bundle.sha256, chunks: record.bundle.chunks };
    if (!(await this.files.has(file))) return false;
    await pipeline(this.files.chunks(file), createWriteStream(path, { mode: 0o600 }));
    return true;
  }

  /** Deletes a bundle's blobs unless another record still uses them. */
  async collectBundle(bundle: ModuleRecord["bundle"]): Promise<void> {
    const hashes = storedBlobsOf(bundle);
    const inUse = new Set((await this.list()).flatMap((record) => storedBlobsOf(record.bundle)));
    for (const hash of hashes) if (!inUse.has(hash)) await this.blobs.delete(hash);
  }
}
