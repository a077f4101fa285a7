/**
 * Backups of this controller: bundles and their records in one directory (`<data.dir>/backups`),
 * created from the stores, uploaded from elsewhere, verified, downloaded, deleted, pruned to
 * `backup.retentionCount`, and restored.
 *
 * Files: `<id>.tar.gz` (the bundle) and `<id>.json` (its record: the manifest plus the bundle's size
 * and sha256). A bundle is written under `tmp/` and renamed into place, then its record; only a
 * bundle with a record exists, so a controller killed while writing leaves nothing but `tmp/`, which
 * the next start empties.
 *
 * Restores are journaled: `restore-journal.json` is written (fsynced) before anything changes and
 * removed once everything has; a start that finds it finishes the restore from the same bundle
 * before the controller serves (every step of a restore can be applied twice). So after a crash the
 * stores are as before (no journal yet) or as restored, never a blend.
 */
import { createHash, randomBytes } from "node:crypto";
import { createReadStream } from "node:fs";
import { mkdir, open, readdir, readFile, rename, rm, stat, unlink } from "node:fs/promises";
import { join } from "node:path";
import { Readable } from "node:stream";
import type { Logger } from "../logs/types.js";
import type { Clock } from "../shared/clock.js";
import { ApiError, badRequest, conflict, notFound, validationError } from "../shared/errors.js";
import type { BlobStore, DocumentStore, KvStore } from "../store/ports.js";
import { BACKUP_ID_PATTERN, type BackupRecord, type BundleManifest, type RestoreReport, type ValidationReport } from "./bundle-format.js";
import { DEFAULT_BUNDLE_LIMITS, type BundleLimits } from "./bundle-reader.js";
import { verifyBundle } from "./bundle-validator.js";
import { writeBundle, type BundleOrigin } from "./bundle-writer.js";
import { applyBundle, plannedRestore, writeDurably, type RestoreParts } from "./restore.js";

const JOURNAL_FILE = "restore-journal.json";

/** Who and what makes the bundles (manifest fields that are not data). */
export interface BackupOrigin {
  nodeId: () => string;
  softwareVersion: string;
  profile: string;
  documentStore: string;
}

export interface BackupServiceDeps {
  documents: DocumentStore;
  kv: KvStore;
  blobs: BlobStore;
  /** `<data.dir>/backups`. */
  directory: string;
  /** `backup.retentionCount`. */
  retentionCount: number;
  origin: BackupOrigin;
  clock: Clock;
  logger: Logger;
  /** Called after a restore changed the datastores (drops cached principals). */
  onRestored?: () => void;
  /**
   * Runs a restore of the datastores with the cluster in maintenance (restore-coordination.ts);
   * without it the restore runs under nobody's feet but its own.
   */
  maintenance?: { run<T>(id: string, work: (signal: AbortSignal) => Promise<T>, options?: { finishing?: boolean }): Promise<T> };
  /** Runs after the datastores were restored, still in maintenance: stops the processes the restored records do not hold. */
  afterDatastores?: () => Promise<void>;
  limits?: BundleLimits;
}

/** Restore options (spec document 2, POST /api/v1/restore). */
export interface RestoreOptions extends RestoreParts {
  dryRun: boolean;
}

interface Journal {
  id: string;
  startedAt: string;
  parts: RestoreParts;
  rollbackRoot: string;
}

/** See the module comment. Call {@link start} once before use. */
export class BackupService {
  private busy: string | null = null;
  private readonly limits: BundleLimits;

  constructor(private readonly deps: BackupServiceDeps) {
    this.limits = deps.limits ?? DEFAULT_BUNDLE_LIMITS;
  }

  private get tmpDir(): string {
    return join(this.deps.directory, "tmp");
  }

  /** Empties `tmp/` and finishes a restore a previous process was killed in. */
  async start(): Promise<void> {
    await rm(this.tmpDir, { recursive: true, force: true });
    await mkdir(this.tmpDir, { recursive: true });
    const journal = await this.readJournal();
    if (!journal) return;
    this.deps.logger.warn(`Finishing the restore of backup ${journal.id} that was interrupted (started ${journal.startedAt})`);
    const record = await this.get(journal.id).catch(() => {
      throw new Error(
        `A restore of backup ${journal.id} was interrupted and its bundle is gone from ${this.deps.directory}: put the bundle back to finish it, ` +
          `or remove ${JOURNAL_FILE} to start with the stores as the interrupted restore left them`,
      );
    });
    const finish = async (signal?: AbortSignal) => {
      await applyBundle(this.bundlePath(record.id), record, journal.parts, this.targets(), journal.rollbackRoot, this.limits, signal);
      await this.removeJournal();
    };
    // The other controllers of a cluster pause while the datastores are written again, as for the restore itself.
    if (journal.parts.datastores && this.deps.maintenance) await this.deps.maintenance.run(journal.id, finish, { finishing: true });
    else await finish();
    this.deps.onRestored?.();
    this.deps.logger.info(`Restore of backup ${journal.id} finished`);
  }

  /** Writes a bundle of the stores as they are now, records it and prunes to the retention count. */
  async create(): Promise<BackupRecord> {
    return this.exclusive("backup", async () => {
      const now = new Date(this.deps.clock.nowMs());
      const id = `${now.toISOString().replace(/[-:.]/g, "")}-${randomBytes(4).toString("hex")}`;
      const origin: BundleOrigin = {
        id,
        createdAt: now.toISOString(),
        controller: { nodeId: this.deps.origin.nodeId(), softwareVersion: this.deps.origin.softwareVersion },
        profile: this.deps.origin.profile,
        documentStore: this.deps.origin.documentStore,
      };
      const temp = join(this.tmpDir, `${id}.tar.gz`);
      try {
        const written = await writeBundle(this.deps, origin, temp, join(this.tmpDir, `${id}.staging`));
        const record = await this.commit(id, temp, written.manifest, written.sizeBytes, written.sha256);
        this.deps.logger.info(`Backup ${id} written: ${record.mongoDocumentCount} documents, ${record.blobs.count} blobs, ${record.sizeBytes} bytes`);
        await this.prune();
        return record;
      } finally {
        await rm(temp, { force: true });
      }
    });
  }

  /** Every recorded backup, newest first. */
  async list(): Promise<BackupRecord[]> {
    const names = await readdir(this.deps.directory).catch((err: unknown) => {
      if ((err as { code?: string }).code === "ENOENT") return [] as string[];
      throw err;
    });
    const records: BackupRecord[] = [];
    for (const name of names) {
      const id = name.endsWith(".json") ? name.slice(0, -5) : "";
      if (!BACKUP_ID_PATTERN.test(id)) continue;
      const record = await this.readRecord(id);
      if (record) records.push(record);
    }
    return records.sort((a, b) => compareNewestFirst(a, b));
  }

  /** One backup's record; 404 when there is none. */
  async get(id: string): Promise<BackupRecord> {
    const record = BACKUP_ID_PATTERN.test(id) ? await this.readRecord(id) : null;
    if (!record) throw notFound(`Backup ${id} not found`, "BACKUP_NOT_FOUND");
    return record;
  }

  /** The bundle's bytes, streamed from disk. */
  async openDownload(id: string): Promise<{ record: BackupRecord; stream: ReadableStream<Uint8Array> }> {
    const record = await this.get(id);
    const stream = Readable.toWeb(createReadStream(this.bundlePath(id))) as ReadableStream<Uint8Array>;
    return { record, stream };
  }

  /** Deletes a backup (its record first, so a half-deleted one is simply gone). */
  async delete(id: string): Promise<BackupRecord> {
    return this.exclusive("delete", async () => {
      const record = await this.get(id);
      await this.removeFiles(id);
      return record;
    });
  }

  /**
   * Takes a bundle made elsewhere: streams the body to `tmp/`, verifies it and records it under the
   * id its manifest carries. 422 INVALID_BUNDLE when it does not verify, 409 when that id exists.
   */
  async upload(body: ReadableStream<Uint8Array> | null): Promise<BackupRecord> {
    if (!body) throw badRequest("The request has no body: send the bundle (tar.gz) as the body");
    return this.exclusive("upload", async () => {
      const temp = join(this.tmpDir, `upload-${randomBytes(6).toString("hex")}.tar.gz`);
      try {
        const { sizeBytes, sha256 } = await spoolBody(body, temp);
        const { report, manifest } = await verifyBundle(temp, null, this.limits);
        if (!manifest || !report.valid) throw validationError(`The bundle does not verify: ${describeFindings(report)}`, "INVALID_BUNDLE");
        if (await this.readRecord(manifest.id)) throw conflict(`Backup ${manifest.id} already exists`, "BACKUP_EXISTS");
        const record = await this.commit(manifest.id, temp, manifest, sizeBytes, sha256);
        await this.prune();
        return record;
      } finally {
        await rm(temp, { force: true });
      }
    });
  }

  /** The validation report of a stored bundle. */
  async verify(id: string): Promise<ValidationReport> {
    const record = await this.get(id);
    const { report } = await verifyBundle(this.bundlePath(id), id, this.limits);
    const file = await stat(this.bundlePath(id)).catch(() => null);
    if (!file) report.missingFiles.unshift(`${id}.tar.gz`);
    else if (file.size !== record.sizeBytes) report.checksumMismatches.unshift(`${id}.tar.gz`);
    report.valid = report.valid && file !== null && file.size === record.sizeBytes;
    return report;
  }

  /**
   * Restores a stored bundle: verifies it (422 RESTORE_REJECTED when it does not verify), then, unless
   * a dry run, journals and applies the chosen parts (see restore.ts).
   */
  async restore(id: string, options: RestoreOptions): Promise<RestoreReport> {
    return this.exclusive("restore", async () => {
      const record = await this.get(id);
      const { report, manifest } = await verifyBundle(this.bundlePath(id), id, this.limits);
      if (!report.valid || !manifest) throw new ApiError(422, "RESTORE_REJECTED", `Backup ${id} failed validation: ${describeFindings(report)}`);
      const parts: RestoreParts = { datastores: options.datastores, filesystem: options.filesystem };
      if (options.dryRun || (!parts.datastores && !parts.filesystem)) {
        const planned = plannedRestore(manifest, parts);
        return this.report(id, options.dryRun, false, planned, null, parts);
      }
      const apply = async (signal?: AbortSignal): Promise<RestoreReport> => {
        const stamp = new Date(this.deps.clock.nowMs()).toISOString().replace(/[-:.]/g, "");
        const rollbackRoot = join(this.deps.directory, "rollback", `${stamp}-${id}`);
        const journal: Journal = { id, startedAt: new Date(this.deps.clock.nowMs()).toISOString(), parts, rollbackRoot };
        if (parts.filesystem) await mkdir(rollbackRoot, { recursive: true });
        await writeDurably(join(this.deps.directory, JOURNAL_FILE), Buffer.from(JSON.stringify(journal)));
        await fsyncDirectory(this.deps.directory);
        this.deps.logger.warn(`Restoring backup ${id} (datastores ${parts.datastores}, filesystem ${parts.filesystem})`);
        const applied = await applyBundle(this.bundlePath(id), record, parts, this.targets(), rollbackRoot, this.limits, signal);
        await this.removeJournal();
        if (parts.datastores) {
          this.deps.onRestored?.();
          signal?.throwIfAborted();
          await this.deps.afterDatastores?.();
        }
        this.deps.logger.info(
          `Restore of backup ${id} done: ${applied.collections.length} collections, ${applied.entryCount} blobs, ${applied.rolledAside} set aside`,
        );
        return this.report(id, false, true, applied, parts.filesystem ? rollbackRoot : null, parts);
      };
      // Blobs are content-addressed and only the datastores hold what the schedulers act on.
      return parts.datastores && this.deps.maintenance ? this.deps.maintenance.run(id, apply) : apply();
    });
  }

  private report(
    id: string,
    dryRun: boolean,
    applied: boolean,
    planned: { entryCount: number; collections: string[]; prefixGroups: string[]; kvPrefixes: string[] },
    rollbackRoot: string | null,
    parts: RestoreParts,
  ): RestoreReport {
    return {
      id,
      dryRun,
      filesystem: { applied: applied && parts.filesystem, entryCount: planned.entryCount, rollbackRoot },
      datastores: {
        applied: applied && parts.datastores,
        mongoCollections: planned.collections,
        mongoPrefixGroups: planned.prefixGroups,
        redisPrefixes: planned.kvPrefixes,
      },
    };
  }

  private targets() {
    return { documents: this.deps.documents, kv: this.deps.kv, blobs: this.deps.blobs, clock: this.deps.clock };
  }

  /** Runs one writing operation at a time; another one meanwhile gets 409 BACKUP_BUSY. */
  private async exclusive<T>(what: string, work: () => Promise<T>): Promise<T> {
    if (this.busy) throw conflict(`A ${this.busy} is running on this controller; try again when it is done`, "BACKUP_BUSY");
    this.busy = what;
    try {
      return await work();
    } finally {
      this.busy = null;
    }
  }

  /** Moves a written bundle into place, then writes its record: the record makes it exist. */
  private async commit(id: string, temp: string, manifest: BundleManifest, sizeBytes: number, sha256: string): Promise<BackupRecord> {
    await rename(temp, this.bundlePath(id));
    const record: BackupRecord = { ...manifest, sizeBytes, sha256 };
    await writeDurably(this.recordPath(id), Buffer.from(JSON.stringify(record, null, 2) + "\n"));
    await fsyncDirectory(this.deps.directory);
    return record;
  }

  /** Deletes the oldest backups beyond `backup.retentionCount`. */
  private async prune(): Promise<void> {
    const records = await this.list();
    for (const old of records.slice(this.deps.retentionCount)) {
      await this.removeFiles(old.id);
      this.deps.logger.info(`Backup ${old.id} pruned (backup.retentionCount ${this.deps.retentionCount})`);
    }
  }

  private async removeFiles(id: string): Promise<void> {
    await unlink(this.recordPath(id)).catch(ignoreMissing);
    await unlink(this.bundlePath(id)).catch(ignoreMissing);
    await fsyncDirectory(this.deps.directory);
  }

  private async readRecord(id: string): Promise<BackupRecord | null> {
    try {
      return JSON.parse(await readFile(this.recordPath(id), "utf8")) as BackupRecord;
    } catch (err) {
      if ((err as { code?: string }).code === "ENOENT") return null;
      throw err;
    }
  }

  private async readJournal(): Promise<Journal | null> {
    try {
      return JSON.parse(await readFile(join(this.deps.directory, JOURNAL_FILE), "utf8")) as Journal;
    } catch (err) {
      if ((err as { code?: string }).code === "ENOENT") return null;
      throw err;
    }
  }

  private async removeJournal(): Promise<void> {
    await unlink(join(this.deps.directory, JOURNAL_FILE));
    await fsyncDirectory(this.deps.directory);
  }

  private bundlePath(id: string): string {
    return join(this.deps.directory, `${id}.tar.gz`);
  }

  private recordPath(id: string): string {
    return join(this.deps.directory, `${id}.json`);
  }
}

/** Newest first: by creation time, then by id. */
function compareNewestFirst(a: BackupRecord, b: BackupRecord): number {
  const ka = `${a.createdAt} ${a.id}`;
  const kb = `${b.createdAt} ${b.id}`;
  return ka < kb ? 1 : ka > kb ? -1 : 0;
}

/** The first findings of a report, for an error message. */
function describeFindings(report: ValidationReport): string {
  const findings = [
    ...report.problems,
    ...report.missingFiles.map((f) => `missing file ${f}`),
    ...report.missingDirectories.map((d) => `missing directory ${d}`),
    ...report.missingMongoCollections.map((c) => `missing collection ${c}`),
    ...report.missingMongoCollectionPrefixes.map((p) => `missing collection group ${p}`),
    ...report.missingRedisPrefixes.map((p) => `missing key-value prefix ${p}`),
    ...report.emptyRequiredFiles.map((f) => `empty ${f}`),
    ...report.checksumMismatches.map((f) => `checksum mismatch in ${f}`),
  ];
  return findings.slice(0, 5).join("; ") + (findings.length > 5 ? ` (and ${findings.length - 5} more)` : "");
}

/** Writes a request body to `path` while hashing it. */
async function spoolBody(body: ReadableStream<Uint8Array>, path: string): Promise<{ sizeBytes: number; sha256: string }> {
  const hash = createHash("sha256");
  const handle = await open(path, "wx");
  let sizeBytes = 0;
  try {
    const reader = body.getReader();
    for (;;) {
      const { done, value } = await reader.read().catch((err: unknown) => {
        throw err instanceof ApiError ? err : badRequest("The request body ended before it was complete");
      });
      if (done) break;
      hash.update(value);
      for (let at = 0; at < value.byteLength;) at += (await handle.write(value, at)).bytesWritten;
      sizeBytes += value.byteLength;
    }
    await handle.sync();
  } finally {
    await handle.close();
  }
  return { sizeBytes, sha256: hash.digest("hex") };
}

async function fsyncDirectory(path: string): Promise<void> {
  const handle = await open(path, "r");
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

function ignoreMissing(err: unknown): void {
  if ((err as { code?: string }).code !== "ENOENT") throw err;
}
