/**
 * Translates {@link Filter} and sort options to PostgreSQL over a table `(id, doc jsonb,
 * expires_at)`, with the semantics of document-query.ts. Values always travel as parameters; field
 * paths are validated identifiers and are embedded as quoted text[] literals, so nothing a caller
 * passes reaches the SQL text unchecked.
 *
 * Every field expression is `doc #> '{a,b}'`, the exact expression the adapter's indexes are built
 * on, so the planner can use them for equality, `$in` and numeric ranges.
 */
import { assert } from "../../shared/errors.js";
import { assertFieldPath, isRange } from "../document-query.js";
import type { Filter, FindOptions } from "../ports.js";

/** Accumulates positional parameters. */
export class SqlParams {
  readonly values: unknown[] = [];
  /** Adds a value and returns its placeholder (`$n`). */
  add(value: unknown): string {
    this.values.push(value);
    return `$${this.values.length}`;
  }
}

/** Quotes an identifier (table, index) for SQL. */
export function quoteIdentifier(name: string): string {
  assert(!name.includes("\u0000"), "identifier contains NUL");
  return `"${name.replaceAll('"', '""')}"`;
}

/** `doc #> '{a,b}'` for a validated field path. */
export function fieldExpression(path: string): string {
  assertFieldPath(path);
  return `(doc #> '{${path.split(".").join(",")}}')`;
}

function textExpression(path: string): string {
  assertFieldPath(path);
  return `(doc #>> '{${path.split(".").join(",")}}')`;
}

const comparisonOperators = { $gt: ">", $gte: ">=", $lt: "<", $lte: "<=" } as const;

function idCondition(condition: Filter[string], params: SqlParams): string[] {
  if (!isRange(condition)) return [typeof condition === "string" ? `id = ${params.add(condition)}` : "FALSE"];
  const parts: string[] = [];
  if (condition.$in !== undefined) {
    parts.push(`id = ANY(${params.add(condition.$in.filter((v) => typeof v === "string"))}::text[])`);
  }
  for (const [op, sql] of Object.entries(comparisonOperators) as [keyof typeof comparisonOperators, string][]) {
    const bound = condition[op];
    if (bound === undefined) continue;
    parts.push(typeof bound === "string" ? `id ${sql} ${params.add(bound)}` : "FALSE");
  }
  return parts;
}

function fieldCondition(path: string, condition: Filter[string], params: SqlParams): string[] {
  const field = fieldExpression(path);
  if (!isRange(condition)) {
    if (condition === null) return [`(${field} IS NULL OR ${field} = 'null'::jsonb)`];
    return [`${field} = ${params.add(JSON.stringify(condition))}::jsonb`];
  }
  const parts: string[] = [];
  if (condition.$in !== undefined) {
    parts.push(`${field} = ANY(${params.add(condition.$in.map((v) => JSON.stringify(v)))}::jsonb[])`);
  }
  for (const [op, sql] of Object.entries(comparisonOperators) as [keyof typeof comparisonOperators, string][]) {
    const bound = condition[op];
    if (bound === undefined) continue;
    if (typeof bound === "number") {
      // jsonb orders numbers numerically; the type test keeps the comparison type-bracketed.
      parts.push(`(jsonb_typeof(${field}) = 'number' AND ${field} ${sql} ${params.add(JSON.stringify(bound))}::jsonb)`);
    } else {
      parts.push(`(jsonb_typeof(${field}) = 'string' AND ${textExpression(path)} COLLATE "C" ${sql} ${params.add(bound)}::text)`);
    }
  }
  return parts;
}

/** SQL conditions (to be ANDed) for a validated filter. */
export function filterConditions(filter: Filter, params: SqlParams): string[] {
  const parts: string[] = [];
  for (const [path, condition] of Object.entries(filter)) {
    parts.push(...(path === "_id" ? idCondition(condition, params) : fieldCondition(path, condition, params)));
  }
  return parts;
}

/** ORDER BY list for the sort option, with the cross-type order of document-query.ts. */
export function orderBy(sort: FindOptions["sort"]): string {
  const direction = (sort?.direction ?? 1) === 1 ? "ASC" : "DESC";
  if (!sort || sort.field === "_id") return `id ${direction}`;
  const field = fieldExpression(sort.field);
  const typeOf = `jsonb_typeof(${field})`;
  const rank =
    `CASE WHEN ${field} IS NULL THEN 0 ELSE CASE ${typeOf} WHEN 'null' THEN 1 WHEN 'number' THEN 2 ` +
    `WHEN 'string' THEN 3 WHEN 'object' THEN 4 WHEN 'array' THEN 5 WHEN 'boolean' THEN 6 ELSE 7 END END`;
  return [
    `${rank} ${direction}`,
    `CASE WHEN ${typeOf} = 'number' THEN (${textExpression(sort.field)})::numeric END ${direction}`,
    `CASE WHEN ${typeOf} = 'string' THEN ${textExpression(sort.field)} END COLLATE "C" ${direction}`,
    `CASE WHEN ${typeOf} IN ('object', 'array', 'boolean') THEN ${field} END ${direction}`,
    `id ${direction}`,
  ].join(", ");
}
