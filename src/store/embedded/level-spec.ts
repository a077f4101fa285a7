/**
 * The declared spec of an embedded collection against the one stored with it (`M\0<collection>`):
 * when they differ, every index and TTL entry is rebuilt from the documents before the collection
 * serves its first operation. The metadata is written last, so a crash midway leads to a fresh
 * rebuild on the next open.
 */
import type { Level } from "level";
import { assert } from "../../shared/errors.js";
import { getPath } from "../document-query.js";
import { DuplicateKeyError, type CollectionSpec, type Doc } from "../ports.js";
import { idFromDocKey, type CollectionKeys } from "./key-codec.js";
import type { KeyRange } from "./query-plan.js";
import { decodeStoredValue } from "./stored-value.js";

/** Operations per atomic batch when deleting many documents or rebuilding an index. */
export const writeBatchOpsMax = 2_000;

type Db = Level<string, string>;
type BatchOp = { type: "put"; key: string; value: string } | { type: "del"; key: string };

/** What {@link reconcileSpec} needs of a collection. */
export interface SpecTarget {
  db: Db;
  keys: CollectionKeys;
  name: string;
  spec: CollectionSpec;
  /** Index and TTL entry keys of one document version. */
  entryKeys(doc: Doc): string[];
  isExpired(doc: Doc): boolean;
}

/** Brings the stored index and TTL entries in line with the declared spec. */
export async function reconcileSpec(target: SpecTarget): Promise<void> {
  const { db, keys, name } = target;
  const indexes = target.spec.indexes ?? [];
  const declared = JSON.stringify(normalizeSpec(target.spec));
  const stored = await db.get(keys.meta);
  if (stored === declared) return;
  const previous = stored ? (JSON.parse(stored) as CollectionSpec) : { indexes: [] };
  // Drop every index and TTL entry written under the previous spec, then rebuild from documents.
  for (const index of [...(previous.indexes ?? []), ...indexes])
    await clearRange(db, { gte: keys.indexPrefix(index.name), lt: keys.indexPrefix(index.name).slice(0, -1) + "\x01" });
  await clearRange(db, { gte: keys.ttlPrefix, lt: keys.ttlEnd });
  const unique = indexes.filter((i) => i.unique);
  const seen = unique.map(() => new Map<string, string>());
  let ops: BatchOp[] = [];
  for await (const [key, value] of db.iterator({ gte: keys.docPrefix, lt: keys.docEnd })) {
    const doc = decodeStoredValue(value).doc;
    assert(doc._id === idFromDocKey(keys, key), `document key and _id disagree in ${name}`);
    unique.forEach((index, n) => {
      const fieldValue = getPath(doc, index.field);
      if (fieldValue === undefined) return;
      const valueKey = JSON.stringify(fieldValue);
      const other = seen[n].get(valueKey);
      if (other !== undefined && !target.isExpired(doc)) throw new DuplicateKeyError(name, `${index.name}: ${valueKey}`);
      seen[n].set(valueKey, doc._id);
    });
    ops.push(...target.entryKeys(doc).map((k): BatchOp => ({ type: "put", key: k, value: "" })));
    if (ops.length >= writeBatchOpsMax) {
      await db.batch(ops, { sync: true });
      ops = [];
    }
  }
  ops.push({ type: "put", key: keys.meta, value: declared });
  await db.batch(ops, { sync: true });
}

/** Deletes every key of `range`, in synced batches. */
export async function clearRange(db: Db, range: KeyRange): Promise<void> {
  let ops: BatchOp[] = [];
  for await (const key of db.keys(range)) {
    ops.push({ type: "del", key });
    if (ops.length >= writeBatchOpsMax) {
      await db.batch(ops, { sync: true });
      ops = [];
    }
  }
  if (ops.length > 0) await db.batch(ops, { sync: true });
}

/** The spec in a canonical form (indexes sorted by name, defaults filled), stored and compared as JSON. */
export function normalizeSpec(spec: CollectionSpec): CollectionSpec {
  const indexes = [...(spec.indexes ?? [])]
    .map((i) => ({ name: i.name, field: i.field, unique: i.unique === true }))
    .sort((x, y) => (x.name < y.name ? -1 : x.name > y.name ? 1 : 0));
  return { indexes, ...(spec.ttl ? { ttl: { name: spec.ttl.name, field: spec.ttl.field, seconds: spec.ttl.seconds } } : {}) };
}
