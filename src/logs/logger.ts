/**
 * The process log service (spec document 2, "Log record"): pino serializes every record to standard
 * output in the JSON or HUMAN layout, an in-memory ring keeps the most recent records for the logs
 * routes, and an AsyncLocalStorage carries the per-request MDC and the logical thread name.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { isMainThread, threadId } from "node:worker_threads";
import { pino, type Logger as PinoLogger } from "pino";
import { systemClock, type Clock } from "../shared/clock.js";
import { RingBuffer } from "./ring-buffer.js";
import type { LogLevel, LogRecord, LogService, Logger } from "./types.js";

/** Capacity of the in-memory record ring (spec document 2, Limits: controller log buffer). */
export const LOG_BUFFER_CAPACITY_RECORDS = 2000;
/** Upper bound on concurrent `tail` listeners (SSE clients are capped at 100; leave headroom). */
export const LOG_TAIL_LISTENERS_MAX = 1000;
/** Depth bound when following `Error.cause` chains into the exception text. */
const CAUSE_DEPTH_MAX = 8;

/**
 * Third-party logger names pinned to WARN whatever `logging.level` says. Records logged under these
 * names (or a dotted child of them) below WARN are dropped. See `third-party.ts` for the adapters.
 */
export const PINNED_LOGGERS = {
  grpc: "io.grpc",
  mongodb: "org.mongodb.driver",
  redis: "io.redis",
  process: "node.process",
} as const;

export type LogFormat = "HUMAN" | "JSON";

const LEVEL_VALUES: Record<LogLevel, number> = { TRACE: 10, DEBUG: 20, INFO: 30, WARN: 40, ERROR: 50 };
const PINO_METHOD: Record<LogLevel, "trace" | "debug" | "info" | "warn" | "error"> = {
  TRACE: "trace",
  DEBUG: "debug",
  INFO: "info",
  WARN: "warn",
  ERROR: "error",
};

/** Where formatted lines go: standard output in production, a buffer in tests. */
export interface LogOutput {
  write(chunk: string): unknown;
}

export interface LogServiceOptions {
  /** Already normalized by the config loader; unknown values fall back to INFO here too. */
  level: string;
  /** HUMAN or JSON; anything else is HUMAN. */
  format: string;
  clock?: Clock;
  capacityRecords?: number;
}

/** The controller's log service: the shared {@link LogService} contract plus thread naming. */
export interface ControllerLogService extends LogService {
  readonly level: LogLevel;
  readonly format: LogFormat;
  /**
   * Runs `fn` with a logical thread name (the `thread` field). Node has one JS thread, so the name
   * identifies the async context instead: `main` by default, e.g. `http` for requests, `scheduler`
   * for ticks, `grpc` for daemon sessions. Worker threads default to `worker-<threadId>`.
   */
  withThread<T>(name: string, fn: () => T): T;
  /** The current logical thread name. */
  thread(): string;
  /** Whether a record at `level` from logger `name` would be emitted. */
  isEnabled(name: string, level: LogLevel): boolean;
}

interface ContextStore {
  readonly thread: string;
  readonly mdc: Readonly<Record<string, string>>;
}

/** Normalizes a level name (case-insensitive); unknown values become INFO. */
export function normalizeLevel(level: string): LogLevel {
  const upper = level.trim().toUpperCase();
  return upper in LEVEL_VALUES ? (upper as LogLevel) : "INFO";
}

/** Whether `name` is one of {@link PINNED_LOGGERS} or a dotted child of one. */
export function isPinnedLogger(name: string): boolean {
  return Object.values(PINNED_LOGGERS).some((p) => name === p || name.startsWith(`${p}.`));
}

/** The full stack text of a throwable, following `cause` chains; non-errors are stringified. */
export function formatThrowable(err: unknown): string {
  if (!(err instanceof Error)) return typeof err === "string" ? err : safeStringify(err);
  let text = err.stack ?? `${err.name}: ${err.message}`;
  let cause: unknown = err.cause;
  for (let depth = 0; cause !== undefined && depth < CAUSE_DEPTH_MAX; depth++) {
    text += `\nCaused by: ${cause instanceof Error ? (cause.stack ?? `${cause.name}: ${cause.message}`) : safeStringify(cause)}`;
    cause = cause instanceof Error ? cause.cause : undefined;
  }
  return text;
}

function safeStringify(value: unknown): string {
  try {
    return typeof value === "object" && value !== null ? JSON.stringify(value) : String(value);
  } catch {
    // Cycles, BigInt, a throwing toJSON: logging a value must never fail, so it is logged as text.
    return String(value);
  }
}

/** `yyyy-MM-dd HH:mm:ss.SSS` in UTC. */
function humanTimestamp(ms: number): string {
  const iso = new Date(ms).toISOString();
  return `${iso.slice(0, 10)} ${iso.slice(11, 23)}`;
}

/** Formats one HUMAN line; an attached throwable follows on the next lines. */
export function formatHumanLine(record: Pick<LogRecord, "ts" | "thread" | "level" | "logger" | "message" | "throwable">): string {
  const lastSegment = record.logger.slice(record.logger.lastIndexOf(".") + 1);
  const line = `${humanTimestamp(record.ts)} [${record.thread}] ${record.level.padEnd(5)} ${lastSegment} - ${record.message}`;
  return record.throwable ? `${line}\n${record.throwable}\n` : `${line}\n`;
}

/**
 * Creates the log service. Records below `level` are dropped (pinned third-party loggers use WARN),
 * the rest go to the ring buffer, to `tail` listeners and, through pino, to `out` as one line each.
 */
export function createLogService(options: LogServiceOptions, out: LogOutput = process.stdout): ControllerLogService {
  const level = normalizeLevel(options.level);
  const format: LogFormat = options.format.trim().toUpperCase() === "JSON" ? "JSON" : "HUMAN";
  const clock = options.clock ?? systemClock;
  const ring = new RingBuffer<LogRecord>(options.capacityRecords ?? LOG_BUFFER_CAPACITY_RECORDS);
  const listeners = new Set<(record: LogRecord) => void>();
  const context = new AsyncLocalStorage<ContextStore>();
  const rootThread = isMainThread ? "main" : `worker-${threadId}`;
  let seq = 0;
  let pendingTimestamp = "";

  // pino serializes; the timestamp hook emits the first field so the order is exactly the spec's.
  const destination: LogOutput =
    format === "JSON" ? { write: (line: string) => out.write(line) } : { write: (line: string) => out.write(formatHumanLine(fromJsonLine(line))) };
  const sink: PinoLogger = pino(
    {
      level: "trace",
      base: null,
      timestamp: () => `"timestamp":"${pendingTimestamp}"`,
      formatters: { level: () => ({}) },
    },
    destination,
  );

  const current = (): ContextStore => context.getStore() ?? { thread: rootThread, mdc: {} };

  const isEnabled = (name: string, at: LogLevel): boolean => LEVEL_VALUES[at] >= (isPinnedLogger(name) ? LEVEL_VALUES.WARN : LEVEL_VALUES[level]);

  function emit(name: string, at: LogLevel, message: string, err: unknown): void {
    if (!isEnabled(name, at)) return;
    const store = current();
    const ts = clock.nowMs();
    const record: LogRecord = { seq: ++seq, ts, level: at, logger: name, thread: store.thread, message: String(message) };
    if (err !== undefined) record.throwable = formatThrowable(err);
    if (Object.keys(store.mdc).length > 0) record.mdc = { ...store.mdc };
    ring.push(record);

    pendingTimestamp = new Date(ts).toISOString();
    const line: Record<string, unknown> = { level: at, logger: name, thread: record.thread, message: record.message };
    if (record.mdc) line.mdc = record.mdc;
    if (record.throwable !== undefined) line.exception = record.throwable;
    sink[PINO_METHOD[at]](line);

    for (const listener of listeners) {
      try {
        listener(record);
      } catch {
        // A failing tail listener (e.g. a closed SSE stream) must not break logging.
      }
    }
  }

  function logger(name: string): Logger {
    return {
      name,
      trace: (message, err) => emit(name, "TRACE", message, err),
      debug: (message, err) => emit(name, "DEBUG", message, err),
      info: (message, err) => emit(name, "INFO", message, err),
      warn: (message, err) => emit(name, "WARN", message, err),
      error: (message, err) => emit(name, "ERROR", message, err),
    };
  }

  return {
    level,
    format,
    capacity: ring.capacity,
    logger,
    isEnabled,
    withMdc: (mdc, fn) => {
      const store = current();
      return context.run({ thread: store.thread, mdc: { ...store.mdc, ...stringValues(mdc) } }, fn);
    },
    mdc: () => ({ ...current().mdc }),
    withThread: (name, fn) => context.run({ thread: name, mdc: current().mdc }, fn),
    thread: () => current().thread,
    recent: () => ring.toArray(),
    tail: (listener) => {
      if (listeners.size >= LOG_TAIL_LISTENERS_MAX) throw new RangeError(`too many log tail listeners (max ${LOG_TAIL_LISTENERS_MAX})`);
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
}

function stringValues(mdc: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(mdc)) if (v !== undefined && v !== null) out[k] = String(v);
  return out;
}

function fromJsonLine(line: string): LogRecord {
  const parsed = JSON.parse(line) as { timestamp: string; level: LogLevel; logger: string; thread: string; message: string; exception?: string };
  return {
    seq: 0,
    ts: Date.parse(parsed.timestamp),
    level: parsed.level,
    logger: parsed.logger,
    thread: parsed.thread,
    message: parsed.message,
    throwable: parsed.exception,
  };
}
