/**
 * Adapters that route third-party libraries' logs through the log service under the pinned logger
 * names of {@link PINNED_LOGGERS} (always filtered at WARN). The composition root installs them.
 */
import { logVerbosity, setLogger, setLogVerbosity } from "@grpc/grpc-js";
import type { MongoClientOptions } from "mongodb";
import { formatThrowable, PINNED_LOGGERS } from "./logger.js";
import type { LogService } from "./types.js";

const join = (args: unknown[]): string => args.map((a) => (typeof a === "string" ? a : formatThrowable(a))).join(" ");

/**
 * Routes @grpc/grpc-js diagnostics to logger `io.grpc`. grpc-js keeps its logger in module state, so
 * this is process-wide: the last service installed wins. Verbosity is set to ERROR at the source
 * (grpc-js has no WARN level), which matches the WARN pin; grpc ERROR lines are logged as WARN
 * because grpc-js reports recoverable transport problems at that severity.
 */
export function routeGrpcLogs(logs: LogService): void {
  const log = logs.logger(PINNED_LOGGERS.grpc);
  setLogger({
    error: (...args: unknown[]) => log.warn(join(args)),
    info: (...args: unknown[]) => log.info(join(args)),
    debug: (...args: unknown[]) => log.debug(join(args)),
  });
  setLogVerbosity(logVerbosity.ERROR);
}

/**
 * MongoClient options that send the driver's structured logs to logger `org.mongodb.driver` at WARN
 * and above. The store factory spreads these into its `MongoClient` options.
 */
export function mongoLogOptions(logs: LogService): Pick<MongoClientOptions, "mongodbLogPath" | "mongodbLogComponentSeverities"> {
  const log = logs.logger(PINNED_LOGGERS.mongodb);
  return {
    mongodbLogComponentSeverities: { default: "warn" },
    mongodbLogPath: {
      write: (entry) => {
        const { t: _t, s: severity, c: component, message, ...rest } = entry;
        const text = `[${component}] ${message ?? ""}${Object.keys(rest).length > 0 ? ` ${safeJson(rest)}` : ""}`;
        if (severity === "emergency" || severity === "alert" || severity === "critical" || severity === "error") log.error(text);
        else log.warn(text);
      },
    },
  };
}

function safeJson(value: unknown): string {
  try {
    return JSON.stringify(value);
  } catch {
    // Cycles, BigInt, a throwing toJSON: logging a value must never fail, so it is logged as text.
    return String(value);
  }
}

/** The part of an ioredis client (or any EventEmitter) these adapters listen to. */
export interface EventSource {
  on(event: string, listener: (...args: any[]) => void): unknown;
}

/**
 * Routes an ioredis client's `error`, `reconnecting` and `end` events to logger `io.redis`. ioredis
 * has no logger hook (its own debug output goes through the `debug` package, off by default); an
 * `error` listener also keeps a connection error from becoming an unhandled EventEmitter error.
 */
export function routeRedisClientLogs(client: EventSource, logs: LogService, clientName = "default"): void {
  const log = logs.logger(`${PINNED_LOGGERS.redis}.${clientName}`);
  client.on("error", (err: unknown) => log.warn("Redis client error", err));
  client.on("reconnecting", (delayMs: unknown) => log.info(`Redis client reconnecting in ${String(delayMs)} ms`));
  client.on("end", () => log.info("Redis client connection ended"));
}

/** The part of `process` used for warnings (injected so tests use a plain EventEmitter). */
export interface WarningSource {
  on(event: "warning", listener: (warning: Error) => void): unknown;
  removeAllListeners(event: "warning"): unknown;
}

/**
 * Routes Node process warnings (deprecations, MaxListenersExceeded, experimental features) to
 * logger `node.process` instead of Node's default stderr printer, so output stays on stdout.
 */
export function routeProcessWarnings(logs: LogService, proc: WarningSource = process): void {
  const log = logs.logger(`${PINNED_LOGGERS.process}.warning`);
  proc.removeAllListeners("warning");
  proc.on("warning", (warning: Error) => log.warn(`${warning.name}: ${warning.message}`));
}
