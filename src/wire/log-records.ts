/**
 * Bounds of a mirrored daemon log record (`LogRecord` of proto/daemon.proto). The daemon clamps
 * every field before it sends a record, and the controller clamps again on receipt (a daemon of
 * another build must not be able to grow the controller's buffers): what crosses the stream and
 * what a per-node buffer holds is at most a few tens of kilobytes per record.
 */
import type { LogRecordMessage } from "./daemon-proto.js";

/** Characters kept of each field; longer text is cut and ends with {@link CLAMP_MARK}. */
export const LOG_RECORD_FIELD_CHARS_MAX = {
  level: 5,
  logger: 256,
  thread: 64,
  message: 8_192,
  throwable: 16_384,
  mdcKey: 64,
  mdcValue: 512,
} as const;
/** MDC entries kept per record (the first ones in insertion order). */
export const LOG_RECORD_MDC_ENTRIES_MAX = 16;
/** Appended to a field that was cut. */
export const CLAMP_MARK = "…";

const LEVELS: ReadonlySet<string> = new Set(["TRACE", "DEBUG", "INFO", "WARN", "ERROR"]);

/** `text` cut to `max` characters (the last one being {@link CLAMP_MARK} when cut). */
export function clampText(text: string, max: number): string {
  if (text.length <= max) return text;
  return text.slice(0, max - CLAMP_MARK.length) + CLAMP_MARK;
}

/** A record within the bounds above; an unknown level becomes INFO, non-string MDC values are dropped. */
export function clampLogRecord(record: LogRecordMessage): LogRecordMessage {
  const limits = LOG_RECORD_FIELD_CHARS_MAX;
  const level = String(record.level ?? "").toUpperCase();
  const mdc: Record<string, string> = {};
  let entries = 0;
  for (const [key, value] of Object.entries(record.mdc ?? {})) {
    if (entries >= LOG_RECORD_MDC_ENTRIES_MAX) break;
    if (typeof value !== "string") continue;
    mdc[clampText(key, limits.mdcKey)] = clampText(value, limits.mdcValue);
    entries++;
  }
  return {
    level: LEVELS.has(level) ? level : "INFO",
    logger: clampText(String(record.logger ?? ""), limits.logger),
    message: clampText(String(record.message ?? ""), limits.message),
    timestamp_ms: Number.isSafeInteger(record.timestamp_ms) ? record.timestamp_ms : 0,
    seq: Number.isSafeInteger(record.seq) && record.seq > 0 ? record.seq : 0,
    thread: clampText(String(record.thread ?? ""), limits.thread),
    throwable: clampText(String(record.throwable ?? ""), limits.throwable),
    mdc,
    dropped_before: Number.isSafeInteger(record.dropped_before) && record.dropped_before > 0 ? record.dropped_before : 0,
  };
}
