/**
 * Live tails of log buffers as Server-Sent Events (`GET /api/v1/system/logs/stream` and
 * `GET /api/v1/nodes/{id}/logs/stream`). Frames:
 *
 * - first `event: connected` with `{message, size, capacity}`;
 * - then the buffered records that pass the filters (the newest `limit`), then every new one, each
 *   as `event: message` with `id: <seq>` and the record as data;
 * - a comment line when nothing was written for the keep-alive interval;
 * - `event: error` with `{message}` before the stream closes on purpose: `Too many connections`
 *   beyond the client cap, `Too slow` when a client let more than the pending bound pile up,
 *   `Log unavailable` (with `detail`) when the buffer is on another controller that could not be
 *   asked, or a socket that took nothing for the stall bound (then the connection is cut without a
 *   frame).
 *
 * A client is a bounded queue of its own (unlike the event stream, a log buffer has no stable
 * positions to keep a cursor into), so a slow reader costs at most the pending bound.
 */
import { idleUntilWoken, sseFrame, SSE_KEEP_ALIVE, type SseWriter } from "../shared/sse.js";
import { systemClock, type Clock, type Timer } from "../shared/clock.js";
import { matchesQuery, type LogQuery } from "./log-query.js";
import type { LogRecord } from "./types.js";

/** Concurrent log stream clients per controller, controller and daemon tails together. */
export const LOG_STREAM_CLIENTS_MAX = 100;
/** Records waiting for one client; beyond it the client is told `Too slow` and cut. */
export const LOG_STREAM_PENDING_RECORDS_MAX = 4_000;
/** A comment after this long without a write keeps proxies from closing an idle stream. */
export const LOG_STREAM_KEEP_ALIVE_MS = 15_000;
/** A write the socket has not taken after this long cuts the client. */
export const LOG_STREAM_WRITE_STALL_MS = 30_000;
/** Records sent in one write. */
export const LOG_STREAM_BATCH_RECORDS = 256;

/** What a stream reads: the records held now and the ones that follow. */
export interface LogSource {
  /** Records held now that pass `query` (oldest first); `size` and `capacity` of the buffer. */
  read(query: LogQuery): Promise<{ records: LogRecord[]; size: number; capacity: number }>;
  /** Delivers every record appended from now on; returns the function that stops it. */
  follow(listener: (record: LogRecord) => void): () => void;
}

/** An SSE response as the stream writes to it. */
export type LogStreamWriter = SseWriter;

export interface LogStreamHubOptions {
  clock?: Clock;
  clientsMax?: number;
  pendingRecordsMax?: number;
  keepAliveMs?: number;
  writeStallMs?: number;
}

/** One SSE frame (the format every stream of the controller shares). */
export const logFrame = sseFrame;

/** Admission (the client cap) and delivery of log tails. */
export class LogStreamHub {
  private readonly clock: Clock;
  private readonly clientsMax: number;
  private readonly pendingMax: number;
  private readonly keepAliveMs: number;
  private readonly writeStallMs: number;
  private clients = 0;
  private stopped = false;
  private readonly wakers = new Set<() => void>();

  constructor(options: LogStreamHubOptions = {}) {
    this.clock = options.clock ?? systemClock;
    this.clientsMax = options.clientsMax ?? LOG_STREAM_CLIENTS_MAX;
    this.pendingMax = options.pendingRecordsMax ?? LOG_STREAM_PENDING_RECORDS_MAX;
    this.keepAliveMs = options.keepAliveMs ?? LOG_STREAM_KEEP_ALIVE_MS;
    this.writeStallMs = options.writeStallMs ?? LOG_STREAM_WRITE_STALL_MS;
  }

  get clientCount(): number {
    return this.clients;
  }

  /** Ends every stream (the composition root calls it before the HTTP server closes). */
  stop(): void {
    this.stopped = true;
    for (const wake of this.wakers) wake();
  }

  /** Replays what `source` holds through `query`, then tails it until the client goes away. */
  async serve(writer: LogStreamWriter, source: LogSource, query: LogQuery): Promise<void> {
    if (this.stopped) return;
    if (this.clients >= this.clientsMax) {
      await writer.write(logFrame("error", { message: "Too many connections" }));
      return;
    }
    this.clients++;
    try {
      await this.deliver(writer, source, query);
    } finally {
      this.clients--;
    }
  }

  private async deliver(writer: LogStreamWriter, source: LogSource, query: LogQuery): Promise<void> {
    const pending: LogRecord[] = [];
    let overflow = false;
    let wake: (() => void) | null = null;
    const wakeUp = () => wake?.();
    this.wakers.add(wakeUp);
    // Subscribed before the replay is read: nothing appended in between is lost (seq dedupes).
    const stop = source.follow((record) => {
      if (!matchesQuery(record, query)) return;
      if (pending.length >= this.pendingMax) overflow = true;
      else pending.push(record);
      wake?.();
    });
    writer.onAbort(wakeUp);
    try {
      let held: Awaited<ReturnType<LogSource["read"]>>;
      try {
        held = await source.read(query);
      } catch (err) {
        // A node's log on another controller that could not be asked (after the route checked it).
        await this.writeWithin(writer, logFrame("error", { message: "Log unavailable", detail: (err as Error).message }));
        return;
      }
      if (!(await this.writeWithin(writer, logFrame("connected", { message: "Connected to the log stream", size: held.size, capacity: held.capacity }))))
        return;
      let lastSeq = 0;
      let batch = "";
      for (const record of held.records) {
        batch += logFrame("message", record, record.seq);
        lastSeq = Math.max(lastSeq, record.seq);
      }
      if (batch !== "" && !(await this.writeWithin(writer, batch))) return;
      while (!writer.aborted && !this.stopped) {
        if (overflow) {
          await this.writeWithin(writer, logFrame("error", { message: "Too slow" }));
          return;
        }
        if (pending.length > 0) {
          let text = "";
          for (const record of pending.splice(0, LOG_STREAM_BATCH_RECORDS)) {
            // A record already replayed (appended while the replay was read) is not sent twice;
            // a daemon that restarted numbers from 1 again, so a much lower seq is a new record.
            if (record.seq <= lastSeq && lastSeq - record.seq < LOG_STREAM_PENDING_RECORDS_MAX) continue;
            lastSeq = record.seq;
            text += logFrame("message", record, record.seq);
          }
          if (text !== "" && !(await this.writeWithin(writer, text))) return;
          continue;
        }
        const idle = await idleUntilWoken(this.clock, this.keepAliveMs, (w) => (wake = w));
        wake = null;
        if (idle && !(await this.writeWithin(writer, SSE_KEEP_ALIVE))) return;
      }
    } finally {
      stop();
      this.wakers.delete(wakeUp);
    }
  }

  /** Writes, or cuts the client when the socket has not taken the text within the stall bound. */
  private async writeWithin(writer: LogStreamWriter, text: string): Promise<boolean> {
    if (writer.aborted) return false;
    let timer: Timer | undefined;
    const stalled = new Promise<boolean>((resolve) => {
      timer = this.clock.setTimeout(() => resolve(true), this.writeStallMs);
    });
    const cut = await Promise.race([writer.write(text).then(() => false), stalled]);
    timer?.cancel();
    if (cut) {
      writer.cut();
      return false;
    }
    return !writer.aborted;
  }
}
