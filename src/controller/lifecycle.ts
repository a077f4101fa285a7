/**
 * The stop list of the composition root: every wing pushes the cleanup of what it started, in the
 * order it started it, and `stop()` runs them in reverse (a failing or slow one is named in the log).
 */
import type { ControllerEventBus } from "../events/bus.js";
import type { Logger } from "../logs/types.js";

/** A part of `stop()` that takes this long is named in the log. */
const SLOW_CLEANUP_MS = 2_000;

/** How long `stop()` waits for queued events and running async handlers before closing the stores. */
export const EVENT_FLUSH_TIMEOUT_MS = 2_000;

/** One part of `stop()`. */
export interface Cleanup {
  name: string;
  run(): Promise<void> | void;
}

/** The cleanups of a starting controller, run in reverse by `runCleanups`. */
export type Cleanups = Cleanup[];

/** Runs `cleanups` last to first, logging failures and slow parts, and empties the list. */
export async function runCleanups(cleanups: Cleanups, log: Logger): Promise<void> {
  for (const cleanup of cleanups.reverse()) {
    const startedMs = performance.now();
    try {
      await cleanup.run();
    } catch (err) {
      log.warn(`Stopping ${cleanup.name} failed`, err);
    }
    const tookMs = Math.round(performance.now() - startedMs);
    if (tookMs >= SLOW_CLEANUP_MS) log.warn(`Stopping ${cleanup.name} took ${tookMs} ms`);
  }
  cleanups.length = 0;
}

/** Waits for the bus to drain, at most `timeoutMs`; a handler that never settles must not block shutdown. */
export async function flushWithin(events: ControllerEventBus, timeoutMs: number, log: Logger): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<boolean>((resolveTimeout) => {
    timer = setTimeout(() => resolveTimeout(true), timeoutMs);
  });
  const drained = events.flush().then(() => false);
  if (await Promise.race([drained, timedOut])) log.warn(`Event handlers still running after ${timeoutMs} ms; closing anyway`);
  clearTimeout(timer);
}
