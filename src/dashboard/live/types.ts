/**
 * What the dashboard's live layer passes around. Everything under `live/` is plain TypeScript with
 * no DOM: time, timers, the network and the other tabs come in through small interfaces, so the
 * unit tests (test/dashboard/) drive the same code with fakes under Node.
 */

/** One event of the controller's event stream (`data:` of a `message` frame). */
export interface LiveEvent {
  type: string;
  sequence: number;
  source?: string;
  timestamp?: string;
  data: Record<string, unknown>;
}

/** The synthetic type telling a client it missed events and must refetch. */
export const RESYNC_REQUIRED = "RESYNC_REQUIRED";

/**
 * Where the stream stands, as the header shows it:
 * `connecting` (first connection), `live`, `reconnecting` (lost; retrying with the last sequence),
 * `full` (the controller refused: too many streams; retrying slowly), `denied` (the user may not
 * read the stream: no live updates, pages still load), `unauthorized` (the sign-in is no longer
 * valid), `stopped`.
 */
export type StreamStatus = "connecting" | "live" | "reconnecting" | "full" | "denied" | "unauthorized" | "stopped";

/** Timers, injected: the browser's in the page, a fake clock in tests. */
export interface Timers {
  set(fn: () => void, ms: number): unknown;
  clear(handle: unknown): void;
  now(): number;
}

/** Why state must be fetched again: the first connection, a RESYNC_REQUIRED frame, a gap. */
export type ResyncReason = "initial" | "resync-required" | "gap";

/** Receives what the stream delivers, in order. */
export interface FeedListener {
  events?(batch: readonly LiveEvent[]): void;
  resync?(reason: ResyncReason): void;
  status?(status: StreamStatus): void;
}
