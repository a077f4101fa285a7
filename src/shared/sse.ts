/**
 * What the controller's server-sent event streams (the event stream, the plugin event stream, the
 * log tails) have in common: the frame format and the response they write to.
 */
import type { Clock } from "./clock.js";

/** One SSE frame with an event name, JSON data and, when given, an id. */
export const sseFrame = (event: string, data: unknown, id?: number): string =>
  `${id === undefined ? "" : `id: ${id}\n`}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;

/** An SSE response as a stream writes to it. */
export interface SseWriter {
  /** Resolves once the text was handed on to the connection. */
  write(text: string): Promise<unknown>;
  onAbort(listener: () => void): void;
  readonly aborted: boolean;
  /** Ends the connection at once. */
  cut(): void;
}

/** The comment line a stream sends when it has been idle for its keep-alive period. */
export const SSE_KEEP_ALIVE = ": keep-alive\n\n";

/**
 * Waits `keepAliveMs`, or until the function handed to `setWake` is called (new data); true when
 * the time ran out (a keep-alive is due).
 */
export function idleUntilWoken(clock: Clock, keepAliveMs: number, setWake: (wake: () => void) => void): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    const timer = clock.setTimeout(() => resolve(true), keepAliveMs);
    setWake(() => {
      timer.cancel();
      resolve(false);
    });
  });
}

/**
 * A server-sent event response written without a promise per write (the event stream's fan-out):
 * `write` hands bytes to the connection at once and says whether its buffer still has room; a
 * writer that got false waits for `onDrain` before writing again, so a slow client holds at most
 * what was written before its buffer filled.
 */
export interface SseSink {
  /** Hands `chunk` to the connection; false when its buffer is full (write again after `onDrain`). */
  write(chunk: string | Uint8Array): boolean;
  /** Calls `listener` whenever the buffer emptied after a write that returned false. */
  onDrain(listener: () => void): void;
  /** Calls `listener` once when the connection ended, whoever ended it. */
  onClose(listener: () => void): void;
  readonly closed: boolean;
  /** Ends the response after what was written. */
  end(): void;
  /** Ends the connection at once (a client whose socket stalled). */
  cut(): void;
}
