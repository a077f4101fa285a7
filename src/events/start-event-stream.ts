/**
 * Builds the event stream of a controller: the cluster-wide journal over the key-value store, the
 * SSE hub serving it, and the single-use tickets of the stream. The composition root starts it
 * before serving HTTP and stops it before the HTTP server closes, which ends every open stream.
 */
import { Tickets } from "../coordination/tickets.js";
import type { Logger } from "../logs/types.js";
import type { MetricsService } from "../metrics/metrics.js";
import type { Clock } from "../shared/clock.js";
import type { KvStore } from "../store/ports.js";
import { EventJournal, type EventJournalOptions } from "./event-journal.js";
import { EventStreamHub, type EventStreamHubOptions } from "./event-stream.js";
import type { EventBus } from "./types.js";

/** Payload of an event-stream ticket. */
export interface EventStreamTicket {
  readonly kind: "events";
  readonly username: string;
  readonly [field: string]: unknown;
}

export interface EventStreamOptions {
  kv: KvStore;
  bus: EventBus;
  metrics: Pick<MetricsService, "sseClientsConnected" | "sseReplayBufferSize">;
  logger: Logger;
  clock?: Clock;
  /** Bounds of the journal and the hub; tests shorten them. */
  tuning?: Partial<
    Pick<EventJournalOptions, "gapWaitMs" | "catchUpIntervalMs" | "replayBufferEvents"> &
      Pick<EventStreamHubOptions, "clientsMax" | "keepAliveMs" | "writeStallMs">
  >;
}

/** A running event stream. */
export interface EventStream {
  journal: EventJournal;
  hub: EventStreamHub;
  tickets: Tickets<EventStreamTicket>;
  /** Ends every stream and stops journaling; idempotent. */
  stop(): Promise<void>;
}

/** Starts the journal (reading the log's tail) and returns the stream's parts. */
export async function startEventStream(options: EventStreamOptions): Promise<EventStream> {
  const { kv, metrics, clock, tuning } = options;
  const journal = new EventJournal({
    kv,
    bus: options.bus,
    logger: options.logger,
    clock,
    gapWaitMs: tuning?.gapWaitMs,
    catchUpIntervalMs: tuning?.catchUpIntervalMs,
    replayBufferEvents: tuning?.replayBufferEvents,
    onBufferSize: (events) => metrics.sseReplayBufferSize.set(events),
  });
  await journal.start();
  const hub = new EventStreamHub({
    journal,
    clock,
    clientsConnected: metrics.sseClientsConnected,
    clientsMax: tuning?.clientsMax,
    keepAliveMs: tuning?.keepAliveMs,
    writeStallMs: tuning?.writeStallMs,
  });
  const tickets = new Tickets<EventStreamTicket>({ kv, clock });
  return { journal, hub, tickets, stop: () => journal.stop() };
}
