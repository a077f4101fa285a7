/** Graceful shutdown on SIGINT/SIGTERM for the process entries (`cloud-controller`, `npm start`). */
import type { Logger } from "../logs/types.js";

/** A shutdown taking longer than this is abandoned and the process exits with status 1. */
export const SHUTDOWN_TIMEOUT_MS = 15_000;
/** Exit status after a second signal (the conventional 128 + SIGINT). */
const EXIT_FORCED = 130;

/**
 * On the first SIGINT or SIGTERM runs `stop` and exits 0 (1 when it fails or exceeds
 * {@link SHUTDOWN_TIMEOUT_MS}); a second signal exits at once.
 */
export function exitOnSignals(stop: () => Promise<void>, log: Logger, proc: NodeJS.Process = process): void {
  let signals = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    signals++;
    if (signals > 1) {
      log.warn(`Received ${signal} again; exiting now`);
      proc.exit(EXIT_FORCED);
    }
    log.info(`Received ${signal}; shutting down`);
    const timer = setTimeout(() => {
      log.error(`Shutdown did not finish within ${SHUTDOWN_TIMEOUT_MS} ms; exiting`);
      proc.exit(1);
    }, SHUTDOWN_TIMEOUT_MS);
    timer.unref();
    stop().then(
      () => proc.exit(0),
      (err: unknown) => {
        log.error("Shutdown failed", err);
        proc.exit(1);
      },
    );
  };
  proc.on("SIGINT", onSignal);
  proc.on("SIGTERM", onSignal);
}
