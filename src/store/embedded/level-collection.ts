/**
 * One collection of the embedded document store: documents, secondary index entries and TTL entries
 * under the collection's key prefix (key-codec.ts), written in synced atomic batches; single-document
 * writes queued together are committed as one group.
 */
import type { Level } from "level";
import type { Clock } from "../../shared/clock.js";
import { assert } from "../../shared/errors.js";
import type { Collection, CollectionSpec, Doc, Filter, FindOptions, IndexSpec } from "../ports.js";
import { DuplicateKeyError } from "../ports.js";
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
import { CollectionKeys, idFromDocKey, idFromEntryKey } from "./key-codec.js";
import { planQuery, type KeyRange, type QueryPlan } from "./query-plan.js";

/** Documents read per iterator round trip while scanning the document keyspace. */
const scanBatchMax = 1_000;
/** Ids fetched per getMany round trip while reading through an index. */
const indexFetchBatchMax = 256;
/** Single-document writes committed together in one synced batch. */
const writeGroupMax = 256;
/** Operations per atomic batch when deleting many documents or rebuilding an index. */
const writeBatchOpsMax = 2_000;
const indexNamePattern = /^[A-Za-z0-9_.-]{1,63}$/;

export type Db = Level<string, string>;
type BatchOp = { type: "put"; key: string; value: string } | { type: "del"; key: string };
/** Keys written earlier in the current write group: the new value, or null when deleted. */
type Overlay = Map<string, string | null>;
type WriteRequest<T> = { kind: "insert" | "put"; doc: T } | { kind: "delete"; id: string };
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

  async insert(doc: T): Promise<void> {
    await this.submit({ kind: "insert", doc: toJsonDocument(doc) });
  }

  async put(doc: T): Promise<void> {
    await this.submit({ kind: "put", doc: toJsonDocument(doc) });
  }

  async get(id: string): Promise<T | null> {
    await this.init();
    return (await this.readLive(id)).doc;
  }

  async delete(id: string): Promise<boolean> {
    return (await this.submit({ kind: "delete", id })) === true;
  }

  async find(filter: Filter = {}, options: FindOptions = {}): Promise<T[]> {
    assertValidFilter(filter);
    assertValidFindOptions(options);
    await this.init();
    const skip = options.skip ?? 0;
    const limit = options.limit ?? Number.POSITIVE_INFINITY;
    if (limit === 0) return [];
    const plan = planQuery(this.keys, this.indexes, filter, options);
    const planOrdered = plan.kind === "point" || plan.ordered;
    const matches: T[] = [];
    scan: for await (const batch of this.candidates(plan)) {
      for (const doc of batch) {
        if (!matchesFilter(doc, filter)) continue;
        matches.push(doc);
        if (planOrdered && matches.length >= skip + limit) break scan;
      }
    }
    if (!planOrdered) matches.sort(documentComparator(options.sort));
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
      for (const doc of batch) if (matchesFilter(doc, filter)) total++;
    }
    return total;
  }

  async deleteMany(filter: Filter = {}): Promise<number> {
    assertValidFilter(filter);
    return this.write(async () => {
      let removed = 0;
      let ops: BatchOp[] = [];
      for await (const batch of this.candidates(planQuery(this.keys, this.indexes, filter, {}))) {
        for (const doc of batch) {
          if (!matchesFilter(doc, filter)) continue;
          ops.push(...this.removalOps(doc));
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
        const raw = await this.readRaw(idFromEntryKey(key));
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
      await this.clearRange({ gte: this.keys.docPrefix, lt: this.keys.docEnd });
      await this.clearRange({ gte: this.keys.indexesPrefix, lt: this.keys.indexesEnd });
      await this.clearRange({ gte: this.keys.ttlPrefix, lt: this.keys.ttlEnd });
    });
  }

  /**
   * Writes imported documents with their index and TTL entries, in synced batches. The caller
   * cleared the collection first and brings each `_id` once (a verified bundle does), so no
   * earlier version's entries need removing and unique values were unique where they came from.
   */
  async importDocuments(docs: readonly Doc[]): Promise<void> {
    await this.write(async () => {
      let ops: BatchOp[] = [];
      for (const raw of docs) {
        const doc = toJsonDocument(raw);
        ops.push({ type: "put", key: this.keys.doc(doc._id), value: JSON.stringify(doc) });
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

  /** Computes the batch operations of one write against the stored state plus `overlay`. */
  private async prepare(request: WriteRequest<T>, overlay: Overlay): Promise<{ ops: BatchOp[]; result: unknown }> {
    if (request.kind === "delete") {
      const previous = await this.readLive(request.id, overlay);
      if (!previous.raw) return { ops: [], result: false };
      return { ops: this.removalOps(previous.raw), result: previous.doc !== null };
    }
    const doc = request.doc;
    const previous = await this.readLive(doc._id, overlay);
    if (request.kind === "insert" && previous.doc) throw new DuplicateKeyError(this.name, doc._id);
    await this.assertUnique(doc, overlay);
    const ops: BatchOp[] = previous.raw ? this.removalOps(previous.raw) : [];
    ops.push({ type: "put", key: this.keys.doc(doc._id), value: JSON.stringify(doc) });
    for (const key of this.entryOps(doc)) ops.push({ type: "put", key, value: "" });
    return { ops, result: undefined };
  }

  private async write<R>(section: () => Promise<R>): Promise<R> {
    await this.init();
    return this.mutex.run(section);
  }

  /** Brings stored index and TTL entries in line with the declared spec (once per process). */
  private init(): Promise<void> {
    this.ready ??= this.mutex.run(() => this.reconcileSpec());
    return this.ready;
  }

  private async reconcileSpec(): Promise<void> {
    const declared = JSON.stringify(normalizeSpec(this.spec));
    const stored = await this.db.get(this.keys.meta);
    if (stored === declared) return;
    const previous = stored ? (JSON.parse(stored) as CollectionSpec) : { indexes: [] };
    // Drop every index and TTL entry written under the previous spec, then rebuild from documents.
    // The metadata is written last, so a crash midway leads to a fresh rebuild on the next open.
    for (const index of previous.indexes ?? [])
      await this.clearRange({ gte: this.keys.indexPrefix(index.name), lt: this.keys.indexPrefix(index.name).slice(0, -1) + "\x01" });
    for (const index of this.indexes)
      await this.clearRange({ gte: this.keys.indexPrefix(index.name), lt: this.keys.indexPrefix(index.name).slice(0, -1) + "\x01" });
    await this.clearRange({ gte: this.keys.ttlPrefix, lt: this.keys.ttlEnd });
    const seen = this.indexes.filter((i) => i.unique).map(() => new Map<string, string>());
    let ops: BatchOp[] = [];
    for await (const [key, value] of this.db.iterator({ gte: this.keys.docPrefix, lt: this.keys.docEnd })) {
      const doc = JSON.parse(value) as Doc;
      assert(doc._id === idFromDocKey(this.keys, key), `document key and _id disagree in ${this.name}`);
      this.indexes
        .filter((i) => i.unique)
        .forEach((index, n) => {
          const fieldValue = getPath(doc, index.field);
          if (fieldValue === undefined) return;
          const valueKey = JSON.stringify(fieldValue);
          const other = seen[n].get(valueKey);
          if (other !== undefined && !this.isExpired(doc)) throw new DuplicateKeyError(this.name, `${index.name}: ${valueKey}`);
          seen[n].set(valueKey, doc._id);
        });
      ops.push(...this.entryOps(doc).map((k): BatchOp => ({ type: "put", key: k, value: "" })));
      if (ops.length >= writeBatchOpsMax) {
        await this.db.batch(ops, { sync: true });
        ops = [];
      }
    }
    ops.push({ type: "put", key: this.keys.meta, value: declared });
    await this.db.batch(ops, { sync: true });
  }

  private async clearRange(range: KeyRange): Promise<void> {
    let ops: BatchOp[] = [];
    for await (const key of this.db.keys(range)) {
      ops.push({ type: "del", key });
      if (ops.length >= writeBatchOpsMax) {
        await this.db.batch(ops, { sync: true });
        ops = [];
      }
    }
    if (ops.length > 0) await this.db.batch(ops, { sync: true });
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
        const other = await this.readRaw(otherId, overlay);
        if (other && !this.isExpired(other)) throw new DuplicateKeyError(this.name, `${index.name}: ${JSON.stringify(value)}`);
      }
    }
  }

  private async readRaw(id: string, overlay?: Overlay): Promise<T | null> {
    const key = this.keys.doc(id);
    const value = overlay?.has(key) ? overlay.get(key) : await this.db.get(key);
    if (value === undefined || value === null) return null;
    const doc = JSON.parse(value) as T;
    assert(doc._id === id, `stored document ${id} has _id ${doc._id}`);
    return doc;
  }

  /** The stored version (even when expired, so its entries can be removed) and the live view. */
  private async readLive(id: string, overlay?: Overlay): Promise<{ raw: T | null; doc: T | null }> {
    const raw = await this.readRaw(id, overlay);
    return { raw, doc: raw && !this.isExpired(raw) ? raw : null };
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
  private async *candidates(plan: QueryPlan): AsyncGenerator<T[]> {
    if (plan.kind === "point") {
      const found = await this.readLive(plan.id);
      if (found.doc) yield [found.doc];
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
          const docs: T[] = [];
          for (const [, value] of entries) {
            const doc = JSON.parse(value) as T;
            if (!this.isExpired(doc)) docs.push(doc);
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

  private async fetchLive(ids: string[], yielded: Set<string>): Promise<T[]> {
    const values = await this.db.getMany(ids.map((id) => this.keys.doc(id)));
    const docs: T[] = [];
    for (const value of values) {
      if (value === undefined) continue; // deleted between reading the index and the document
      const doc = JSON.parse(value) as T;
      if (this.isExpired(doc) || yielded.has(doc._id)) continue;
      yielded.add(doc._id);
      docs.push(doc);
    }
    return docs;
  }
}

/** The spec in a canonical form (indexes sorted by name, defaults filled), stored and compared as JSON. */
export function normalizeSpec(spec: CollectionSpec): CollectionSpec {
  const indexes = [...(spec.indexes ?? [])]
    .map((i) => ({ name: i.name, field: i.field, unique: i.unique === true }))
    .sort((x, y) => (x.name < y.name ? -1 : x.name > y.name ? 1 : 0));
  return { indexes, ...(spec.ttl ? { ttl: { name: spec.ttl.name, field: spec.ttl.field, seconds: spec.ttl.seconds } } : {}) };
}
