/**
 * Backups of this controller: bundles and their records in one directory (`<data.dir>/backups`),
 * created from the stores, uploaded from elsewhere, verified, downloaded, deleted, pruned to
 * `backup.retentionCount`, and restored.
 *
 * Files: `<id>.tar.gz` (the bundle) and `<id>.json` (its record: the manifest plus the bundle's size
 * and sha256), kept by backup-records.ts. A bundle is written under `tmp/` and renamed into place,
 * then its record; only a bundle with a record exists, so a controller killed while writing leaves
 * nothing but `tmp/`, which the next start empties. A damaged backup is reported, never fatal.
 *
 * Trust: every bundle this controller writes is authenticated by the cluster (bundle-auth.ts). An
 * upload records a bundle that is not (another cluster's, or one changed since) as foreign, and a
 * restore refuses it unless asked with `foreign` (the route allows that to an ADMIN only). Only the
 * allowlisted collections are ever written, read or restored (bundle-format.ts). Verifications run
 * one at a time (verification-slot.ts).
 *
 * Restores are journaled: `restore-journal.json` is written (fsynced) before anything changes and
 * removed once everything has; a start that finds it finishes the restore from the same bundle
 * before the controller serves (every step of a restore can be applied twice). So after a crash the
 * stores are as before (no journal yet) or as restored, never a blend.
 */
import { createHash, randomBytes } from "node:crypto";
import { createReadStream } from "node:fs";
import { mkdir, open, readFile, rm, stat, unlink } from "node:fs/promises";
import { join } from "node:path";
import { Readable } from "node:stream";
import type { Logger } from "../logs/types.js";
import type { Clock } from "../shared/clock.js";
import { ApiError, badRequest, conflict, notFound, validationError } from "../shared/errors.js";
import type { BlobStore, DocumentStore, KvStore } from "../store/ports.js";
import type { BundleKey, BundleKeySource } from "./bundle-auth.js";
import { type BackupRecord, type BundleManifest, type RestoreReport, type ValidationReport } from "./bundle-format.js";
import { DEFAULT_BUNDLE_LIMITS, type BundleLimits } from "./bundle-reader.js";
import { emptyReport, requireAuthentication, verifyBundle, type Verification } from "./bundle-validator.js";
import { writeBundle, type BundleOrigin } from "./bundle-writer.js";
import { BackupRecords, fsyncDirectory } from "./backup-records.js";
import { diffRestore } from "./restore-diff.js";
import { applyBundle, plannedRestore, writeDurably, type RestoreParts } from "./restore.js";
import { VerificationSlot } from "./verification-slot.js";

const JOURNAL_FILE = "restore-journal.json";
/** Seconds a client is told to wait after VERIFY_BUSY. */
export const VERIFY_RETRY_AFTER_SECONDS = 5;

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
  /** The cluster's bundle key (bundle-auth.ts); null while the cluster is not ready. */
  bundleKey: BundleKeySource;
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

/** Restore options (spec document 2, POST /api/v1/restore), and `foreign`: take a bundle this cluster did not authenticate. */
export interface RestoreOptions extends RestoreParts {
  dryRun: boolean;
  foreign?: boolean;
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
  private readonly records: BackupRecords;
  private readonly verification = new VerificationSlot();

  constructor(private readonly deps: BackupServiceDeps) {
    this.limits = deps.limits ?? DEFAULT_BUNDLE_LIMITS;
    this.records = new BackupRecords(deps.directory, deps.logger);
  }

  private get tmpDir(): string {
    return join(this.deps.directory, "tmp");
  }

  /** Empties `tmp/`, removes half-written records, and finishes a restore a previous process was killed in. */
  async start(): Promise<void> {
    await rm(this.tmpDir, { recursive: true, force: true });
    await mkdir(this.tmpDir, { recursive: true });
    await this.records.removeLeftovers();
    const journal = await this.readJournal();
    if (!journal) return;
    this.deps.logger.warn(`Finishing the restore of backup ${journal.id} that was interrupted (started ${journal.startedAt})`);
    const lookup = await this.records.read(journal.id);
    if (lookup.state !== "recorded")
      throw new Error(
        `A restore of backup ${journal.id} was interrupted and its bundle is gone from ${this.deps.directory}: put the bundle back to finish it, ` +
          `or remove ${JOURNAL_FILE} to start with the stores as the interrupted restore left them`,
      );
    const record = lookup.record;
    const finish = async (signal?: AbortSignal) => {
      await applyBundle(this.records.bundlePath(record.id), record, journal.parts, this.targets(), journal.rollbackRoot, this.limits, signal);
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
      const key = this.requireKey();
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
        const written = await writeBundle(this.deps, origin, key, temp, join(this.tmpDir, `${id}.staging`));
        if (written.leftOut.length > 0)
          this.deps.logger.warn(`Backup ${id} leaves out collections no backup holds (not in the allowlist): ${written.leftOut.join(", ")}`);
        const record = recordOf(written.manifest, written.manifest.createdAt, written.sizeBytes, written.sha256, false);
        await this.records.commit(record, temp);
        this.deps.logger.info(`Backup ${id} written: ${record.mongoDocumentCount} documents, ${record.blobs.count} blobs, ${record.sizeBytes} bytes`);
        await this.prune(id);
        return record;
      } finally {
        await rm(temp, { force: true });
      }
    });
  }

  /** Every backup that is not damaged, newest first. */
  list(): Promise<BackupRecord[]> {
    return this.records.list();
  }

  /** One backup's record; 404 when there is none, 422 BACKUP_DAMAGED when it is damaged. */
  async get(id: string): Promise<BackupRecord> {
    const lookup = await this.records.lookUp(id);
    if (lookup.state === "missing") throw notFound(`Backup ${id} not found`, "BACKUP_NOT_FOUND");
    if (lookup.state === "damaged")
      throw new ApiError(422, "BACKUP_DAMAGED", `Backup ${id} is damaged: ${lookup.reason}. Verify reports it; delete it when it is of no use`);
    return lookup.record;
  }

  /** The bundle's bytes, streamed from disk. */
  async openDownload(id: string): Promise<{ record: BackupRecord; stream: ReadableStream<Uint8Array> }> {
    const record = await this.get(id);
    const stream = Readable.toWeb(createReadStream(this.records.bundlePath(id))) as ReadableStream<Uint8Array>;
    return { record, stream };
  }

  /** Deletes a backup, a damaged one too (its record first, so a half-deleted one is simply gone). */
  async delete(id: string): Promise<{ id: string } & Partial<BackupRecord>> {
    return this.exclusive("delete", async () => {
      const lookup = await this.records.read(id);
      if (lookup.state === "missing") throw notFound(`Backup ${id} not found`, "BACKUP_NOT_FOUND");
      await this.records.remove(id);
      return lookup.state === "recorded" ? lookup.record : { id };
    });
  }

  /**
   * Takes a bundle made elsewhere: streams the body to `tmp/`, verifies it and records it under the
   * id its manifest carries, dated now. 422 INVALID_BUNDLE when it does not verify, 409 when that id
   * exists. A well-formed bundle this cluster does not authenticate is recorded as foreign.
   */
  async upload(body: ReadableStream<Uint8Array> | null): Promise<BackupRecord> {
    if (!body) throw badRequest("The request has no body: send the bundle (tar.gz) as the body");
    return this.exclusive("upload", async () => {
      const temp = join(this.tmpDir, `upload-${randomBytes(6).toString("hex")}.tar.gz`);
      try {
        const { sizeBytes, sha256 } = await spoolBody(body, temp);
        const { report, manifest, authentication } = await this.verified(temp, null);
        if (!manifest || !report.valid) throw validationError(`The bundle does not verify: ${describeFindings(report)}`, "INVALID_BUNDLE");
        if ((await this.records.read(manifest.id)).state !== "missing") throw conflict(`Backup ${manifest.id} already exists`, "BACKUP_EXISTS");
        const now = new Date(this.deps.clock.nowMs()).toISOString();
        const record = recordOf(manifest, now, sizeBytes, sha256, !authentication.authenticated);
        await this.records.commit(record, temp);
        if (!authentication.authenticated)
          this.deps.logger.warn(`Backup ${manifest.id} was uploaded as foreign (${authentication.reason}): an ADMIN restores it only with foreign: true`);
        await this.prune(manifest.id);
        return record;
      } finally {
        await rm(temp, { force: true });
      }
    });
  }

  /**
   * The validation report of a stored bundle; not valid unless this cluster authenticates it. One
   * at a time: 503 VERIFY_BUSY while another verification runs (verification-slot.ts).
   */
  async verify(id: string): Promise<ValidationReport> {
    const release = this.verification.tryAcquire();
    if (!release) throw new ApiError(503, "VERIFY_BUSY", `Another bundle is being verified on this controller; try again in ${VERIFY_RETRY_AFTER_SECONDS} s`);
    try {
      const lookup = await this.records.read(id);
      if (lookup.state === "missing") throw notFound(`Backup ${id} not found`, "BACKUP_NOT_FOUND");
      if (lookup.state === "damaged") {
        const report = emptyReport(id);
        report.problems.push(`backup ${id} is damaged: ${lookup.reason}`);
        return report;
      }
      const { report, authentication } = await this.verifyHolding(this.records.bundlePath(id), id);
      requireAuthentication(report, authentication);
      const file = await stat(this.records.bundlePath(id)).catch(() => null);
      if (file && file.size !== lookup.record.sizeBytes) {
        report.checksumMismatches.unshift(`${id}.tar.gz`);
        report.valid = false;
      }
      return report;
    } finally {
      release();
    }
  }

  /**
   * Restores a stored bundle: verifies it (422 RESTORE_REJECTED when it does not verify, is damaged,
   * or is not authenticated by this cluster and `foreign` is not set), then, unless a dry run,
   * journals and applies the chosen parts (see restore.ts). A dry run answers as the restore would.
   */
  async restore(id: string, options: RestoreOptions): Promise<RestoreReport> {
    return this.exclusive("restore", async () => {
      const lookup = await this.records.read(id);
      if (lookup.state === "missing") throw notFound(`Backup ${id} not found`, "BACKUP_NOT_FOUND");
      if (lookup.state === "damaged") throw new ApiError(422, "RESTORE_REJECTED", `Backup ${id} is damaged: ${lookup.reason}`);
      const { report, manifest, authentication } = await this.verified(this.records.bundlePath(id), id);
      if (!report.valid || !manifest) throw new ApiError(422, "RESTORE_REJECTED", `Backup ${id} failed validation: ${describeFindings(report)}`);
      if (!authentication.authenticated && options.foreign !== true)
        throw new ApiError(
          422,
          "RESTORE_REJECTED",
          `Backup ${id} is foreign: it is not authenticated by this cluster (${authentication.reason}). ` +
            `An ADMIN restores a bundle of another cluster with foreign: true (cloudctl restore --foreign)`,
        );
      const foreign = !authentication.authenticated;
      const parts: RestoreParts = { datastores: options.datastores, filesystem: options.filesystem };
      if (options.dryRun || (!parts.datastores && !parts.filesystem)) {
        const planned = plannedRestore(manifest, parts);
        const report = this.report(id, options.dryRun, foreign, false, planned, null, parts);
        if (options.dryRun) report.diff = await diffRestore(this.records.bundlePath(id), manifest, parts, this.targets(), this.limits);
        return report;
      }
      const apply = async (signal?: AbortSignal): Promise<RestoreReport> => {
        const stamp = new Date(this.deps.clock.nowMs()).toISOString().replace(/[-:.]/g, "");
        const rollbackRoot = join(this.deps.directory, "rollback", `${stamp}-${id}`);
        const journal: Journal = { id, startedAt: new Date(this.deps.clock.nowMs()).toISOString(), parts, rollbackRoot };
        if (parts.filesystem) await mkdir(rollbackRoot, { recursive: true });
        await writeDurably(join(this.deps.directory, JOURNAL_FILE), Buffer.from(JSON.stringify(journal)));
        await fsyncDirectory(this.deps.directory);
        this.deps.logger.warn(`Restoring ${foreign ? "foreign " : ""}backup ${id} (datastores ${parts.datastores}, filesystem ${parts.filesystem})`);
        const applied = await applyBundle(this.records.bundlePath(id), manifest, parts, this.targets(), rollbackRoot, this.limits, signal);
        await this.removeJournal();
        if (parts.datastores) {
          this.deps.onRestored?.();
          signal?.throwIfAborted();
          await this.deps.afterDatastores?.();
        }
        this.deps.logger.info(
          `Restore of backup ${id} done: ${applied.collections.length} collections, ${applied.entryCount} blobs, ${applied.rolledAside} set aside`,
        );
        return this.report(id, false, foreign, true, applied, parts.filesystem ? rollbackRoot : null, parts);
      };
      // Blobs are content-addressed and only the datastores hold what the schedulers act on.
      return parts.datastores && this.deps.maintenance ? this.deps.maintenance.run(id, apply) : apply();
    });
  }

  private report(
    id: string,
    dryRun: boolean,
    foreign: boolean,
    applied: boolean,
    planned: { entryCount: number; collections: string[]; prefixGroups: string[]; kvPrefixes: string[] },
    rollbackRoot: string | null,
    parts: RestoreParts,
  ): RestoreReport {
    return {
      id,
      dryRun,
      foreign,
      filesystem: { applied: applied && parts.filesystem, entryCount: planned.entryCount, rollbackRoot },
      datastores: {
        applied: applied && parts.datastores,
        mongoCollections: planned.collections,
        mongoPrefixGroups: planned.prefixGroups,
        redisPrefixes: planned.kvPrefixes,
      },
      diff: null,
    };
  }

  private targets() {
    return { documents: this.deps.documents, kv: this.deps.kv, blobs: this.deps.blobs, clock: this.deps.clock };
  }

  /** The cluster's bundle key; 503 NOT_READY before the cluster has its material. */
  private requireKey(): BundleKey {
    const key = this.deps.bundleKey();
    if (!key) throw new ApiError(503, "NOT_READY", "The cluster is not ready yet (its key authenticates every bundle); try again in a moment");
    return key;
  }

  /** Verifies the bundle at `path` once the verification slot is free (an upload's or a restore's verification). */
  private async verified(path: string, id: string | null): Promise<Verification> {
    const release = await this.verification.acquire();
    try {
      return await this.verifyHolding(path, id);
    } finally {
      release();
    }
  }

  /** Verifies with the slot held: a missing or unreadable file is a finding, not a failure. */
  private async verifyHolding(path: string, id: string | null): Promise<Verification> {
    try {
      return await verifyBundle(path, id, this.limits, this.deps.bundleKey());
    } catch (err) {
      const report = emptyReport(id ?? "");
      const code = (err as { code?: string }).code;
      if (code === "ENOENT") report.missingFiles.push(id ? `${id}.tar.gz` : "the bundle");
      else report.problems.push(`the bundle cannot be read (${(err as Error).message})`);
      return { report, manifest: null, authentication: { authenticated: false, reason: "it could not be read" } };
    }
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

  /** Deletes the oldest backups beyond `backup.retentionCount`, never the one just recorded. */
  private async prune(keepId: string): Promise<void> {
    for (const id of await this.records.prune(this.deps.retentionCount, keepId))
      this.deps.logger.info(`Backup ${id} pruned (backup.retentionCount ${this.deps.retentionCount})`);
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
}

/** A record: the manifest, dated `createdAt` by this controller, with the bundle file's size and sha256. */
function recordOf(manifest: BundleManifest, createdAt: string, sizeBytes: number, sha256: string, foreign: boolean): BackupRecord {
  return { ...manifest, createdAt, manifestCreatedAt: manifest.createdAt, sizeBytes, sha256, foreign };
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
