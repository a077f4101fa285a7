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
import { getPath, ttlBaseMs } from "../document-query.js";
import type { Collection, CollectionSpec, Doc, DocumentImportBatch, DocumentSnapshot, DocumentStore } from "../ports.js";
import { CollectionKeys, collectionFromMetaKey, metaRange } from "./key-codec.js";
import { LevelCollection, type Db } from "./level-collection.js";
import { normalizeSpec } from "./level-spec.js";
import { decodeStoredValue } from "./stored-value.js";

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
    this.sweeper = new TtlSweeper(options.ttlSweepIntervalMs ?? defaultTtlSweepIntervalMs, () => this.sweepExpired(), this.clock);
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

  /** An explicit LevelDB snapshot: every read of it sees the database as it was when it was taken. */
  async snapshot(): Promise<DocumentSnapshot> {
    assert(!this.closed, "document store is closed");
    const snapshot = this.db.snapshot();
    const nowMs = this.clock.nowMs();
    const specs = new Map<string, CollectionSpec>();
    try {
      for await (const [key, value] of this.db.iterator({ ...metaRange, snapshot })) specs.set(collectionFromMetaKey(key), JSON.parse(value) as CollectionSpec);
    } catch (error) {
      await snapshot.close();
      throw error;
    }
    const db = this.db;
    return {
      collections: async () => [...specs.keys()].sort(),
      async *documents(collection: string, batchMax: number): AsyncGenerator<Doc[]> {
        const spec = specs.get(collection);
        if (!spec) return;
        const keys = new CollectionKeys(collection);
        const iterator = db.iterator({ gte: keys.docPrefix, lt: keys.docEnd, snapshot });
        try {
          for (let entries = await iterator.nextv(batchMax); entries.length > 0; entries = await iterator.nextv(batchMax)) {
            yield entries.map(([, value]) => decodeStoredValue(value).doc).filter((doc) => !expiredAt(doc, spec, nowMs));
          }
        } finally {
          await iterator.close();
        }
      },
      release: () => snapshot.close(),
    };
  }

  /** Imports collection by collection in synced batches; not atomic across batches (see the port). */
  async importCollections(batches: AsyncIterable<DocumentImportBatch>): Promise<Map<string, number>> {
    assert(!this.closed, "document store is closed");
    const counts = new Map<string, number>();
    const targets = new Map<string, LevelCollection<Doc>>();
    for await (const batch of batches) {
      let target = targets.get(batch.collection);
      if (!target) {
        target = await this.importTarget(batch.collection);
        targets.set(batch.collection, target);
        await target.clearForImport();
        counts.set(batch.collection, 0);
      }
      await target.importDocuments(batch.documents);
      counts.set(batch.collection, counts.get(batch.collection)! + batch.documents.length);
    }
    return counts;
  }

  /** The open collection, or one with the spec last stored for it (so its indexes are kept). */
  private async importTarget(name: string): Promise<LevelCollection<Doc>> {
    const open = this.collections.get(name);
    if (open) return open;
    const stored = await this.db.get(new CollectionKeys(name).meta);
    return new LevelCollection<Doc>(this.db, name, stored ? (JSON.parse(stored) as CollectionSpec) : {}, this.clock);
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

function expiredAt(doc: Doc, spec: CollectionSpec, nowMs: number): boolean {
  if (!spec.ttl) return false;
  const baseMs = ttlBaseMs(getPath(doc, spec.ttl.field));
  return baseMs !== null && baseMs + spec.ttl.seconds * 1000 <= nowMs;
}
