/**
 * Reading a log buffer (the controller's ring or a node's mirror): the filters of the logs routes
 * and of `cloudctl logs`. Pure functions over records, oldest first.
 *
 * - `level`: the minimum level (TRACE < DEBUG < INFO < WARN < ERROR);
 * - `logger`: a logger name prefix (`cloud.gateway` matches `cloud.gateway` and
 *   `cloud.gateway.session`, not `cloud.gatewayx`);
 * - `limit`: the newest this many matching records;
 * - `afterSeq`: only records numbered above this (an incremental read).
 */
import type { LogLevel, LogRecord } from "./types.js";

export const LOG_LEVELS: readonly LogLevel[] = ["TRACE", "DEBUG", "INFO", "WARN", "ERROR"];
const RANK: Record<LogLevel, number> = { TRACE: 0, DEBUG: 1, INFO: 2, WARN: 3, ERROR: 4 };

/** The filters of one read; every field optional. */
export interface LogQuery {
  level?: LogLevel;
  logger?: string;
  limit?: number;
  afterSeq?: number;
}

/** True when `record` is at `level` or above. */
export function atLeast(record: Pick<LogRecord, "level">, level: LogLevel): boolean {
  return (RANK[record.level] ?? RANK.INFO) >= RANK[level];
}

/** True when `name` is `prefix` or a dotted child of it; an empty prefix matches every name. */
export function loggerMatches(name: string, prefix: string): boolean {
  if (prefix === "") return true;
  const bare = prefix.endsWith(".") ? prefix.slice(0, -1) : prefix;
  return name === bare || name.startsWith(`${bare}.`);
}

/** Whether `record` passes the level and logger filters of `query`. */
export function matchesQuery(record: LogRecord, query: LogQuery): boolean {
  return (query.level === undefined || atLeast(record, query.level)) && (query.logger === undefined || loggerMatches(record.logger, query.logger));
}

/** The records (oldest first) that pass `query`, the newest `limit` of them. */
export function selectRecords(records: readonly LogRecord[], query: LogQuery): LogRecord[] {
  const out: LogRecord[] = [];
  for (const record of records) {
    if (query.afterSeq !== undefined && record.seq <= query.afterSeq) continue;
    if (matchesQuery(record, query)) out.push(record);
  }
  return query.limit !== undefined && out.length > query.limit ? out.slice(out.length - query.limit) : out;
}
