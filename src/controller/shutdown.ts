/** Graceful shutdown on SIGINT/SIGTERM for the process entries (`cloud-controller`, `npm start`). */
import type { Logger } from "../logs/types.js";

/** A shutdown taking longer than this is abandoned and the process exits with status 1. */
export const SHUTDOWN_TIMEOUT_MS = 15_000;
/** Exit status after a second signal (the conventional 128 + SIGINT). */
const EXIT_FORCED = 130;

/**
 * Installs SIGINT/SIGTERM handlers: the first signal runs `stop` and exits 0 (1 when it fails or
 * exceeds {@link SHUTDOWN_TIMEOUT_MS}); a second signal exits at once. Install it BEFORE startup so a
 * signal that arrives while the controller starts still shuts it down cleanly (`stop` then waits for
 * the start to finish). `log` returns the logger once logging exists; before that, standard error.
 */
export function exitOnSignals(stop: () => Promise<void>, log: () => Logger | undefined, proc: NodeJS.Process = process): void {
  const say = (level: "info" | "warn" | "error", message: string, err?: unknown) => {
    const logger = log();
    if (logger) logger[level](message, err);
    else proc.stderr.write(`${message}${err ? `: ${String(err)}` : ""}\n`);
  };
  let signals = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    signals++;
    if (signals > 1) {
      say("warn", `Received ${signal} again; exiting now`);
      proc.exit(EXIT_FORCED);
    }
    say("info", `Received ${signal}; shutting down`);
    const timer = setTimeout(() => {
      say("error", `Shutdown did not finish within ${SHUTDOWN_TIMEOUT_MS} ms; exiting`);
      proc.exit(1);
    }, SHUTDOWN_TIMEOUT_MS);
    timer.unref();
    stop().then(
      () => {
        clearTimeout(timer);
        proc.exit(0);
      },
      (err: unknown) => {
        clearTimeout(timer);
        say("error", "Shutdown failed", err);
        proc.exit(1);
      },
    );
  };
  proc.on("SIGINT", onSignal);
  proc.on("SIGTERM", onSignal);
}
