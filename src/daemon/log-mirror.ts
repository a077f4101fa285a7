/**
 * The daemon log appender (spec document 2, "Log record"): every log event of the daemon is also
 * sent to the controller holding its stream, as a `log_record`, with its fields clamped here
 * (src/wire/log-records.ts). Log records are the lowest priority on the stream: the mirror hands a
 * record over only while the stream's outgoing buffer is nearly empty (`background` sends of the
 * gateway client), so an instance state report never waits behind more than a few of them. What
 * cannot be sent waits in a bounded queue; when it is full the oldest record gives way, and the
 * next record sent carries the count in `dropped_before`. Records logged while no session is open
 * wait in the same queue and go out after the next hello_ack.
 */
import { systemClock, type Clock, type Timer } from "../shared/clock.js";
import { daemonMessage, type DaemonMessage, type LogRecordMessage } from "../wire/daemon-proto.js";
import { clampLogRecord } from "../wire/log-records.js";
import type { ClientLogger } from "./gateway-client.js";

/** Records waiting to be sent; beyond it the oldest is dropped. */
export const LOG_MIRROR_QUEUE_RECORDS_MAX = 2_000;
/** Records handed to the stream in one turn before the event loop gets a turn back. */
export const LOG_MIRROR_BATCH_RECORDS = 64;
/** Pause before trying again when the stream did not take a record (busy or no session). */
export const LOG_MIRROR_RETRY_MS = 2;

/** Level names the mirror records. */
export type MirrorLevel = "TRACE" | "DEBUG" | "INFO" | "WARN" | "ERROR";

export interface DaemonLogMirrorOptions {
  /** Hands a record to the stream at background priority; false when it was not taken. */
  send(message: DaemonMessage): boolean;
  clock?: Clock;
  queueRecordsMax?: number;
}

/** Counters of the mirror, for tests and the benchmark. */
export interface LogMirrorStats {
  sent: number;
  dropped: number;
  queued: number;
}

/** Queues and sends the daemon's log records. */
export class DaemonLogMirror {
  private readonly queue: LogRecordMessage[] = [];
  private queueStart = 0;
  private readonly clock: Clock;
  private readonly queueMax: number;
  private seq = 0;
  private droppedSinceSent = 0;
  private timer: Timer | null = null;
  private closed = false;
  private readonly counters = { sent: 0, dropped: 0 };

  constructor(private readonly options: DaemonLogMirrorOptions) {
    this.clock = options.clock ?? systemClock;
    this.queueMax = options.queueRecordsMax ?? LOG_MIRROR_QUEUE_RECORDS_MAX;
  }

  get stats(): LogMirrorStats {
    return { ...this.counters, queued: this.queue.length - this.queueStart };
  }

  /** Records one log event (clamped) and schedules its sending. */
  append(level: MirrorLevel, logger: string, message: string, throwable = "", thread = "main"): void {
    if (this.closed) return;
    const record = clampLogRecord({
      level,
      logger,
      message,
      timestamp_ms: this.clock.nowMs(),
      seq: ++this.seq,
      thread,
      throwable,
      mdc: {},
      dropped_before: 0,
    });
    if (this.queue.length - this.queueStart >= this.queueMax) {
      this.queueStart++;
      this.droppedSinceSent++;
      this.counters.dropped++;
      if (this.queueStart >= this.queueMax) {
        this.queue.splice(0, this.queueStart);
        this.queueStart = 0;
      }
    }
    this.queue.push(record);
    this.schedule(0);
  }

  /** Tries to send at once (a session just opened). */
  wake(): void {
    this.timer?.cancel();
    this.timer = null;
    this.schedule(0);
  }

  /** Stops sending; what is queued is dropped. */
  close(): void {
    this.closed = true;
    this.timer?.cancel();
    this.timer = null;
  }

  private schedule(delayMs: number): void {
    if (this.timer || this.closed) return;
    this.timer = this.clock.setTimeout(
      () => {
        this.timer = null;
        this.pump();
      },
      delayMs,
      { unref: true },
    );
  }

  private pump(): void {
    for (let sent = 0; sent < LOG_MIRROR_BATCH_RECORDS; sent++) {
      if (this.queueStart >= this.queue.length) {
        this.queue.length = 0;
        this.queueStart = 0;
        return;
      }
      const record = this.queue[this.queueStart]!;
      const message = daemonMessage("log_record", { ...record, dropped_before: this.droppedSinceSent });
      if (!this.options.send(message)) return this.schedule(LOG_MIRROR_RETRY_MS);
      this.droppedSinceSent = 0;
      this.counters.sent++;
      this.queueStart++;
    }
    // Compacts the sent prefix once it is as long as what waits.
    if (this.queueStart > 0 && this.queueStart >= this.queue.length - this.queueStart) {
      this.queue.splice(0, this.queueStart);
      this.queueStart = 0;
    }
    this.schedule(0);
  }
}

/** A logger that writes through `base` and mirrors every event as logger `name`. */
export function mirroredLogger(base: ClientLogger, mirror: DaemonLogMirror, name = "cloud.daemon"): ClientLogger {
  return {
    info: (message) => {
      base.info(message);
      mirror.append("INFO", name, message);
    },
    warn: (message) => {
      base.warn(message);
      mirror.append("WARN", name, message);
    },
    error: (message) => {
      base.error(message);
      mirror.append("ERROR", name, message);
    },
  };
}
