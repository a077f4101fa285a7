/**
 * Storage ports. Services depend on these interfaces only; the composition root picks the adapters
 * (embedded LevelDB or MongoDB/PostgreSQL for documents, memory or Redis for key-value, filesystem or
 * database for blobs). Every adapter passes the same contract suite (test/store/).
 */
import { ApiError } from "../shared/errors.js";

/** A stored document. `_id` is the primary key; every other field is JSON-serializable data. */
export interface Doc {
  _id: string;
  [field: string]: unknown;
}

/** Comparison operators a filter may use on one field. */
export interface FieldRange {
  $gt?: string | number;
  $gte?: string | number;
  $lt?: string | number;
  $lte?: string | number;
  $in?: readonly (string | number | boolean)[];
}

/** Conjunction of per-field conditions: equality with a scalar, or a range. */
export type Filter = Record<string, string | number | boolean | null | FieldRange>;

export interface FindOptions {
  /** Sort by one field; ties broken by `_id` in the same direction. Default: `_id` ascending. */
  sort?: { field: string; direction: 1 | -1 };
  skip?: number;
  limit?: number;
}

export interface IndexSpec {
  /** Index name (stable across adapters; MongoDB uses it verbatim). */
  name: string;
  field: string;
  unique?: boolean;
}

/** Documents expire `seconds` after the Date/ISO-string/epoch-ms value of `field`. */
export interface TtlSpec {
  name: string;
  field: string;
  seconds: number;
}

export interface CollectionSpec {
  indexes?: readonly IndexSpec[];
  ttl?: TtlSpec;
}

/**
 * The backing database or key-value store cannot be reached now (down, frozen past the command
 * timeout, failing over, or answering that it is read-only). Expected during an outage: a request
 * answers 503 STORE_UNAVAILABLE with Retry-After, background work tries again on its next round.
 */
export class StoreUnavailableError extends ApiError {
  /** What the HTTP layer puts in Retry-After. */
  readonly retryAfterSeconds = 1;
  constructor(
    readonly store: "document" | "key-value",
    cause: unknown,
  ) {
    super(503, "STORE_UNAVAILABLE", `The shared ${store} store is unavailable; try again shortly`);
    this.name = "StoreUnavailableError";
    this.cause = cause;
  }
}

/** Thrown by `insert` when `_id` (or a unique index value) already exists. */
export class DuplicateKeyError extends Error {
  readonly code = "DUPLICATE_KEY";
  constructor(
    readonly collection: string,
    readonly key: string,
  ) {
    super(`Duplicate key in ${collection}: ${key}`);
  }
}

/**
 * Thrown by a conditional write ({@link Collection.putIf}, {@link Collection.deleteIf}) when the
 * stored revision is not the one the writer read: someone wrote (or deleted) the document since.
 * Expected whenever two writers race; the loser reads again or gives up, it never overwrites.
 */
export class RevisionConflictError extends Error {
  readonly code = "REVISION_CONFLICT";
  constructor(
    readonly collection: string,
    readonly id: string,
    readonly expectedRev: string,
  ) {
    super(`Revision conflict in ${collection}: ${id} is no longer at revision ${expectedRev}`);
    this.name = "RevisionConflictError";
  }
}

/**
 * A document with the revision the store holds it at. A revision is an opaque string, new on every
 * write and never reused (not even after a delete and a re-insert of the same `_id`), so a writer
 * holding an old one can never match a later version.
 */
export interface Revisioned<T extends Doc = Doc> {
  readonly doc: T;
  readonly rev: string;
}

export interface Collection<T extends Doc = Doc> {
  readonly name: string;
  /**
   * Inserts a new document; DuplicateKeyError when `_id` exists (the conditional write "only if
   * absent"). Durable when the promise resolves; answers the new revision.
   */
  insert(doc: T): Promise<string>;
  /** Inserts or replaces the whole document, whatever is stored. Durable when the promise resolves; answers the new revision. */
  put(doc: T): Promise<string>;
  /**
   * Compare-and-set: replaces the document only while the stored revision is `expectedRev`, in one
   * atomic step; RevisionConflictError when it moved, or when the document is gone or expired.
   * Durable when the promise resolves; answers the new revision.
   */
  putIf(doc: T, expectedRev: string): Promise<string>;
  get(id: string): Promise<T | null>;
  /** The document with its revision, or null (what a conditional write starts from). */
  getRevisioned(id: string): Promise<Revisioned<T> | null>;
  /** Removes a document; true when it existed. */
  delete(id: string): Promise<boolean>;
  /** Removes the document only while the stored revision is `expectedRev`; RevisionConflictError otherwise. */
  deleteIf(id: string, expectedRev: string): Promise<void>;
  find(filter?: Filter, options?: FindOptions): Promise<T[]>;
  /** {@link find} with each document's revision. */
  findRevisioned(filter?: Filter, options?: FindOptions): Promise<Revisioned<T>[]>;
  count(filter?: Filter): Promise<number>;
  /** Removes every matching document; returns how many. */
  deleteMany(filter?: Filter): Promise<number>;
}

/**
 * A point-in-time view of every collection (backups): what `documents()` yields is the store as it
 * was when the snapshot was taken, whatever is written meanwhile. Release it when done.
 */
export interface DocumentSnapshot {
  /** Every collection the store holds (empty ones included), sorted by name. */
  collections(): Promise<string[]>;
  /** The live documents of one collection in `_id` order, at most `batchMax` per batch. */
  documents(collection: string, batchMax: number): AsyncIterable<Doc[]>;
  release(): Promise<void>;
}

/** Documents to import into one collection (see {@link DocumentStore.importCollections}). */
export interface DocumentImportBatch {
  collection: string;
  documents: readonly Doc[];
}

export interface DocumentStore {
  /** Opens (creating indexes and TTL on first use) a collection. Idempotent per name. */
  collection<T extends Doc = Doc>(name: string, spec?: CollectionSpec): Collection<T>;
  /** Takes a consistent snapshot of every collection (a LevelDB snapshot, one REPEATABLE READ transaction, a snapshot session). */
  snapshot(): Promise<DocumentSnapshot>;
  /**
   * Replaces collections wholesale: a collection named by a batch is emptied before its first batch
   * is written, then holds exactly the documents of its batches (a batch may be empty, to empty a
   * collection); collections no batch names are left alone. Indexes and TTL follow the spec the
   * collection was opened with (or last stored with). Returns the documents written per collection.
   * Durable when it resolves; atomic on PostgreSQL only, so callers that need all-or-nothing journal.
   */
  importCollections(batches: AsyncIterable<DocumentImportBatch>): Promise<Map<string, number>>;
  /** Round-trips to the backing database; throws when it is unreachable. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

/**
 * A capped log of sequenced entries in the key-value store (the cluster-wide event journal): the
 * counter under `counterKey` numbers the entries, the list under `listKey` keeps the newest
 * `entriesMax` of them, and every append is announced on `channel` as "<sequence> <value>".
 */
export interface SequencedLog {
  readonly counterKey: string;
  readonly listKey: string;
  readonly channel: string;
  readonly entriesMax: number;
}

/** One entry of a {@link SequencedLog}. */
export interface SequencedEntry {
  readonly sequence: number;
  readonly value: string;
}

/** The text an entry is kept and announced as: "<sequence> <value>". */
export const formatSequencedEntry = (sequence: number, value: string): string => `${sequence} ${value}`;

/** Reads "<sequence> <value>"; null when the text is not in that form. */
export function parseSequencedEntry(text: string): SequencedEntry | null {
  const space = text.indexOf(" ");
  if (space <= 0 || space > 16) return null;
  const digits = text.slice(0, space);
  if (!/^[1-9][0-9]*$/.test(digits)) return null;
  const sequence = Number(digits);
  if (!Number.isSafeInteger(sequence)) return null;
  return { sequence, value: text.slice(space + 1) };
}

/** Shared key-value store: leases, tickets, session registry, event bridge, event journal. */
export interface KvStore {
  get(key: string): Promise<string | null>;
  /** Sets a value, optionally with expiry. */
  set(key: string, value: string, options?: { ttlMs?: number }): Promise<void>;
  /** Sets only when absent (with optional expiry); true when written. */
  setIfAbsent(key: string, value: string, options?: { ttlMs?: number }): Promise<boolean>;
  /** Replaces the value only if it currently equals `expected`; true when written. */
  compareAndSet(key: string, expected: string, value: string, options?: { ttlMs?: number }): Promise<boolean>;
  /** Deletes only if the value equals `expected`; true when deleted. */
  compareAndDelete(key: string, expected: string): Promise<boolean>;
  delete(key: string): Promise<boolean>;
  /** Atomically increments an integer counter, returning the new value. */
  increment(key: string): Promise<number>;
  /** Reads and deletes in one step (single-use tickets). */
  take(key: string): Promise<string | null>;
  /** Remaining time to live in ms, or null when the key is absent or has no expiry. */
  ttlMs(key: string): Promise<number | null>;
  keys(prefix: string): Promise<string[]>;
  publish(channel: string, message: string): Promise<void>;
  /**
   * In one atomic step: takes the next number of the log's counter, appends the entry to the
   * log's list (dropping the oldest beyond `entriesMax`) and publishes it on the log's channel.
   * So entries are numbered, kept and announced in the same order, without holes.
   */
  appendSequenced(log: SequencedLog, value: string): Promise<number>;
  /** The counter's value and the kept entries numbered `fromSequence` or above, oldest first (one atomic read). */
  readSequenced(log: SequencedLog, fromSequence: number): Promise<{ latestSequence: number; entries: SequencedEntry[] }>;
  /** Subscribes to a channel; the returned function unsubscribes. */
  subscribe(channel: string, handler: (message: string) => void): Promise<() => Promise<void>>;
  ping(): Promise<void>;
  close(): Promise<void>;
}

/** Content-addressed blob store: blobs are named by the hex sha256 of their bytes. */
export interface BlobStore {
  has(hash: string): Promise<boolean>;
  /** Stores bytes and returns their sha256; storing an existing blob is a no-op. */
  put(data: Uint8Array): Promise<string>;
  get(hash: string): Promise<Uint8Array | null>;
  delete(hash: string): Promise<boolean>;
  list(): Promise<string[]>;
}
