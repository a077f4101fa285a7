/**
 * Adapter-independent semantics of {@link Filter} and {@link FindOptions}: validation, in-memory
 * matching, value ordering and TTL time parsing. The embedded adapter evaluates queries with these
 * functions; the database adapters translate the same rules to their query languages, and the
 * contract suite checks that every adapter agrees with them.
 *
 * Rules (MongoDB's, restricted to the subset the ports expose):
 * - Field paths are identifiers joined by dots (`portRange.start`); anything else is a bug.
 * - Equality compares scalars; numbers compare numerically (1 equals 1.0); `null` matches a null or
 *   missing field.
 * - Range operators are type-bracketed: `$gt: 5` matches only numbers, `$gt: "m"` only strings.
 *   Strings order by Unicode code point (the byte order of UTF-8).
 * - Sort order across types: missing < null < numbers < strings < objects < arrays < booleans; ties
 *   are broken by `_id` in the sort direction.
 */
import { assert } from "../shared/errors.js";
import type { Doc, FieldRange, Filter, FindOptions } from "./ports.js";

/** Scalar a filter may compare against. */
export type FilterScalar = string | number | boolean | null;

const fieldPathPattern = /^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$/;
const rangeOperators = new Set(["$gt", "$gte", "$lt", "$lte", "$in"]);

const collectionNamePattern = /^[A-Za-z][A-Za-z0-9_]{0,49}$/;

/**
 * Asserts that `name` is a collection name every adapter accepts (a letter, then letters, digits
 * or underscores, at most 50 characters: it becomes part of a PostgreSQL table name), so a name
 * that works on the development profile works in production too.
 */
export function assertCollectionName(name: string): void {
  assert(collectionNamePattern.test(name), `invalid collection name ${JSON.stringify(name)}`);
}

/** Asserts that `path` is a field path the adapters accept (identifiers joined by dots). */
export function assertFieldPath(path: string): void {
  assert(fieldPathPattern.test(path), `invalid field path ${JSON.stringify(path)}`);
}

/** Asserts that a filter only uses supported operators and value types. */
export function assertValidFilter(filter: Filter): void {
  for (const [path, condition] of Object.entries(filter)) {
    assertFieldPath(path);
    if (isRange(condition)) {
      const keys = Object.keys(condition);
      assert(keys.length > 0, `empty condition for ${path}`);
      for (const key of keys) assert(rangeOperators.has(key), `unsupported operator ${key} on ${path}`);
      for (const op of ["$gt", "$gte", "$lt", "$lte"] as const) {
        const bound = condition[op];
        if (bound !== undefined) assert(typeof bound === "string" || isFiniteNumber(bound), `bad ${op} bound on ${path}`);
      }
      if (condition.$in !== undefined) {
        assert(Array.isArray(condition.$in), `$in on ${path} must be an array`);
        for (const v of condition.$in) assert(isScalarValue(v) && v !== null, `bad $in value on ${path}`);
      }
    } else {
      assert(isScalarValue(condition), `bad equality value on ${path}`);
    }
  }
}

/** Asserts sort/skip/limit are well-formed. */
export function assertValidFindOptions(options: FindOptions): void {
  if (options.sort) {
    assertFieldPath(options.sort.field);
    assert(options.sort.direction === 1 || options.sort.direction === -1, "sort direction must be 1 or -1");
  }
  if (options.skip !== undefined) assert(Number.isInteger(options.skip) && options.skip >= 0, "skip must be a non-negative integer");
  if (options.limit !== undefined) assert(Number.isInteger(options.limit) && options.limit >= 0, "limit must be a non-negative integer");
}

/** True when the condition is an operator object rather than an equality scalar. */
export function isRange(condition: Filter[string] | undefined): condition is FieldRange {
  return typeof condition === "object" && condition !== null;
}

function isFiniteNumber(value: unknown): value is number {
  return typeof value === "number" && Number.isFinite(value);
}

function isScalarValue(value: unknown): value is FilterScalar {
  return value === null || typeof value === "string" || typeof value === "boolean" || isFiniteNumber(value);
}

/** Reads a dotted path; undefined when any step is missing or not an object. */
export function getPath(doc: unknown, path: string): unknown {
  let current: unknown = doc;
  for (const part of path.split(".")) {
    if (typeof current !== "object" || current === null || Array.isArray(current)) return undefined;
    current = (current as Record<string, unknown>)[part];
  }
  return current;
}

/** Compares strings by Unicode code point, which is the byte order of their UTF-8 encoding. */
export function compareStrings(a: string, b: string): number {
  const length = Math.min(a.length, b.length);
  for (let i = 0; i < length; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x !== y) return codeUnitRank(x) - codeUnitRank(y);
  }
  return a.length - b.length;
}

// UTF-16 order differs from code point order only between surrogates (U+D800..DFFF, which encode
// code points above U+FFFF) and U+E000..FFFF; shifting both ranges restores code point order.
function codeUnitRank(unit: number): number {
  if (unit >= 0xe000) return unit - 0x800;
  if (unit >= 0xd800) return unit + 0x2000;
  return unit;
}

/** Sort rank of a value's type: missing < null < number < string < object < array < boolean. */
export function typeRank(value: unknown): number {
  if (value === undefined) return 0;
  if (value === null) return 1;
  if (typeof value === "number") return 2;
  if (typeof value === "string") return 3;
  if (Array.isArray(value)) return 5;
  if (typeof value === "object") return 4;
  if (typeof value === "boolean") return 6;
  return 7;
}

/** Total order over JSON values used for sorting (see the module comment). */
export function compareValues(a: unknown, b: unknown): number {
  const rankA = typeRank(a);
  const rankB = typeRank(b);
  if (rankA !== rankB) return rankA - rankB;
  if (typeof a === "number" && typeof b === "number") return a < b ? -1 : a > b ? 1 : 0;
  if (typeof a === "string" && typeof b === "string") return compareStrings(a, b);
  if (typeof a === "boolean" && typeof b === "boolean") return Number(a) - Number(b);
  if (rankA === 4 || rankA === 5) return compareStrings(JSON.stringify(a), JSON.stringify(b));
  return 0;
}

function scalarEquals(value: unknown, expected: FilterScalar): boolean {
  if (expected === null) return value === null || value === undefined;
  return value === expected;
}

function rangeMatches(value: unknown, range: FieldRange): boolean {
  if (range.$in !== undefined && !range.$in.some((candidate) => value === candidate)) return false;
  const bounds: [keyof FieldRange, (c: number) => boolean][] = [
    ["$gt", (c) => c > 0],
    ["$gte", (c) => c >= 0],
    ["$lt", (c) => c < 0],
    ["$lte", (c) => c <= 0],
  ];
  for (const [op, accept] of bounds) {
    const bound = range[op] as string | number | undefined;
    if (bound === undefined) continue;
    if (typeof bound !== typeof value) return false;
    if (!accept(compareValues(value, bound))) return false;
  }
  return true;
}

/** True when `doc` satisfies every condition of `filter`. */
export function matchesFilter(doc: Doc, filter: Filter): boolean {
  for (const [path, condition] of Object.entries(filter)) {
    const value = getPath(doc, path);
    if (isRange(condition)) {
      if (!rangeMatches(value, condition)) return false;
    } else if (!scalarEquals(value, condition)) {
      return false;
    }
  }
  return true;
}

/** Comparator for `options.sort` with the `_id` tie-break in the same direction. */
export function documentComparator(sort: FindOptions["sort"]): (a: Doc, b: Doc) => number {
  const field = sort?.field ?? "_id";
  const direction = sort?.direction ?? 1;
  return (a, b) => {
    const byField = field === "_id" ? 0 : compareValues(getPath(a, field), getPath(b, field));
    return direction * (byField !== 0 ? byField : compareStrings(a._id, b._id));
  };
}

/**
 * Epoch milliseconds of a TTL base value (Date, ISO-8601 string or epoch-ms number); null when the
 * value is missing or unparseable, in which case the document never expires.
 */
export function ttlBaseMs(value: unknown): number | null {
  if (value instanceof Date) return Number.isFinite(value.getTime()) ? value.getTime() : null;
  if (typeof value === "number") return Number.isFinite(value) ? value : null;
  if (typeof value === "string") {
    const parsed = Date.parse(value);
    return Number.isFinite(parsed) ? parsed : null;
  }
  return null;
}

/** Normalizes a document to its JSON form (Dates become ISO strings, undefined fields vanish). */
export function toJsonDocument<T extends Doc>(doc: T): T {
  assert(typeof doc._id === "string" && doc._id.length > 0, "document _id must be a non-empty string");
  return JSON.parse(JSON.stringify(doc)) as T;
}
