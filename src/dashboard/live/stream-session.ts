/**
 * One event-stream client: asks for a ticket, opens the stream, and keeps it open. It remembers the
 * sequence of the last event it delivered and resumes from there on every reconnect (with a new
 * ticket: a ticket is single-use), to this controller or, behind a load balancer, another one,
 * since sequences are cluster-wide. Duplicates (a replay overlapping what was delivered) are
 * dropped; RESYNC_REQUIRED, or a gap in the sequence, tells the listener to refetch everything.
 *
 * Reconnects back off exponentially with jitter (0.5 s doubling to 15 s); "Too many connections"
 * waits the longest; a 403 on the ticket means the user may not read the stream (no retries:
 * pages still work, without live updates); a 401 means the sign-in expired.
 */
import { RESYNC_REQUIRED, type FeedListener, type LiveEvent, type ResyncReason, type StreamStatus, type Timers } from "./types.js";

/** What one open stream reports; the transport turns SSE frames into these calls. */
export interface StreamHandlers {
  /** The `connected` frame. */
  connected(latestSequence: number): void;
  /** A `message` frame's data. */
  message(data: string): void;
  /** An `error` frame from the server (its message), or null for a dropped connection. */
  failed(message: string | null): void;
}

/** Opens streams; the browser's is EventSource over `GET /api/v1/events/stream`. */
export interface StreamTransport {
  /** A single-use ticket; rejects with an error carrying `status` for HTTP refusals. */
  ticket(): Promise<string>;
  open(ticket: string, lastSequence: number | null, handlers: StreamHandlers): { close(): void };
}

/** First reconnect delay; doubles per failed attempt. */
export const RECONNECT_INITIAL_MS = 500;
/** Longest reconnect delay. */
export const RECONNECT_MAX_MS = 15_000;

export interface EventStreamSessionOptions {
  transport: StreamTransport;
  timers: Timers;
  listener: FeedListener;
  /** Where to resume; null starts with new events only (and asks for a refetch once connected). */
  lastSequence?: number | null;
  /** Jitter source in [0, 1). */
  random?: () => number;
}

export class EventStreamSession {
  private last: number | null;
  private connection: { close(): void } | null = null;
  private generation = 0;
  private attempts = 0;
  private retryTimer: unknown = null;
  private stopped = true;
  private currentStatus: StreamStatus = "stopped";

  constructor(private readonly options: EventStreamSessionOptions) {
    this.last = options.lastSequence ?? null;
  }

  /** The sequence of the last event delivered (or skipped to by a resync). */
  get lastSequence(): number | null {
    return this.last;
  }

  get status(): StreamStatus {
    return this.currentStatus;
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.connect();
  }

  stop(): void {
    this.stopped = true;
    this.generation++;
    if (this.retryTimer !== null) this.options.timers.clear(this.retryTimer);
    this.retryTimer = null;
    this.connection?.close();
    this.connection = null;
    this.setStatus("stopped");
  }

  private setStatus(status: StreamStatus): void {
    if (status === this.currentStatus) return;
    this.currentStatus = status;
    this.options.listener.status?.(status);
  }

  private async connect(): Promise<void> {
    const generation = ++this.generation;
    this.setStatus(this.attempts === 0 && this.last === null ? "connecting" : "reconnecting");
    let ticket: string;
    try {
      ticket = await this.options.transport.ticket();
    } catch (err) {
      if (generation !== this.generation) return;
      const status = (err as { status?: number }).status;
      if (status === 401 || status === 403) {
        this.stopped = true;
        this.setStatus(status === 401 ? "unauthorized" : "denied");
        return;
      }
      this.retry(false);
      return;
    }
    if (generation !== this.generation) return;
    const current = () => generation === this.generation;
    const resumeFrom = this.last;
    this.connection = this.options.transport.open(ticket, resumeFrom, {
      connected: (latestSequence) => {
        if (!current()) return;
        this.attempts = 0;
        this.setStatus("live");
        // New events only from here: what happened before is read over REST.
        if (resumeFrom === null) this.resync("initial", Number.isFinite(latestSequence) ? latestSequence : null);
      },
      message: (data) => {
        if (current()) this.receive(data);
      },
      failed: (message) => {
        if (!current()) return;
        this.generation++;
        this.connection?.close();
        this.connection = null;
        if (this.stopped) return;
        // An expired or used ticket: a new one at once. A full controller: wait the longest.
        if (message === "Unauthorized") this.retry(false, 0);
        else this.retry(message === "Too many connections");
      },
    });
  }

  private retry(full: boolean, delayMs?: number): void {
    if (this.stopped) return;
    this.setStatus(full ? "full" : "reconnecting");
    const backoff = full ? RECONNECT_MAX_MS : Math.min(RECONNECT_MAX_MS, RECONNECT_INITIAL_MS * 2 ** this.attempts);
    const random = this.options.random ?? Math.random;
    const wait = delayMs ?? Math.round(backoff * (0.5 + random() / 2));
    this.attempts++;
    this.retryTimer = this.options.timers.set(() => {
      this.retryTimer = null;
      if (!this.stopped) void this.connect();
    }, wait);
  }

  private resync(reason: ResyncReason, latest: number | null): void {
    if (latest !== null) this.last = latest;
    this.options.listener.resync?.(reason);
  }

  private receive(data: string): void {
    let event: LiveEvent;
    try {
      event = JSON.parse(data) as LiveEvent;
    } catch {
      return;
    }
    if (event.type === RESYNC_REQUIRED) {
      const latest = Number((event as unknown as { latestSequence?: number }).latestSequence);
      this.resync("resync-required", Number.isFinite(latest) ? latest : this.last);
      return;
    }
    const sequence = Number(event.sequence);
    if (!Number.isFinite(sequence)) return;
    if (this.last !== null && sequence <= this.last) return;
    const gap = this.last !== null && sequence > this.last + 1;
    this.last = sequence;
    this.options.listener.events?.([event]);
    if (gap) this.resync("gap", null);
  }
}
