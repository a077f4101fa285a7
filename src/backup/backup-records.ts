/**
 * The backups of this controller on disk, in `<data.dir>/backups`: `<id>.tar.gz` (the bundle) and
 * `<id>.json` (its record). A bundle is renamed into place first, then its record is written through
 * a temporary file, fsynced and renamed (the directory fsynced after): the record makes a backup
 * exist, and it is there whole or not at all.
 *
 * A backup is damaged when its record cannot be read as one (not JSON, another schema, another id:
 * bit rot, a hand edit) or its bundle is missing or not the size the record states. A damaged backup
 * is never fatal: listing and retention skip it (it is logged once), showing and downloading it
 * answer 422 BACKUP_DAMAGED, verifying it reports it invalid, restoring it is refused, deleting it
 * works. A bundle whose bytes changed but not its size is found by verification, not by listing
 * (that would mean reading every bundle).
 */
import { open, readdir, readFile, rename, stat, unlink } from "node:fs/promises";
import { join } from "node:path";
import { Value } from "@sinclair/typebox/value";
import type { Logger } from "../logs/types.js";
import { BACKUP_ID_PATTERN, BackupRecordSchema, type BackupRecord } from "./bundle-format.js";
import { writeDurably } from "./restore.js";

/** What is on disk for an id. */
export type RecordLookup = { state: "missing" } | { state: "recorded"; record: BackupRecord } | { state: "damaged"; reason: string };

/** See the module comment. */
export class BackupRecords {
  /** Damaged backups already logged (once each per process, not at every listing). */
  private readonly reported = new Set<string>();

  constructor(
    readonly directory: string,
    private readonly logger: Logger,
  ) {}

  bundlePath(id: string): string {
    return join(this.directory, `${id}.tar.gz`);
  }

  recordPath(id: string): string {
    return join(this.directory, `${id}.json`);
  }

  /** Removes temporary record files a killed write left (`*.partial`). */
  async removeLeftovers(): Promise<void> {
    for (const name of await this.names()) if (name.endsWith(".partial")) await unlink(join(this.directory, name)).catch(ignoreMissing);
  }

  /** The record of `id` as it reads back, without looking at the bundle. */
  async read(id: string): Promise<RecordLookup> {
    if (!BACKUP_ID_PATTERN.test(id)) return { state: "missing" };
    let text: string;
    try {
      text = await readFile(this.recordPath(id), "utf8");
    } catch (err) {
      if ((err as { code?: string }).code === "ENOENT") return { state: "missing" };
      return { state: "damaged", reason: `its record ${id}.json cannot be read (${(err as Error).message})` };
    }
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      return { state: "damaged", reason: `its record ${id}.json is not JSON` };
    }
    const first = Value.Errors(BackupRecordSchema, value).First();
    if (first) return { state: "damaged", reason: `its record ${id}.json does not read as a record (${first.path || "/"} ${first.message})` };
    const record = value as BackupRecord;
    if (record.id !== id) return { state: "damaged", reason: `its record ${id}.json names backup ${record.id}` };
    return { state: "recorded", record };
  }

  /** {@link read}, and a recorded backup whose bundle is missing or not the recorded size is damaged. */
  async lookUp(id: string): Promise<RecordLookup> {
    const lookup = await this.read(id);
    if (lookup.state !== "recorded") return lookup;
    const file = await stat(this.bundlePath(id)).catch(() => null);
    if (!file) return { state: "damaged", reason: `its bundle ${id}.tar.gz is missing` };
    if (file.size !== lookup.record.sizeBytes)
      return { state: "damaged", reason: `its bundle ${id}.tar.gz has ${file.size} bytes, its record states ${lookup.record.sizeBytes}` };
    return lookup;
  }

  /** Every backup that is not damaged, newest first (by the time this controller recorded it, then id). */
  async list(): Promise<BackupRecord[]> {
    const records: BackupRecord[] = [];
    for (const name of await this.names()) {
      const id = name.endsWith(".json") ? name.slice(0, -5) : "";
      if (!BACKUP_ID_PATTERN.test(id)) continue;
      const lookup = await this.lookUp(id);
      if (lookup.state === "recorded") records.push(lookup.record);
      else if (lookup.state === "damaged" && !this.reported.has(id)) {
        this.reported.add(id);
        this.logger.warn(`Backup ${id} is damaged and left out of listings and retention: ${lookup.reason}. Verify reports it; delete it when it is of no use`);
      }
    }
    return records.sort(compareNewestFirst);
  }

  /** Moves the written bundle `temp` into place, then writes its record (atomically): the record makes it exist. */
  async commit(record: BackupRecord, temp: string): Promise<void> {
    await rename(temp, this.bundlePath(record.id));
    await writeDurably(this.recordPath(record.id), Buffer.from(JSON.stringify(record, null, 2) + "\n"));
    await fsyncDirectory(this.directory);
    this.reported.delete(record.id);
  }

  /** Deletes a backup: its record first, so a half-deleted one is simply gone. */
  async remove(id: string): Promise<void> {
    await unlink(this.recordPath(id)).catch(ignoreMissing);
    await unlink(this.bundlePath(id)).catch(ignoreMissing);
    await fsyncDirectory(this.directory);
    this.reported.delete(id);
  }

  /**
   * Deletes the oldest backups beyond `retentionCount`, never `keepId` (the one just made or
   * uploaded, whatever the other records' dates say). Damaged backups are neither counted nor pruned.
   */
  async prune(retentionCount: number, keepId: string): Promise<string[]> {
    const records = await this.list();
    const others = records.filter((r) => r.id !== keepId);
    const slots = Math.max(0, retentionCount - (others.length < records.length ? 1 : 0));
    const pruned = others.slice(slots).map((r) => r.id);
    for (const id of pruned) await this.remove(id);
    return pruned;
  }

  private async names(): Promise<string[]> {
    return readdir(this.directory).catch((err: unknown) => {
      if ((err as { code?: string }).code === "ENOENT") return [] as string[];
      throw err;
    });
  }
}

/** Newest first: by creation time, then by id. */
function compareNewestFirst(a: BackupRecord, b: BackupRecord): number {
  const ka = `${a.createdAt} ${a.id}`;
  const kb = `${b.createdAt} ${b.id}`;
  return ka < kb ? 1 : ka > kb ? -1 : 0;
}

export async function fsyncDirectory(path: string): Promise<void> {
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
