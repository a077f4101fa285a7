/** Logging contracts shared by every service; implemented with pino in `logger.ts`. */

export type LogLevel = "TRACE" | "DEBUG" | "INFO" | "WARN" | "ERROR";

export interface Logger {
  readonly name: string;
  trace(message: string, err?: unknown): void;
  debug(message: string, err?: unknown): void;
  info(message: string, err?: unknown): void;
  warn(message: string, err?: unknown): void;
  error(message: string, err?: unknown): void;
}

/** One record of the in-memory ring buffer (spec document 2, "Log record"). */
export interface LogRecord {
  seq: number;
  ts: number;
  level: LogLevel;
  logger: string;
  thread: string;
  message: string;
  throwable?: string;
  mdc?: Record<string, string>;
}

export interface LogService {
  /** A logger named with a fully qualified dotted name, e.g. `cloud.http.routes.groups`. */
  logger(name: string): Logger;
  /** Runs `fn` with MDC keys merged into the current async context. */
  withMdc<T>(mdc: Record<string, string>, fn: () => T): T;
  /** The current MDC (empty object when none). */
  mdc(): Record<string, string>;
  /** The most recent records, oldest first (capacity 2,000). */
  recent(): LogRecord[];
  readonly capacity: number;
  /** Subscribes to every new record; returns an unsubscribe function. */
  tail(listener: (record: LogRecord) => void): () => void;
}
