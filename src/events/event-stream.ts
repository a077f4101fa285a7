/**
 * Delivery of the journal to SSE clients (spec document 3, "Event stream"). A client is a cursor
 * into the journal's replay buffer, not a queue of its own: the buffer is shared, so a client that
 * falls behind costs no memory beyond its one write in progress. Frames:
 *
 * - first `event: connected` with `{message, latestSequence}`;
 * - then `event: message` with `id: <sequence>` and the event as data
 *   (`{type, sequence, source, timestamp, data}`), in sequence order, without gaps;
 * - when the client's position is older than the oldest buffered event (it asked for too old a
 *   position, or it read so slowly that the buffer moved past it), one synthetic message
 *   `{type: "RESYNC_REQUIRED", lastSequence, earliestSequence, latestSequence, timestamp}` whose id
 *   is the latest sequence; the stream goes on from there and the client refetches state over REST;
 * - a comment line when nothing was written for the keep-alive interval, so proxies keep the
 *   connection (counted from the last write, not from the last event the stream skipped);
 * - a client whose socket accepted nothing for the stall bound is cut, which frees its slot.
 */
import { idleUntilWoken, sseFrame, SSE_KEEP_ALIVE, type SseWriter } from "../shared/sse.js";
import type { GaugeHandle } from "../metrics/metrics.js";
import type { Clock, Timer } from "../shared/clock.js";
import { systemClock } from "../shared/clock.js";
import type { EventJournal, JournalEntry } from "./event-journal.js";

/** Concurrent stream clients per controller (spec: more than 100 are refused). */
export const EVENT_STREAM_CLIENTS_MAX = 100;
/** A comment after this long without a write keeps proxies from closing an idle stream. */
export const EVENT_STREAM_KEEP_ALIVE_MS = 15_000;
/** A write the client's socket has not taken after this long cuts the client. */
export const EVENT_STREAM_WRITE_STALL_MS = 30_000;
/** Events sent in one write. */
export const EVENT_STREAM_BATCH_EVENTS = 128;
/** Characters sent in one write (a batch stops early beyond it). */
export const EVENT_STREAM_BATCH_CHARS = 256 * 1024;

/** Entries a filtered stream skips before it yields the event loop. */
export const EVENT_STREAM_SCAN_ENTRIES_MAX = 1_024;

/** The synthetic type telling a client that it must refetch state. */
export const RESYNC_REQUIRED = "RESYNC_REQUIRED";

/** What the stream writes to: an SSE response. */
export type EventStreamWriter = SseWriter;

/** Options of {@link EventStreamHub}. */
export interface EventStreamHubOptions {
  journal: EventJournal;
  clock?: Clock;
  clientsConnected?: GaugeHandle;
  clientsMax?: number;
  keepAliveMs?: number;
  writeStallMs?: number;
}

/**
 * What a stream sends besides the journal (the plugin event stream's transfers): frames that are
 * written ahead of the next journal batch, as soon as they arrive.
 */
export interface StreamSideChannel {
  /** The frames waiting, in order; taking them empties the channel. */
  take(): string[];
  /** Calls `listener` when frames arrive; returns the function that stops it. */
  listen(listener: () => void): () => void;
}

/** How one client's stream is shaped (the plugin event stream): which journal events, and what else. */
export interface StreamShape {
  /** Journal entries the client gets; every entry when absent. The cursor moves past the others. */
  accept?: (entry: JournalEntry) => boolean;
  side?: StreamSideChannel;
  /** The `message` of the connected frame. */
  greeting?: string;
  /** Further fields of the connected frame (the plugin stream's `registryEpoch`). */
  connectedFields?: Record<string, unknown>;
}

export { sseFrame };

/** The streams of this controller: admission (the client cap) and delivery. */
export class EventStreamHub {
  private readonly journal: EventJournal;
  private readonly clock: Clock;
  private readonly clientsMax: number;
  private readonly keepAliveMs: number;
  private readonly writeStallMs: number;
  private clients = 0;
  private cuts = 0;

  constructor(private readonly options: EventStreamHubOptions) {
    this.journal = options.journal;
    this.clock = options.clock ?? systemClock;
    this.clientsMax = options.clientsMax ?? EVENT_STREAM_CLIENTS_MAX;
    this.keepAliveMs = options.keepAliveMs ?? EVENT_STREAM_KEEP_ALIVE_MS;
    this.writeStallMs = options.writeStallMs ?? EVENT_STREAM_WRITE_STALL_MS;
  }

  /** Clients streaming now. */
  get clientCount(): number {
    return this.clients;
  }

  /** Clients cut because their socket stalled. */
  get stalledClientsCut(): number {
    return this.cuts;
  }

  /**
   * Streams to `writer` until the client goes away, starting after `position` (the last sequence
   * the client has), or with new events only when `position` is null. A client beyond the cap gets
   * the error event `Too many connections` and the stream ends.
   */
  async serve(writer: EventStreamWriter, position: number | null, shape: StreamShape = {}): Promise<void> {
    if (this.clients >= this.clientsMax) {
      await writer.write(sseFrame("error", { message: "Too many connections" }));
      return;
    }
    this.clients++;
    this.options.clientsConnected?.inc();
    try {
      await this.deliver(writer, position, shape);
    } finally {
      this.clients--;
      this.options.clientsConnected?.dec();
    }
  }

  private async deliver(writer: EventStreamWriter, position: number | null, shape: StreamShape): Promise<void> {
    const journal = this.journal;
    let wake: (() => void) | null = null;
    const stopListening = journal.listen(() => wake?.());
    const stopSide = shape.side?.listen(() => wake?.());
    writer.onAbort(() => wake?.());
    // The keep-alive is due after keepAliveMs without a write, however often the journal woke the
    // loop meanwhile: a filtered stream (a plugin's) is woken by every event it then skips.
    let lastWriteMs = this.clock.nowMs();
    const write = async (text: string) => {
      const written = await this.writeWithin(writer, text);
      lastWriteMs = this.clock.nowMs();
      return written;
    };
    try {
      const greeting = shape.greeting ?? "Connected to the event stream";
      if (!(await write(sseFrame("connected", { message: greeting, latestSequence: journal.latestSequence, ...shape.connectedFields })))) return;
      // A position ahead of this controller may have been announced elsewhere first: read the log.
      if (position !== null && position > journal.latestSequence) await journal.catchUp();
      let cursor: number;
      if (position === null) cursor = journal.latestSequence;
      else if (position > journal.latestSequence) {
        // Not in this history (a store that lost its counter, a made-up number): start again.
        if (!(await write(this.resyncFrame(position)))) return;
        cursor = journal.latestSequence;
      } else cursor = position;

      while (!writer.aborted && !journal.stopped) {
        const side = shape.side?.take() ?? [];
        if (side.length > 0) {
          if (!(await write(side.join("")))) return;
          continue;
        }
        if (cursor + 1 < journal.earliestSequence) {
          if (!(await write(this.resyncFrame(cursor)))) return;
          cursor = journal.latestSequence;
          continue;
        }
        let batch = "";
        let count = 0;
        let scanned = 0;
        for (let entry = journal.entry(cursor + 1); entry; entry = journal.entry(cursor + 1)) {
          cursor = entry.sequence;
          // A filtered stream skips most entries: its scan is bounded like a batch, then it writes or yields.
          if (shape.accept && !shape.accept(entry)) {
            if (++scanned >= EVENT_STREAM_SCAN_ENTRIES_MAX) break;
            continue;
          }
          batch += `id: ${entry.sequence}\nevent: message\ndata: ${entry.json}\n\n`;
          if (++count >= EVENT_STREAM_BATCH_EVENTS || batch.length >= EVENT_STREAM_BATCH_CHARS) break;
        }
        if (batch === "" && scanned >= EVENT_STREAM_SCAN_ENTRIES_MAX) {
          await new Promise<void>((resolve) => setImmediate(resolve));
          continue;
        }
        if (batch !== "") {
          if (!(await write(batch))) return;
          continue;
        }
        const quietMs = this.clock.nowMs() - lastWriteMs;
        if (quietMs >= this.keepAliveMs) {
          if (!(await write(SSE_KEEP_ALIVE))) return;
          continue;
        }
        const idle = await idleUntilWoken(this.clock, this.keepAliveMs - quietMs, (w) => (wake = w));
        wake = null;
        if (idle && !(await write(SSE_KEEP_ALIVE))) return;
      }
    } finally {
      stopListening();
      stopSide?.();
    }
  }

  private resyncFrame(lastSequence: number): string {
    const journal = this.journal;
    const latestSequence = journal.latestSequence;
    return sseFrame(
      "message",
      {
        type: RESYNC_REQUIRED,
        lastSequence,
        earliestSequence: journal.earliestSequence,
        latestSequence,
        timestamp: new Date(this.clock.nowMs()).toISOString(),
      },
      latestSequence,
    );
  }

  /** Writes, or cuts the client when the write is not taken within the stall bound; false when cut or gone. */
  private async writeWithin(writer: EventStreamWriter, text: string): Promise<boolean> {
    if (writer.aborted) return false;
    let timer: Timer | undefined;
    const stalled = new Promise<boolean>((resolve) => {
      timer = this.clock.setTimeout(() => resolve(true), this.writeStallMs);
    });
    const written = writer.write(text).then(() => false);
    const cut = await Promise.race([written, stalled]);
    timer?.cancel();
    if (cut) {
      this.cuts++;
      writer.cut();
      return false;
    }
    return !writer.aborted;
  }
}
