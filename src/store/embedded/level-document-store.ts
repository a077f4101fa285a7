/**
 * Embedded document store on one LevelDB (via `level`): the development profile's database.
 *
 * Layout and ordering are described in key-codec.ts. Each write puts the document, its secondary
 * index entries and its TTL entry in one atomic batch written with `sync: true`, so an
 * acknowledged write survives kill -9 and a crash never leaves an index pointing at a different
 * version of a document. Writes to one collection are serialized by a mutex, which makes the
 * read-modify-write of index entries and the unique checks race-free within this process (the
 * directory is locked by LevelDB, so no other process can open it).
 */
import { TtlSweeper } from "../ttl-sweeper.js";
import { Level } from "level";
import type { Clock } from "../../shared/clock.js";
import { systemClock } from "../../shared/clock.js";
import { assert } from "../../shared/errors.js";
import type { Collection, CollectionSpec, Doc, DocumentStore } from "../ports.js";
import { LevelCollection, normalizeSpec, type Db } from "./level-collection.js";

/** Options of {@link openLevelDocumentStore}. */
export interface LevelDocumentStoreOptions {
  /** Directory of the LevelDB database (created when missing). */
  directory: string;
  /** Time source for TTL expiry (reads and sweeps). */
  clock?: Clock;
  /** How often expired documents are deleted; 0 disables the timer (reads still hide them). */
  ttlSweepIntervalMs?: number;
  /** Documents deleted per collection and sweep, so one sweep never blocks writers for long. */
  ttlSweepBatchMax?: number;
}

const defaultTtlSweepIntervalMs = 60_000;
const defaultTtlSweepBatchMax = 500;

/** Opens (creating when missing) the embedded store in `options.directory`. */
export async function openLevelDocumentStore(options: LevelDocumentStoreOptions): Promise<LevelDocumentStore> {
  const db: Db = new Level<string, string>(options.directory, { keyEncoding: "utf8", valueEncoding: "utf8" });
  await db.open();
  return new LevelDocumentStore(db, options);
}

/** The embedded {@link DocumentStore}; create it with {@link openLevelDocumentStore}. */
export class LevelDocumentStore implements DocumentStore {
  private readonly collections = new Map<string, LevelCollection<Doc>>();
  private readonly clock: Clock;
  private readonly ttlSweepBatchMax: number;
  private readonly sweeper: TtlSweeper;
  private closed = false;

  constructor(
    private readonly db: Db,
    options: LevelDocumentStoreOptions,
  ) {
    this.clock = options.clock ?? systemClock;
    this.ttlSweepBatchMax = options.ttlSweepBatchMax ?? defaultTtlSweepBatchMax;
    assert(this.ttlSweepBatchMax > 0, "ttlSweepBatchMax must be positive");
    this.sweeper = new TtlSweeper(options.ttlSweepIntervalMs ?? defaultTtlSweepIntervalMs, () => this.sweepExpired());
  }

  collection<T extends Doc = Doc>(name: string, spec?: CollectionSpec): Collection<T> {
    assert(!this.closed, "document store is closed");
    const existing = this.collections.get(name);
    if (existing) {
      assert(spec === undefined || sameSpec(existing.spec, spec), `collection ${name} reopened with a different spec`);
      return existing as unknown as Collection<T>;
    }
    const created = new LevelCollection<Doc>(this.db, name, spec ?? {}, this.clock);
    this.collections.set(name, created);
    return created as unknown as Collection<T>;
  }

  /** Deletes up to `ttlSweepBatchMax` expired documents per TTL collection; returns how many. */
  async sweepExpired(): Promise<number> {
    let removed = 0;
    for (const collection of this.collections.values()) {
      if (this.closed) break;
      removed += await collection.sweepExpired(this.ttlSweepBatchMax);
    }
    return removed;
  }

  async ping(): Promise<void> {
    assert(!this.closed && this.db.status === "open", "document store is not open");
    await this.db.get("M\x00ping");
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.sweeper.stop();
    for (const collection of this.collections.values()) await collection.quiesce();
    await this.db.close();
  }
}

function sameSpec(a: CollectionSpec, b: CollectionSpec): boolean {
  return JSON.stringify(normalizeSpec(a)) === JSON.stringify(normalizeSpec(b));
}
