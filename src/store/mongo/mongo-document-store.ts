/**
 * MongoDB document store (official `mongodb` driver) for the production profile.
 *
 * Filters are the MongoDB subset the ports define, so they pass through after validation. Writes
 * use `w: "majority", j: true`: acknowledged means journaled on a majority. Declared indexes are
 * created with their names verbatim; a unique index is partial on `{field: {$exists: true}}`, so
 * (like the other adapters) documents without the field are exempt while null counts as a value.
 *
 * TTL: documents are JSON (Dates become ISO strings), and MongoDB's TTL monitor only expires BSON
 * dates. So the adapter stores the parsed TTL base of `ttl.field` in a hidden `_ttlAt` date and
 * creates the TTL index (named `ttl.name`, `expireAfterSeconds: ttl.seconds`) on it; `_ttlAt` is
 * never returned. The monitor runs about once a minute, so reads also hide expired documents.
 *
 * Revisions: a hidden `_rev` field, returned only by the revisioned reads; a conditional write is
 * one `replaceOne`/`deleteOne` filtered on `_id` and `_rev`, which MongoDB applies atomically.
 *
 * Outages: server selection gives up after `serverSelectionTimeoutMs` (2 s by default) and a socket
 * waits `socketTimeoutMs` (5 s) at most; network, selection and "not primary" errors become
 * StoreUnavailableError (503 STORE_UNAVAILABLE), so a request never hangs on a lost replica set.
 */
import { MongoClient, type Collection as MongoCollection, type Document, type Filter as MongoFilter, type Sort } from "mongodb";
import type { Clock } from "../../shared/clock.js";
import { systemClock } from "../../shared/clock.js";
import { assert } from "../../shared/errors.js";
import { assertCollectionName, assertFieldPath, assertValidFilter, assertValidFindOptions, getPath, toJsonDocument, ttlBaseMs } from "../document-query.js";
import type { Collection, CollectionSpec, Doc, DocumentImportBatch, DocumentSnapshot, DocumentStore, Filter, FindOptions, Revisioned } from "../ports.js";
import { DuplicateKeyError, RevisionConflictError, StoreUnavailableError } from "../ports.js";
import { LEGACY_REVISION, newRevision } from "../revisions.js";

/** Options of {@link openMongoDocumentStore}. */
export interface MongoDocumentStoreOptions {
  /** mongodb:// or mongodb+srv:// URI. */
  uri: string;
  /** Database name; default: the URI's path, else `cloud`. */
  dbName?: string;
  /** Time source for read-time expiry. */
  clock?: Clock;
  serverSelectionTimeoutMs?: number;
  socketTimeoutMs?: number;
}

const hiddenTtlField = "_ttlAt";
const hiddenRevField = "_rev";
/** What plain reads leave out. */
const hiddenProjection = { [hiddenTtlField]: 0, [hiddenRevField]: 0 };
/** Server error codes of a replica set that cannot take the operation now (not primary, stepping down, shutting down, unreachable). */
const unavailableCodes = new Set([6, 7, 89, 91, 189, 9001, 10107, 11600, 11602, 13435, 13436]);
const unavailableErrorNames = new Set([
  "MongoServerSelectionError",
  "MongoNetworkError",
  "MongoNetworkTimeoutError",
  "MongoNotConnectedError",
  "MongoTopologyClosedError",
]);

/** `error` as the adapter throws it: a StoreUnavailableError when the database cannot serve now, else unchanged. */
export function mongoStoreError(error: unknown): unknown {
  if (typeof error !== "object" || error === null || error instanceof StoreUnavailableError) return error;
  const { name, code } = error as { name?: unknown; code?: unknown };
  const unavailable = (typeof name === "string" && unavailableErrorNames.has(name)) || (typeof code === "number" && unavailableCodes.has(code));
  return unavailable ? new StoreUnavailableError("document", error) : error;
}

/** Runs one driver call, mapping an outage to StoreUnavailableError. */
async function guarded<R>(call: () => Promise<R>): Promise<R> {
  try {
    return await call();
  } catch (error) {
    throw mongoStoreError(error);
  }
}

/** A document as stored: string `_id` (never an ObjectId), JSON fields, maybe `_ttlAt`. */
interface StoredDoc extends Document {
  _id: string;
}
const duplicateKeyCode = 11000;

/** Connects and returns the store; fails when no server is reachable. */
export async function openMongoDocumentStore(options: MongoDocumentStoreOptions): Promise<MongoDocumentStore> {
  const client = new MongoClient(options.uri, {
    writeConcern: { w: "majority", journal: true },
    serverSelectionTimeoutMS: options.serverSelectionTimeoutMs ?? 2_000,
    socketTimeoutMS: options.socketTimeoutMs ?? 5_000,
  });
  await client.connect();
  const store = new MongoDocumentStore(client, options);
  try {
    await store.ping();
  } catch (error) {
    await client.close();
    throw error;
  }
  return store;
}

/** The MongoDB {@link DocumentStore}; create it with {@link openMongoDocumentStore}. */
export class MongoDocumentStore implements DocumentStore {
  private readonly collections = new Map<string, MongoDocCollection<Doc>>();
  private readonly clock: Clock;
  private readonly dbName: string;

  constructor(
    private readonly client: MongoClient,
    options: MongoDocumentStoreOptions,
  ) {
    this.clock = options.clock ?? systemClock;
    this.dbName = mongoDatabaseName(options.uri, options.dbName);
  }

  collection<T extends Doc = Doc>(name: string, spec?: CollectionSpec): Collection<T> {
    const existing = this.collections.get(name);
    if (existing) {
      assert(spec === undefined || JSON.stringify(spec) === JSON.stringify(existing.spec), `collection ${name} reopened with a different spec`);
      return existing as unknown as Collection<T>;
    }
    const created = new MongoDocCollection<Doc>(this.client.db(this.dbName).collection<StoredDoc>(name), name, spec ?? {}, this.clock);
    this.collections.set(name, created);
    return created as unknown as Collection<T>;
  }

  /**
   * A snapshot session (`snapshot: true`, MongoDB 5.0 or later on a replica set or sharded
   * cluster): every read in it sees the majority-committed data of one point in time. GridFS
   * collections (blobs) and system collections are not documents of this store.
   */
  async snapshot(): Promise<DocumentSnapshot> {
    const session = this.client.startSession({ snapshot: true });
    const db = this.client.db(this.dbName);
    let names: string[];
    try {
      const listed = await guarded(() => db.listCollections({}, { nameOnly: true, session }).toArray());
      names = listed
        .map((c) => c.name)
        .filter((name) => !name.startsWith("system.") && !name.includes("."))
        .sort();
    } catch (error) {
      await session.endSession();
      throw error;
    }
    const nowMs = this.clock.nowMs();
    const specs = this.collections;
    return {
      collections: async () => [...names],
      async *documents(collection: string, batchMax: number): AsyncGenerator<Doc[]> {
        if (!names.includes(collection)) return;
        const ttl = specs.get(collection)?.spec.ttl;
        const live = ttl ? { $or: [{ [hiddenTtlField]: { $exists: false } }, { [hiddenTtlField]: { $gt: new Date(nowMs - ttl.seconds * 1000) } }] } : {};
        const cursor = db.collection<StoredDoc>(collection).find(live, { session, projection: hiddenProjection, batchSize: batchMax }).sort({ _id: 1 });
        let batch: Doc[] = [];
        for await (const doc of cursor) {
          batch.push(doc as unknown as Doc);
          if (batch.length >= batchMax) {
            yield batch;
            batch = [];
          }
        }
        if (batch.length > 0) yield batch;
      },
      release: () => session.endSession(),
    };
  }

  /** Imports collection by collection (without a transaction: callers journal, see the port). */
  async importCollections(batches: AsyncIterable<DocumentImportBatch>): Promise<Map<string, number>> {
    const counts = new Map<string, number>();
    for await (const batch of batches) {
      const target =
        this.collections.get(batch.collection) ??
        new MongoDocCollection<Doc>(this.client.db(this.dbName).collection<StoredDoc>(batch.collection), batch.collection, {}, this.clock);
      if (!counts.has(batch.collection)) {
        await target.clearForImport();
        counts.set(batch.collection, 0);
      }
      await target.importDocuments(batch.documents);
      counts.set(batch.collection, counts.get(batch.collection)! + batch.documents.length);
    }
    return counts;
  }

  async ping(): Promise<void> {
    await guarded(() => this.client.db(this.dbName).command({ ping: 1 }));
  }

  async close(): Promise<void> {
    await this.client.close();
  }
}

/** The database to use: `explicit`, else the one named in the URI's path, else `cloud`. */
export function mongoDatabaseName(uri: string, explicit?: string): string {
  return explicit ?? (dbNameFromUri(uri) || "cloud");
}

/** The database named in a MongoDB URI's path, if any. */
function dbNameFromUri(uri: string): string | undefined {
  const afterScheme = uri.replace(/^mongodb(\+srv)?:\/\//, "");
  const slash = afterScheme.indexOf("/");
  if (slash < 0) return undefined;
  const path = afterScheme.slice(slash + 1).split("?")[0];
  return path ? decodeURIComponent(path) : undefined;
}

class MongoDocCollection<T extends Doc> implements Collection<T> {
  private ready: Promise<void> | undefined;

  constructor(
    private readonly collection: MongoCollection<StoredDoc>,
    readonly name: string,
    readonly spec: CollectionSpec,
    private readonly clock: Clock,
  ) {
    assertCollectionName(name);
    for (const index of spec.indexes ?? []) assertFieldPath(index.field);
    if (spec.ttl) {
      assertFieldPath(spec.ttl.field);
      assert(spec.ttl.seconds > 0, "ttl seconds must be positive");
    }
  }

  /** Removes every document (the start of an import). */
  async clearForImport(): Promise<void> {
    await this.init();
    await guarded(() => this.collection.deleteMany({}));
  }

  /** Writes imported documents (each `_id` once, into a cleared collection), each at a new revision. */
  async importDocuments(docs: readonly Doc[]): Promise<void> {
    if (docs.length === 0) return;
    await guarded(() =>
      this.collection.insertMany(
        docs.map((doc) => this.toStored(doc as T, newRevision())),
        { ordered: true },
      ),
    );
  }

  async insert(doc: T): Promise<string> {
    const rev = newRevision();
    const stored = this.toStored(doc, rev);
    await this.init();
    for (let attempt = 0; ; attempt++) {
      try {
        await guarded(() => this.collection.insertOne(stored));
        return rev;
      } catch (error) {
        if (!isDuplicateKey(error)) throw error;
        // The conflicting document may be expired but not yet removed by the TTL monitor.
        if (attempt === 0 && this.spec.ttl && (await this.removeExpired()) > 0) continue;
        throw this.duplicateKeyError(error, stored._id);
      }
    }
  }

  async put(doc: T): Promise<string> {
    const rev = newRevision();
    const stored = this.toStored(doc, rev);
    await this.init();
    for (let attempt = 0; ; attempt++) {
      try {
        await guarded(() => this.collection.replaceOne({ _id: stored._id }, stored, { upsert: true }));
        return rev;
      } catch (error) {
        if (!isDuplicateKey(error)) throw error;
        // Two upserts of one new _id race; the loser retries as a replace.
        const onId = Object.keys(error.keyPattern ?? {}).includes("_id");
        if (attempt === 0 && (onId || (this.spec.ttl && (await this.removeExpired()) > 0))) continue;
        throw this.duplicateKeyError(error, stored._id);
      }
    }
  }

  async putIf(doc: T, expectedRev: string): Promise<string> {
    const rev = newRevision();
    const stored = this.toStored(doc, rev);
    await this.init();
    for (let attempt = 0; ; attempt++) {
      try {
        const result = await guarded(() => this.collection.replaceOne(this.atRevision(stored._id, expectedRev), stored));
        if (result.matchedCount === 0) throw new RevisionConflictError(this.name, stored._id, expectedRev);
        return rev;
      } catch (error) {
        if (!isDuplicateKey(error)) throw error;
        if (attempt === 0 && this.spec.ttl && (await this.removeExpired()) > 0) continue;
        throw this.duplicateKeyError(error, stored._id);
      }
    }
  }

  async get(id: string): Promise<T | null> {
    await this.init();
    const found = await guarded(() => this.collection.findOne(this.withLive({ _id: id }), { projection: hiddenProjection }));
    return (found as unknown as T | null) ?? null;
  }

  async getRevisioned(id: string): Promise<Revisioned<T> | null> {
    await this.init();
    const found = await guarded(() => this.collection.findOne(this.withLive({ _id: id }), { projection: { [hiddenTtlField]: 0 } }));
    return found ? this.revisioned(found) : null;
  }

  async delete(id: string): Promise<boolean> {
    await this.init();
    const result = await guarded(() => this.collection.deleteOne(this.withLive({ _id: id })));
    return result.deletedCount === 1;
  }

  async deleteIf(id: string, expectedRev: string): Promise<void> {
    await this.init();
    const result = await guarded(() => this.collection.deleteOne(this.atRevision(id, expectedRev)));
    if (result.deletedCount === 0) throw new RevisionConflictError(this.name, id, expectedRev);
  }

  async find(filter: Filter = {}, options: FindOptions = {}): Promise<T[]> {
    return (await this.select(filter, options, hiddenProjection)) as unknown as T[];
  }

  async findRevisioned(filter: Filter = {}, options: FindOptions = {}): Promise<Revisioned<T>[]> {
    return (await this.select(filter, options, { [hiddenTtlField]: 0 })).map((found) => this.revisioned(found));
  }

  async count(filter: Filter = {}): Promise<number> {
    assertValidFilter(filter);
    await this.init();
    return guarded(() => this.collection.countDocuments(this.withLive(filter as MongoFilter<StoredDoc>)));
  }

  async deleteMany(filter: Filter = {}): Promise<number> {
    assertValidFilter(filter);
    await this.init();
    const result = await guarded(() => this.collection.deleteMany(this.withLive(filter as MongoFilter<StoredDoc>)));
    return result.deletedCount;
  }

  private async select(filter: Filter, options: FindOptions, projection: Document): Promise<StoredDoc[]> {
    assertValidFilter(filter);
    assertValidFindOptions(options);
    await this.init();
    if (options.limit === 0) return [];
    const direction = options.sort?.direction ?? 1;
    const sort: Sort = options.sort && options.sort.field !== "_id" ? { [options.sort.field]: direction, _id: direction } : { _id: direction };
    let cursor = this.collection.find(this.withLive(filter as MongoFilter<StoredDoc>), { projection }).sort(sort);
    if (options.skip) cursor = cursor.skip(options.skip);
    if (options.limit !== undefined) cursor = cursor.limit(options.limit);
    return guarded(() => cursor.toArray());
  }

  /** A stored document with `_rev` taken out as its revision (documents written before revisions: the legacy one). */
  private revisioned(found: StoredDoc): Revisioned<T> {
    const { [hiddenRevField]: rev, ...doc } = found;
    return { doc: doc as unknown as T, rev: typeof rev === "string" ? rev : LEGACY_REVISION };
  }

  /** The live document `id` at revision `rev`. */
  private atRevision(id: string, rev: string): MongoFilter<StoredDoc> {
    const revision = rev === LEGACY_REVISION ? { $in: [LEGACY_REVISION, null] } : rev;
    return this.withLive({ _id: id, [hiddenRevField]: revision } as MongoFilter<StoredDoc>);
  }

  private toStored(doc: T, rev: string): StoredDoc {
    const stored: StoredDoc = toJsonDocument(doc);
    assert(!(hiddenTtlField in stored) && !(hiddenRevField in stored), `${hiddenTtlField} and ${hiddenRevField} are reserved`);
    stored[hiddenRevField] = rev;
    const ttl = this.spec.ttl;
    if (ttl) {
      const baseMs = ttlBaseMs(getPath(stored, ttl.field));
      if (baseMs !== null) stored[hiddenTtlField] = new Date(baseMs);
    }
    return stored;
  }

  /** Adds "not expired" to a filter when the collection has a TTL. */
  private withLive(filter: MongoFilter<StoredDoc>): MongoFilter<StoredDoc> {
    const ttl = this.spec.ttl;
    if (!ttl) return filter;
    const cutoff = new Date(this.clock.nowMs() - ttl.seconds * 1000);
    const live = { $or: [{ [hiddenTtlField]: { $exists: false } }, { [hiddenTtlField]: { $gt: cutoff } }] };
    return Object.keys(filter).length === 0 ? live : { $and: [filter, live] };
  }

  private async removeExpired(): Promise<number> {
    const ttl = this.spec.ttl!;
    const cutoff = new Date(this.clock.nowMs() - ttl.seconds * 1000);
    const result = await guarded(() => this.collection.deleteMany({ [hiddenTtlField]: { $lte: cutoff } }));
    return result.deletedCount;
  }

  private duplicateKeyError(error: { keyPattern?: Record<string, unknown>; keyValue?: Record<string, unknown> }, id: string): DuplicateKeyError {
    const fields = Object.keys(error.keyPattern ?? {});
    if (fields.length === 0 || fields.includes("_id")) return new DuplicateKeyError(this.name, id);
    const index = this.spec.indexes?.find((i) => i.field === fields[0]);
    return new DuplicateKeyError(this.name, `${index?.name ?? fields[0]}: ${JSON.stringify(error.keyValue ?? {})}`);
  }

  private init(): Promise<void> {
    this.ready ??= guarded(() => this.createIndexes()).catch((error: unknown) => {
      this.ready = undefined; // retry on the next call
      throw error;
    });
    return this.ready;
  }

  private async createIndexes(): Promise<void> {
    const specs = (this.spec.indexes ?? []).map((index) => ({
      key: { [index.field]: 1 as const },
      name: index.name,
      ...(index.unique ? { unique: true, partialFilterExpression: { [index.field]: { $exists: true } } } : {}),
    }));
    if (specs.length > 0) await this.collection.createIndexes(specs);
    const ttl = this.spec.ttl;
    if (!ttl) return;
    try {
      await this.collection.createIndex({ [hiddenTtlField]: 1 }, { name: ttl.name, expireAfterSeconds: ttl.seconds });
    } catch (error) {
      // The TTL index exists with another expireAfterSeconds: change it in place.
      if ((error as { codeName?: unknown }).codeName !== "IndexOptionsConflict") throw error;
      await this.collection.db.command({ collMod: this.name, index: { name: ttl.name, expireAfterSeconds: ttl.seconds } });
    }
  }
}

function isDuplicateKey(error: unknown): error is { code: number; keyPattern?: Record<string, unknown>; keyValue?: Record<string, unknown> } {
  return typeof error === "object" && error !== null && (error as { code?: unknown }).code === duplicateKeyCode;
}
