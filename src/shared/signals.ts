/**
 * Telling a second interrupt from an echo of the first. One Ctrl-C reaches every process of the
 * terminal's foreground group at once, and the wrappers around a process (npm, tsx) relay it again:
 * a process started through `npm start` receives the same interrupt two or three times within a few
 * milliseconds. Only a signal that comes later than {@link SIGNAL_ECHO_WINDOW_MS} after the first is
 * the operator asking again (to exit at once); the echoes are ignored.
 */
import { systemClock, type Clock } from "./clock.js";

/** Signals within this long of the first one are echoes of it, not a second request. */
export const SIGNAL_ECHO_WINDOW_MS = 1_000;

/** Classifies each termination signal: the first, an echo of it, or a repeated request. */
export function signalCounter(clock: Pick<Clock, "nowMs"> = systemClock): () => "first" | "echo" | "repeat" {
  let firstAtMs: number | undefined;
  return () => {
    const now = clock.nowMs();
    if (firstAtMs === undefined) {
      firstAtMs = now;
      return "first";
    }
    return now - firstAtMs < SIGNAL_ECHO_WINDOW_MS ? "echo" : "repeat";
  };
}
