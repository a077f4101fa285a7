/**
 * Chooses how the embedded store reads candidates for a query: a point lookup, a scan of the
 * document keyspace (in `_id` order, optionally bounded), or a scan of one secondary index over
 * one or more key ranges (in (value, `_id`) order). Candidates are always re-checked against the
 * whole filter, so a plan only has to return a superset of the matches. When the plan's order is
 * the requested sort order the caller streams and stops after skip + limit matches.
 */
import type { FieldRange, Filter, FindOptions, IndexSpec } from "../ports.js";
import { compareStrings, isRange } from "../document-query.js";
import { CollectionKeys, encodeIndexValue, escapeKeyPart, nextTag, valueTags } from "./key-codec.js";

/** A key interval; `gte`/`gt` and `lt`/`lte` are alternatives. */
export interface KeyRange {
  gte?: string;
  gt?: string;
  lt?: string;
  lte?: string;
}

export type QueryPlan =
  | { kind: "point"; id: string }
  | { kind: "points"; ids: string[]; ordered: boolean }
  | { kind: "documents"; range: KeyRange; reverse: boolean; ordered: boolean }
  | { kind: "index"; index: IndexSpec; ranges: KeyRange[]; reverse: boolean; ordered: boolean };

type Bound = { key: string; inclusive: boolean };

function tagOf(bound: string | number): string {
  return typeof bound === "number" ? valueTags.number : valueTags.string;
}

function tighterLower(a: Bound, b: Bound): Bound {
  const order = compareStrings(a.key, b.key);
  if (order !== 0) return order > 0 ? a : b;
  return a.inclusive ? b : a;
}

function tighterUpper(a: Bound, b: Bound): Bound {
  const order = compareStrings(a.key, b.key);
  if (order !== 0) return order < 0 ? a : b;
  return a.inclusive ? b : a;
}

/** Applies `$gt/$gte/$lt/$lte` of type `type` to bounds over `prefix + encode(bound)`. */
function narrowBounds(
  bounds: { lower: Bound; upper: Bound },
  range: FieldRange,
  type: "string" | "number",
  encode: (bound: string | number) => string,
): { lower: Bound; upper: Bound } {
  let { lower, upper } = bounds;
  const applies = (bound: string | number | undefined): bound is string | number => bound !== undefined && typeof bound === type;
  if (applies(range.$gte)) lower = tighterLower(lower, { key: encode(range.$gte), inclusive: true });
  if (applies(range.$gt)) lower = tighterLower(lower, { key: encode(range.$gt), inclusive: false });
  if (applies(range.$lt)) upper = tighterUpper(upper, { key: encode(range.$lt), inclusive: false });
  if (applies(range.$lte)) upper = tighterUpper(upper, { key: encode(range.$lte), inclusive: true });
  return { lower, upper };
}

/**
 * Bounds over index keys `prefix + value + \0 + id` for a type-bracketed range (the type of the
 * first bound given; bounds of another type match nothing and are left to the filter re-check).
 * A value bound `v` becomes the key `prefix + value(v) + \0`, which sorts before every entry of v
 * (inclusive lower, exclusive upper) or `… + \1`, after every entry of v.
 */
function valueRangeBounds(prefix: string, range: FieldRange): { lower: Bound; upper: Bound } | null {
  const first = range.$gt ?? range.$gte ?? range.$lt ?? range.$lte;
  if (first === undefined) return null;
  const tag = tagOf(first);
  const type = typeof first === "number" ? "number" : "string";
  const valueKey = (v: string | number, afterEntries: boolean) => prefix + encodeIndexValue(v) + (afterEntries ? "\x01" : "\x00");
  let lower: Bound = { key: prefix + tag, inclusive: true };
  let upper: Bound = { key: prefix + nextTag(tag), inclusive: false };
  const applies = (bound: string | number | undefined): bound is string | number => bound !== undefined && typeof bound === type;
  if (applies(range.$gte)) lower = tighterLower(lower, { key: valueKey(range.$gte, false), inclusive: true });
  if (applies(range.$gt)) lower = tighterLower(lower, { key: valueKey(range.$gt, true), inclusive: true });
  if (applies(range.$lt)) upper = tighterUpper(upper, { key: valueKey(range.$lt, false), inclusive: false });
  if (applies(range.$lte)) upper = tighterUpper(upper, { key: valueKey(range.$lte, true), inclusive: false });
  return { lower, upper };
}

function toKeyRange(bounds: { lower: Bound; upper: Bound }): KeyRange {
  return {
    ...(bounds.lower.inclusive ? { gte: bounds.lower.key } : { gt: bounds.lower.key }),
    ...(bounds.upper.inclusive ? { lte: bounds.upper.key } : { lt: bounds.upper.key }),
  };
}

/** Key ranges of the index entries whose value equals `value` (null also finds missing). */
function equalityRanges(prefix: string, value: string | number | boolean | null): KeyRange[] {
  if (value === null) return [{ gte: prefix + valueTags.missing, lt: prefix + nextTag(valueTags.null) }];
  const encoded = prefix + encodeIndexValue(value);
  return [{ gte: encoded + "\x00", lt: encoded + "\x01" }];
}

function inRanges(prefix: string, values: readonly (string | number | boolean)[]): KeyRange[] {
  const encoded = [...new Set(values.map((v) => prefix + encodeIndexValue(v)))].sort(compareStrings);
  return encoded.map((key) => ({ gte: key + "\x00", lt: key + "\x01" }));
}

/** Document-keyspace range for conditions on `_id` (type-bracketed to strings). */
function idRange(keys: CollectionKeys, condition: Filter[string] | undefined): KeyRange {
  const whole = { lower: { key: keys.docPrefix, inclusive: true }, upper: { key: keys.docEnd, inclusive: false } };
  if (!isRange(condition)) return toKeyRange(whole);
  return toKeyRange(narrowBounds(whole, condition, "string", (id) => keys.doc(String(id))));
}

/** Narrows an equality range on one index value (`value + \0 …`) by the conditions on `_id`. */
function withIdBounds(range: KeyRange, condition: Filter[string] | undefined): KeyRange {
  if (!isRange(condition) || range.gte === undefined || range.lt === undefined) return range;
  const valuePrefix = range.gte;
  const whole = { lower: { key: range.gte, inclusive: true }, upper: { key: range.lt, inclusive: false } };
  return toKeyRange(narrowBounds(whole, condition, "string", (id) => valuePrefix + escapeKeyPart(String(id))));
}

/** Picks the plan for `filter` and `options.sort` over a collection with `indexes`. */
export function planQuery(keys: CollectionKeys, indexes: readonly IndexSpec[], filter: Filter, options: FindOptions): QueryPlan {
  const sortField = options.sort?.field ?? "_id";
  const reverse = (options.sort?.direction ?? 1) === -1;
  const idCondition = filter._id;
  if (idCondition !== undefined && !isRange(idCondition) && typeof idCondition === "string") {
    return { kind: "point", id: idCondition };
  }
  if (isRange(idCondition) && idCondition.$in !== undefined) {
    const wanted = [...new Set(idCondition.$in.filter((id): id is string => typeof id === "string"))].sort(compareStrings);
    return { kind: "points", ids: reverse ? wanted.reverse() : wanted, ordered: sortField === "_id" };
  }
  const indexFor = (field: string) => indexes.find((index) => index.field === field);

  // 1. Equality or $in on an indexed field: the most selective choice available.
  const equalityCandidates = Object.entries(filter).filter(([field, condition]) => {
    if (field === "_id" || indexFor(field) === undefined) return false;
    return !isRange(condition) || condition.$in !== undefined;
  });
  equalityCandidates.sort(([a], [b]) => Number(b === sortField) - Number(a === sortField));
  const equality = equalityCandidates[0];
  if (equality) {
    const [field, condition] = equality;
    const index = indexFor(field)!;
    const prefix = keys.indexPrefix(index.name);
    if (isRange(condition)) {
      const ranges = inRanges(prefix, condition.$in!);
      return { kind: "index", index, ranges, reverse, ordered: field === sortField || (ranges.length === 1 && sortField === "_id") };
    }
    const ranges = equalityRanges(prefix, condition);
    const singleValue = condition !== null;
    if (singleValue && sortField === "_id") {
      return { kind: "index", index, ranges: ranges.map((r) => withIdBounds(r, idCondition)), reverse, ordered: true };
    }
    return { kind: "index", index, ranges, reverse, ordered: field === sortField };
  }

  // 2. A range on the sort field (or `_id`): stream in order.
  const sortCondition = filter[sortField];
  if (sortField === "_id") return { kind: "documents", range: idRange(keys, idCondition), reverse, ordered: true };
  const sortIndex = indexFor(sortField);
  if (sortIndex && isRange(sortCondition)) {
    const bounds = valueRangeBounds(keys.indexPrefix(sortIndex.name), sortCondition);
    if (bounds) return { kind: "index", index: sortIndex, ranges: [toKeyRange(bounds)], reverse, ordered: true };
  }

  // 3. A range on `_id` or on another indexed field narrows the candidates.
  if (isRange(idCondition)) return { kind: "documents", range: idRange(keys, idCondition), reverse: false, ordered: false };
  for (const [field, condition] of Object.entries(filter)) {
    const index = indexFor(field);
    if (!index || !isRange(condition)) continue;
    const bounds = valueRangeBounds(keys.indexPrefix(index.name), condition);
    if (bounds) return { kind: "index", index, ranges: [toKeyRange(bounds)], reverse: false, ordered: false };
  }

  // 4. An indexed sort field without conditions: stream the whole index in order.
  if (sortIndex) {
    const prefix = keys.indexPrefix(sortIndex.name);
    return { kind: "index", index: sortIndex, ranges: [{ gte: prefix, lt: prefix.slice(0, -1) + "\x01" }], reverse, ordered: true };
  }
  return { kind: "documents", range: { gte: keys.docPrefix, lt: keys.docEnd }, reverse: false, ordered: false };
}
