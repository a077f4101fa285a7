/**
 * Delivery of the journal to SSE clients (spec document 3, "Event stream"). A client is a cursor
 * into the journal's replay buffer, not a queue of its own: the buffer is shared, so a client that
 * falls behind costs no memory beyond what its socket already took. Frames:
 *
 * - first `event: connected` with `{message, latestSequence}`;
 * - then `event: message` with `id: <sequence>` and the event as data
 *   (`{type, sequence, source, timestamp, data}`), in sequence order, without gaps;
 * - when the client's position is older than the oldest buffered event (it asked for too old a
 *   position, or it read so slowly that the buffer moved past it), one synthetic message
 *   `{type: "RESYNC_REQUIRED", lastSequence, earliestSequence, latestSequence, timestamp}` whose id
 *   is the latest sequence; the stream goes on from there and the client refetches state over REST;
 * - a comment line when nothing was written for the keep-alive interval, so proxies keep the
 *   connection;
 * - a client whose socket took nothing for the stall bound is cut, which frees its slot.
 *
 * Fan-out: the hub, not each client, listens to the journal. New entries schedule one pass on the
 * next turn of the event loop, which writes each client what it is missing in one write (its
 * frames coalesced); clients at the same position without a filter share one encoded chunk, and
 * every frame's text was made once, by the journal. A write that finds the client's socket full
 * parks that client until the socket drains (one listener per client, no promise per event); a
 * client parked longer than the stall bound is cut.
 */
import { sseFrame, SSE_KEEP_ALIVE, type SseSink } from "../shared/sse.js";
import type { GaugeHandle } from "../metrics/metrics.js";
import type { Clock, Timer } from "../shared/clock.js";
import { nextTurn, systemClock } from "../shared/clock.js";
import type { EventJournal, JournalEntry } from "./event-journal.js";

/** Concurrent stream clients per controller (spec: more than 100 are refused). */
export const EVENT_STREAM_CLIENTS_MAX = 100;
/** A comment after this long without a write keeps proxies from closing an idle stream. */
export const EVENT_STREAM_KEEP_ALIVE_MS = 15_000;
/** A client whose socket took nothing for this long is cut. */
export const EVENT_STREAM_WRITE_STALL_MS = 30_000;
/** Events sent in one write. */
export const EVENT_STREAM_BATCH_EVENTS = 128;
/** Characters sent in one write (a batch stops early beyond it). */
export const EVENT_STREAM_BATCH_CHARS = 256 * 1024;
/** Entries a filtered stream looks at in one pass before it lets the others have the event loop. */
export const EVENT_STREAM_SCAN_ENTRIES_MAX = 1_024;

/** The synthetic type telling a client that it must refetch state. */
export const RESYNC_REQUIRED = "RESYNC_REQUIRED";

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

/** One connected client. */
interface Client {
  readonly sink: SseSink;
  readonly shape: StreamShape;
  /** The last sequence handed to the client or skipped by its filter. */
  cursor: number;
  /** The last write found the socket full: nothing more until it drains. */
  parked: boolean;
  lastWriteMs: number;
  keepAlive: Timer | null;
  stall: Timer | null;
  stopSide: (() => void) | undefined;
  /** Resolves the client's `serve()` once it is gone. */
  finished: () => void;
}

/** A batch shared by the unfiltered clients at one position during one pass. */
interface SharedBatch {
  chunk: Uint8Array;
  cursor: number;
}

/** The streams of this controller: admission (the client cap) and delivery. */
export class EventStreamHub {
  private readonly journal: EventJournal;
  private readonly clock: Clock;
  private readonly clientsMax: number;
  private readonly keepAliveMs: number;
  private readonly writeStallMs: number;
  /** Admitted clients, those still positioning included (the cap counts them). */
  private admitted = 0;
  /** Clients the fan-out writes to. */
  private readonly delivering = new Set<Client>();
  private passScheduled = false;
  private cuts = 0;

  constructor(private readonly options: EventStreamHubOptions) {
    this.journal = options.journal;
    this.clock = options.clock ?? systemClock;
    this.clientsMax = options.clientsMax ?? EVENT_STREAM_CLIENTS_MAX;
    this.keepAliveMs = options.keepAliveMs ?? EVENT_STREAM_KEEP_ALIVE_MS;
    this.writeStallMs = options.writeStallMs ?? EVENT_STREAM_WRITE_STALL_MS;
    this.journal.listen(() => (this.journal.stopped ? this.endAll() : this.schedulePass()));
  }

  /** Clients streaming now. */
  get clientCount(): number {
    return this.admitted;
  }

  /** Clients cut because their socket stalled. */
  get stalledClientsCut(): number {
    return this.cuts;
  }

  /**
   * Streams to `sink` until the client goes away, starting after `position` (the last sequence
   * the client has), or with new events only when `position` is null. A client beyond the cap gets
   * the error event `Too many connections` and the stream ends. Resolves once the client is gone.
   */
  async serve(sink: SseSink, position: number | null, shape: StreamShape = {}): Promise<void> {
    if (this.journal.stopped) {
      // The controller is stopping: the stream ends at once, as every open one does.
      sink.end();
      return;
    }
    if (this.admitted >= this.clientsMax) {
      sink.write(sseFrame("error", { message: "Too many connections" }));
      sink.end();
      return;
    }
    this.admitted++;
    this.options.clientsConnected?.inc();
    const gone = new Promise<void>((resolve) => {
      const client: Client = {
        sink,
        shape,
        cursor: 0,
        parked: false,
        lastWriteMs: this.clock.nowMs(),
        keepAlive: null,
        stall: null,
        stopSide: undefined,
        finished: resolve,
      };
      sink.onClose(() => this.release(client));
      sink.onDrain(() => this.drained(client));
      void this.admit(client, position);
    });
    await gone;
  }

  /** Writes the connected frame, places the cursor, then hands the client to the fan-out. */
  private async admit(client: Client, position: number | null): Promise<void> {
    const journal = this.journal;
    const greeting = client.shape.greeting ?? "Connected to the event stream";
    this.write(client, sseFrame("connected", { message: greeting, latestSequence: journal.latestSequence, ...client.shape.connectedFields }));
    // A position ahead of this controller may have been announced elsewhere first: read the log.
    if (position !== null && position > journal.latestSequence) await journal.catchUp();
    if (client.sink.closed || journal.stopped) return client.sink.end();
    if (position === null) client.cursor = journal.latestSequence;
    else if (position > journal.latestSequence) {
      // Not in this history (a store that lost its counter, a made-up number): start again.
      this.write(client, this.resyncFrame(position));
      client.cursor = journal.latestSequence;
    } else client.cursor = position;
    client.stopSide = client.shape.side?.listen(() => this.schedulePass());
    this.delivering.add(client);
    this.armKeepAlive(client, this.keepAliveMs);
    this.schedulePass();
  }

  /** One pass per turn of the event loop, however many entries or side frames arrived in it. */
  private schedulePass(): void {
    if (this.passScheduled) return;
    this.passScheduled = true;
    nextTurn(() => this.pass());
  }

  private pass(): void {
    this.passScheduled = false;
    const shared = new Map<number, SharedBatch | null>();
    let more = false;
    for (const client of this.delivering) {
      if (client.parked || client.sink.closed) continue;
      if (this.deliver(client, shared)) more = true;
    }
    // Bounded batches: whoever has more gets it on the next turn, after the others had theirs.
    if (more) this.schedulePass();
  }

  /** Writes what the client is missing, in one write; true when more is waiting for it. */
  private deliver(client: Client, shared: Map<number, SharedBatch | null>): boolean {
    const journal = this.journal;
    const side = client.shape.side?.take() ?? [];
    let text = side.length > 0 ? side.join("") : "";
    if (client.cursor + 1 < journal.earliestSequence) {
      text += this.resyncFrame(client.cursor);
      client.cursor = journal.latestSequence;
    }
    if (text === "" && !client.shape.accept) {
      // The common case: every client without a filter at this position gets the same bytes.
      let batch = shared.get(client.cursor);
      if (batch === undefined) {
        const frames = this.frames(client.cursor, undefined);
        batch = frames.text === "" ? null : { chunk: Buffer.from(frames.text), cursor: frames.cursor };
        shared.set(client.cursor, batch);
      }
      if (batch === null) return false;
      client.cursor = batch.cursor;
      this.write(client, batch.chunk);
      return client.cursor < journal.latestSequence;
    }
    const frames = this.frames(client.cursor, client.shape.accept);
    client.cursor = frames.cursor;
    text += frames.text;
    if (text !== "") this.write(client, text);
    return client.cursor < journal.latestSequence;
  }

  /** The frames after `cursor`, bounded like a batch, and the cursor after them. */
  private frames(cursor: number, accept: ((entry: JournalEntry) => boolean) | undefined): { text: string; cursor: number } {
    let text = "";
    let count = 0;
    let scanned = 0;
    for (let entry = this.journal.entry(cursor + 1); entry; entry = this.journal.entry(cursor + 1)) {
      cursor = entry.sequence;
      if (accept && !accept(entry)) {
        if (++scanned >= EVENT_STREAM_SCAN_ENTRIES_MAX) break;
        continue;
      }
      text += entry.frame;
      if (++count >= EVENT_STREAM_BATCH_EVENTS || text.length >= EVENT_STREAM_BATCH_CHARS) break;
    }
    return { text, cursor };
  }

  /** Hands `chunk` to the client's socket; parks the client when the socket is full. */
  private write(client: Client, chunk: string | Uint8Array): void {
    if (client.sink.closed) return;
    client.lastWriteMs = this.clock.nowMs();
    if (client.sink.write(chunk) || client.parked) return;
    client.parked = true;
    client.stall = this.clock.setTimeout(() => this.cut(client), this.writeStallMs);
  }

  private drained(client: Client): void {
    if (!client.parked) return;
    client.parked = false;
    client.stall?.cancel();
    client.stall = null;
    this.schedulePass();
  }

  private cut(client: Client): void {
    if (!client.parked || client.sink.closed) return;
    this.cuts++;
    client.sink.cut();
  }

  /** Re-armed from the last write, so a busy stream costs no timer per event. */
  private armKeepAlive(client: Client, delayMs: number): void {
    client.keepAlive = this.clock.setTimeout(() => {
      if (client.sink.closed) return;
      const idleMs = this.clock.nowMs() - client.lastWriteMs;
      if (idleMs < this.keepAliveMs) return this.armKeepAlive(client, this.keepAliveMs - idleMs);
      if (!client.parked) this.write(client, SSE_KEEP_ALIVE);
      this.armKeepAlive(client, this.keepAliveMs);
    }, delayMs);
  }

  private release(client: Client): void {
    const finished = client.finished;
    if (finished === noop) return;
    client.finished = noop;
    this.delivering.delete(client);
    client.keepAlive?.cancel();
    client.stall?.cancel();
    client.stopSide?.();
    this.admitted--;
    this.options.clientsConnected?.dec();
    finished();
  }

  /** The journal stopped: every stream ends. */
  private endAll(): void {
    for (const client of [...this.delivering]) client.sink.end();
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
}

const noop = (): void => undefined;
