/**
 * One collection of the embedded document store: documents, secondary index entries and TTL entries
 * under the collection's key prefix (key-codec.ts), written in synced atomic batches; single-document
 * writes queued together are committed as one group.
 */
import type { Level } from "level";
import type { Clock } from "../../shared/clock.js";
import { assert } from "../../shared/errors.js";
import type { Collection, CollectionSpec, Doc, Filter, FindOptions, IndexSpec, Revisioned } from "../ports.js";
import { DuplicateKeyError, RevisionConflictError } from "../ports.js";
import { newRevision } from "../revisions.js";
import {
  assertCollectionName,
  assertFieldPath,
  assertValidFilter,
  assertValidFindOptions,
  documentComparator,
  getPath,
  matchesFilter,
  toJsonDocument,
  ttlBaseMs,
} from "../document-query.js";
import { AsyncMutex } from "./async-mutex.js";
import { CollectionKeys, idFromEntryKey } from "./key-codec.js";
import { clearRange, reconcileSpec, writeBatchOpsMax } from "./level-spec.js";
import { planQuery, type QueryPlan } from "./query-plan.js";
import { decodeStoredValue, encodeStoredValue } from "./stored-value.js";

/** Documents read per iterator round trip while scanning the document keyspace. */
const scanBatchMax = 1_000;
/** Ids fetched per getMany round trip while reading through an index. */
const indexFetchBatchMax = 256;
/** Single-document writes committed together in one synced batch. */
const writeGroupMax = 256;
const indexNamePattern = /^[A-Za-z0-9_.-]{1,63}$/;

export type Db = Level<string, string>;
type BatchOp = { type: "put"; key: string; value: string } | { type: "del"; key: string };
/** Keys written earlier in the current write group: the new value, or null when deleted. */
type Overlay = Map<string, string | null>;
/** A stored document version: its revision and its contents. */
type Stored<T> = Revisioned<T & Doc>;
/** `expectedRev`: the write is conditional (putIf, deleteIf). */
type WriteRequest<T> = { kind: "insert" | "put"; doc: T; expectedRev?: string } | { kind: "delete"; id: string; expectedRev?: string };
interface PendingWrite<T> {
  request: WriteRequest<T>;
  resolve: (result: unknown) => void;
  reject: (error: unknown) => void;
}

/** A collection of {@link LevelDocumentStore}; obtained through its `collection()`. */
export class LevelCollection<T extends Doc> implements Collection<T> {
  private readonly keys: CollectionKeys;
  private readonly mutex = new AsyncMutex();
  private readonly indexes: readonly IndexSpec[];
  private ready: Promise<void> | undefined;
  private readonly pending: PendingWrite<T>[] = [];
  private commitScheduled = false;

  constructor(
    private readonly db: Db,
    readonly name: string,
    readonly spec: CollectionSpec,
    private readonly clock: Clock,
  ) {
    assertCollectionName(name);
    this.indexes = spec.indexes ?? [];
    for (const index of this.indexes) {
      assert(indexNamePattern.test(index.name), `invalid index name ${index.name}`);
      assertFieldPath(index.field);
    }
    assert(new Set(this.indexes.map((i) => i.name)).size === this.indexes.length, `duplicate index names in ${name}`);
    if (spec.ttl) {
      assertFieldPath(spec.ttl.field);
      assert(spec.ttl.seconds > 0, "ttl seconds must be positive");
    }
    this.keys = new CollectionKeys(name);
  }

  async insert(doc: T): Promise<string> {
    return (await this.submit({ kind: "insert", doc: toJsonDocument(doc) })) as string;
  }

  async put(doc: T): Promise<string> {
    return (await this.submit({ kind: "put", doc: toJsonDocument(doc) })) as string;
  }

  async putIf(doc: T, expectedRev: string): Promise<string> {
    return (await this.submit({ kind: "put", doc: toJsonDocument(doc), expectedRev })) as string;
  }

  async get(id: string): Promise<T | null> {
    return (await this.getRevisioned(id))?.doc ?? null;
  }

  async getRevisioned(id: string): Promise<Revisioned<T> | null> {
    await this.init();
    return (await this.readLive(id)).live;
  }

  async delete(id: string): Promise<boolean> {
    return (await this.submit({ kind: "delete", id })) === true;
  }

  async deleteIf(id: string, expectedRev: string): Promise<void> {
    await this.submit({ kind: "delete", id, expectedRev });
  }

  async find(filter: Filter = {}, options: FindOptions = {}): Promise<T[]> {
    return (await this.findRevisioned(filter, options)).map((found) => found.doc);
  }

  async findRevisioned(filter: Filter = {}, options: FindOptions = {}): Promise<Revisioned<T>[]> {
    assertValidFilter(filter);
    assertValidFindOptions(options);
    await this.init();
    const skip = options.skip ?? 0;
    const limit = options.limit ?? Number.POSITIVE_INFINITY;
    if (limit === 0) return [];
    const plan = planQuery(this.keys, this.indexes, filter, options);
    const planOrdered = plan.kind === "point" || plan.ordered;
    const matches: Stored<T>[] = [];
    scan: for await (const batch of this.candidates(plan)) {
      for (const found of batch) {
        if (!matchesFilter(found.doc, filter)) continue;
        matches.push(found);
        if (planOrdered && matches.length >= skip + limit) break scan;
      }
    }
    if (!planOrdered) {
      const compare = documentComparator(options.sort);
      matches.sort((a, b) => compare(a.doc, b.doc));
    }
    return matches.slice(skip, skip + limit);
  }

  async count(filter: Filter = {}): Promise<number> {
    assertValidFilter(filter);
    await this.init();
    let total = 0;
    if (Object.keys(filter).length === 0 && !this.spec.ttl) {
      // Every stored document counts: count keys without reading documents.
      const iterator = this.db.keys({ gte: this.keys.docPrefix, lt: this.keys.docEnd });
      try {
        for (let keys = await iterator.nextv(scanBatchMax); keys.length > 0; keys = await iterator.nextv(scanBatchMax)) total += keys.length;
      } finally {
        await iterator.close();
      }
      return total;
    }
    for await (const batch of this.candidates(planQuery(this.keys, this.indexes, filter, {}))) {
      for (const found of batch) if (matchesFilter(found.doc, filter)) total++;
    }
    return total;
  }

  async deleteMany(filter: Filter = {}): Promise<number> {
    assertValidFilter(filter);
    return this.write(async () => {
      let removed = 0;
      let ops: BatchOp[] = [];
      for await (const batch of this.candidates(planQuery(this.keys, this.indexes, filter, {}))) {
        for (const found of batch) {
          if (!matchesFilter(found.doc, filter)) continue;
          ops.push(...this.removalOps(found.doc));
          removed++;
        }
        if (ops.length >= writeBatchOpsMax) {
          await this.db.batch(ops, { sync: true });
          ops = [];
        }
      }
      if (ops.length > 0) await this.db.batch(ops, { sync: true });
      return removed;
    });
  }

  /** Deletes up to `batchMax` documents whose TTL has passed; returns how many. */
  async sweepExpired(batchMax: number): Promise<number> {
    if (!this.spec.ttl) return 0;
    return this.write(async () => {
      const due = await this.db.keys({ gte: this.keys.ttlPrefix, lt: this.keys.ttlDueEnd(this.clock.nowMs()), limit: batchMax }).all();
      const ops: BatchOp[] = [];
      let removed = 0;
      for (const key of due) {
        const raw = (await this.readRaw(idFromEntryKey(key)))?.doc;
        if (raw && this.isExpired(raw)) {
          ops.push(...this.removalOps(raw));
          removed++;
        } else if (!raw || !this.entryOps(raw).includes(key)) {
          // Writes replace TTL entries atomically, so an entry without its document version
          // cannot exist; if one ever does, drop it rather than let it hold a place in every batch.
          ops.push({ type: "del", key });
        }
      }
      if (ops.length > 0) await this.db.batch(ops, { sync: true });
      return removed;
    });
  }

  /** Removes every document, index entry and TTL entry of the collection (the start of an import). */
  async clearForImport(): Promise<void> {
    await this.write(async () => {
      await clearRange(this.db, { gte: this.keys.docPrefix, lt: this.keys.docEnd });
      await clearRange(this.db, { gte: this.keys.indexesPrefix, lt: this.keys.indexesEnd });
      await clearRange(this.db, { gte: this.keys.ttlPrefix, lt: this.keys.ttlEnd });
    });
  }

  /**
   * Writes imported documents with their index and TTL entries, in synced batches, each at a new
   * revision. The caller cleared the collection first and brings each `_id` once (a verified bundle
   * does), so no earlier version's entries need removing and unique values were unique where they
   * came from.
   */
  async importDocuments(docs: readonly Doc[]): Promise<void> {
    await this.write(async () => {
      let ops: BatchOp[] = [];
      for (const raw of docs) {
        const doc = toJsonDocument(raw);
        ops.push({ type: "put", key: this.keys.doc(doc._id), value: encodeStoredValue(newRevision(), doc) });
        for (const key of this.entryOps(doc)) ops.push({ type: "put", key, value: "" });
        if (ops.length >= writeBatchOpsMax) {
          await this.db.batch(ops, { sync: true });
          ops = [];
        }
      }
      if (ops.length > 0) await this.db.batch(ops, { sync: true });
    });
  }

  /** Waits for queued writes (used before closing the database). */
  quiesce(): Promise<void> {
    return this.mutex.idle();
  }

  /**
   * Group commit: single-document writes queue up while a batch is being synced, and the next
   * critical section applies all of them (up to writeGroupMax) in arrival order, each seeing the
   * effects of the ones before it through an overlay, then writes one synced batch. Each caller is
   * answered after that batch is durable, so acknowledgement semantics are those of one write per
   * fsync, at a fraction of the fsyncs.
   */
  private async submit(request: WriteRequest<T>): Promise<unknown> {
    await this.init();
    return new Promise((resolve, reject) => {
      this.pending.push({ request, resolve, reject });
      if (!this.commitScheduled) {
        this.commitScheduled = true;
        // commitGroup answers every waiter itself, failures included: nothing is left to report here.
        void this.mutex.run(() => this.commitGroup()).catch(() => undefined);
      }
    });
  }

  private async commitGroup(): Promise<void> {
    const group = this.pending.splice(0, writeGroupMax);
    if (this.pending.length > 0)
      void this.mutex.run(() => this.commitGroup()).catch(() => undefined); // answers its waiters itself
    else this.commitScheduled = false;
    const overlay: Overlay = new Map();
    const ops: BatchOp[] = [];
    const outcomes: { ok: boolean; value: unknown }[] = [];
    for (const { request } of group) {
      try {
        const prepared = await this.prepare(request, overlay);
        for (const op of prepared.ops) overlay.set(op.key, op.type === "put" ? op.value : null);
        ops.push(...prepared.ops);
        outcomes.push({ ok: true, value: prepared.result });
      } catch (error) {
        outcomes.push({ ok: false, value: error });
      }
    }
    let batchError: unknown;
    if (ops.length > 0) {
      try {
        // A key both deleted and re-put keeps the last operation: LevelDB applies a batch in order.
        await this.db.batch(ops, { sync: true });
      } catch (error) {
        batchError = error;
      }
    }
    group.forEach((waiter, n) => {
      const outcome = outcomes[n];
      if (!outcome.ok) waiter.reject(outcome.value);
      else if (batchError !== undefined) waiter.reject(batchError);
      else waiter.resolve(outcome.value);
    });
  }

  /**
   * Computes the batch operations of one write against the stored state plus `overlay` (the writes
   * earlier in the group): a conditional write compares with the revision as of those, so of two
   * writes from one revision in one group the second fails, as it would in two groups.
   */
  private async prepare(request: WriteRequest<T>, overlay: Overlay): Promise<{ ops: BatchOp[]; result: unknown }> {
    const id = request.kind === "delete" ? request.id : request.doc._id;
    const previous = await this.readLive(id, overlay);
    if (request.expectedRev !== undefined && previous.live?.rev !== request.expectedRev) {
      throw new RevisionConflictError(this.name, id, request.expectedRev);
    }
    if (request.kind === "delete") {
      if (!previous.raw) return { ops: [], result: false };
      return { ops: this.removalOps(previous.raw.doc), result: previous.live !== null };
    }
    const doc = request.doc;
    if (request.kind === "insert" && previous.live) throw new DuplicateKeyError(this.name, doc._id);
    await this.assertUnique(doc, overlay);
    const ops: BatchOp[] = previous.raw ? this.removalOps(previous.raw.doc) : [];
    const rev = newRevision();
    ops.push({ type: "put", key: this.keys.doc(doc._id), value: encodeStoredValue(rev, doc) });
    for (const key of this.entryOps(doc)) ops.push({ type: "put", key, value: "" });
    return { ops, result: rev };
  }

  private async write<R>(section: () => Promise<R>): Promise<R> {
    await this.init();
    return this.mutex.run(section);
  }

  /** Brings stored index and TTL entries in line with the declared spec (once per process). */
  private init(): Promise<void> {
    this.ready ??= this.mutex.run(() =>
      reconcileSpec({
        db: this.db,
        keys: this.keys,
        name: this.name,
        spec: this.spec,
        entryKeys: (doc) => this.entryOps(doc),
        isExpired: (doc) => this.isExpired(doc),
      }),
    );
    return this.ready;
  }

  /** Index and TTL entry keys of one document version. */
  private entryOps(doc: Doc): string[] {
    const keys = this.indexes.map((index) => this.keys.indexEntry(index.name, getPath(doc, index.field), doc._id));
    const expiresAtMs = this.expiresAtMs(doc);
    if (expiresAtMs !== null) keys.push(this.keys.ttlEntry(expiresAtMs, doc._id));
    return keys;
  }

  private removalOps(doc: Doc): BatchOp[] {
    return [{ type: "del", key: this.keys.doc(doc._id) }, ...this.entryOps(doc).map((key): BatchOp => ({ type: "del", key }))];
  }

  /** Throws DuplicateKeyError when another live document holds a unique value of `doc`. */
  private async assertUnique(doc: Doc, overlay: Overlay): Promise<void> {
    for (const index of this.indexes) {
      if (!index.unique) continue;
      const value = getPath(doc, index.field);
      if (value === undefined) continue;
      // Entries of this value: the stored ones not deleted in the overlay, plus the overlay's own.
      const entryPrefix = this.keys.indexEntry(index.name, value, "");
      const holders = new Set<string>();
      for await (const key of this.db.keys({ gte: entryPrefix, lt: entryPrefix.slice(0, -1) + "\x01" })) {
        if (overlay.get(key) !== null) holders.add(idFromEntryKey(key));
      }
      for (const [key, present] of overlay) if (present !== null && key.startsWith(entryPrefix)) holders.add(idFromEntryKey(key));
      holders.delete(doc._id);
      for (const otherId of holders) {
        const other = (await this.readRaw(otherId, overlay))?.doc;
        if (other && !this.isExpired(other)) throw new DuplicateKeyError(this.name, `${index.name}: ${JSON.stringify(value)}`);
      }
    }
  }

  private async readRaw(id: string, overlay?: Overlay): Promise<Stored<T> | null> {
    const key = this.keys.doc(id);
    const value = overlay?.has(key) ? overlay.get(key) : await this.db.get(key);
    if (value === undefined || value === null) return null;
    const stored = decodeStoredValue<T>(value);
    assert(stored.doc._id === id, `stored document ${id} has _id ${stored.doc._id}`);
    return stored;
  }

  /** The stored version (even when expired, so its entries can be removed) and the live view. */
  private async readLive(id: string, overlay?: Overlay): Promise<{ raw: Stored<T> | null; live: Stored<T> | null }> {
    const raw = await this.readRaw(id, overlay);
    return { raw, live: raw && !this.isExpired(raw.doc) ? raw : null };
  }

  private expiresAtMs(doc: Doc): number | null {
    const ttl = this.spec.ttl;
    if (!ttl) return null;
    const baseMs = ttlBaseMs(getPath(doc, ttl.field));
    return baseMs === null ? null : baseMs + ttl.seconds * 1000;
  }

  private isExpired(doc: Doc): boolean {
    const expiresAtMs = this.expiresAtMs(doc);
    return expiresAtMs !== null && expiresAtMs <= this.clock.nowMs();
  }

  /** Live documents the plan yields, in the plan's order, in batches (one await per batch). */
  private async *candidates(plan: QueryPlan): AsyncGenerator<Stored<T>[]> {
    if (plan.kind === "point") {
      const found = await this.readLive(plan.id);
      if (found.live) yield [found.live];
      return;
    }
    if (plan.kind === "points") {
      for (let at = 0; at < plan.ids.length; at += indexFetchBatchMax) {
        yield await this.fetchLive(plan.ids.slice(at, at + indexFetchBatchMax), new Set());
      }
      return;
    }
    if (plan.kind === "documents") {
      const iterator = this.db.iterator({ ...plan.range, reverse: plan.reverse });
      try {
        for (;;) {
          const entries = await iterator.nextv(scanBatchMax);
          if (entries.length === 0) return;
          const docs: Stored<T>[] = [];
          for (const [, value] of entries) {
            const stored = decodeStoredValue<T>(value);
            if (!this.isExpired(stored.doc)) docs.push(stored);
          }
          yield docs;
        }
      } finally {
        await iterator.close();
      }
    }
    const ranges = plan.reverse ? [...plan.ranges].reverse() : plan.ranges;
    // A document rewritten during the scan can show up under its old and its new value.
    const yielded = new Set<string>();
    for (const range of ranges) {
      const iterator = this.db.keys({ ...range, reverse: plan.reverse });
      try {
        for (;;) {
          const keys = await iterator.nextv(indexFetchBatchMax);
          if (keys.length === 0) break;
          yield await this.fetchLive(keys.map(idFromEntryKey), yielded);
        }
      } finally {
        await iterator.close();
      }
    }
  }

  private async fetchLive(ids: string[], yielded: Set<string>): Promise<Stored<T>[]> {
    const values = await this.db.getMany(ids.map((id) => this.keys.doc(id)));
    const docs: Stored<T>[] = [];
    for (const value of values) {
      if (value === undefined) continue; // deleted between reading the index and the document
      const stored = decodeStoredValue<T>(value);
      if (this.isExpired(stored.doc) || yielded.has(stored.doc._id)) continue;
      yielded.add(stored.doc._id);
      docs.push(stored);
    }
    return docs;
  }
}
