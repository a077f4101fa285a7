/** Graceful shutdown on SIGINT/SIGTERM for the process entries (`cloud-controller`, `npm start`). */
import type { Logger } from "../logs/types.js";
import type { Clock } from "../shared/clock.js";
import { signalCounter } from "../shared/signals.js";

/** A shutdown taking longer than this is abandoned and the process exits with status 1. */
export const SHUTDOWN_TIMEOUT_MS = 15_000;
/** Exit status after a second signal (the conventional 128 + SIGINT). */
const EXIT_FORCED = 130;

/**
 * Installs SIGINT/SIGTERM handlers: the first signal runs `stop` and exits 0 (1 when it fails or
 * exceeds {@link SHUTDOWN_TIMEOUT_MS}); a second signal exits at once, unless it is an echo of the first
 * (the same Ctrl-C relayed by npm and tsx, within a second), which is ignored. Install it BEFORE startup so a
 * signal that arrives while the controller starts still shuts it down cleanly (`stop` then waits for
 * the start to finish). `log` returns the logger once logging exists; before that, standard error.
 */
export function exitOnSignals(stop: () => Promise<void>, log: () => Logger | undefined, proc: NodeJS.Process = process, clock?: Pick<Clock, "nowMs">): void {
  const say = (level: "info" | "warn" | "error", message: string, err?: unknown) => {
    const logger = log();
    if (logger) logger[level](message, err);
    else proc.stderr.write(`${message}${err ? `: ${String(err)}` : ""}\n`);
  };
  const classify = signalCounter(clock);
  const onSignal = (signal: NodeJS.Signals) => {
    const kind = classify();
    if (kind === "echo") return;
    if (kind === "repeat") {
      say("warn", `Received ${signal} again; exiting now`);
      proc.exit(EXIT_FORCED);
      return;
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
