/**
 * Builds the event stream of a controller (composition): the cluster-wide journal over the key-value store, the
 * SSE hub serving it, and the single-use tickets of the stream. The composition root starts it
 * before serving HTTP and stops it before the HTTP server closes, which ends every open stream.
 */
import { Tickets } from "../coordination/tickets.js";
import type { Logger } from "../logs/types.js";
import type { MetricsService } from "../metrics/metrics.js";
import type { Clock } from "../shared/clock.js";
import type { KvStore } from "../store/ports.js";
import { EventJournal, type EventJournalOptions } from "../events/event-journal.js";
import { EventStreamHub, type EventStreamHubOptions } from "../events/event-stream.js";
import type { EventBus, EventStreamTicket } from "../events/types.js";

/**
 * Plugin event streams per controller: one per instance that opens one (proxies, and servers
 * listening for player events), counted apart from the 100 dashboard clients so that a network of
 * a few hundred servers neither starves the dashboard nor is refused.
 */
export const PLUGIN_STREAM_CLIENTS_MAX = 2_000;

export interface EventStreamOptions {
  kv: KvStore;
  bus: EventBus;
  metrics: Pick<MetricsService, "sseClientsConnected" | "sseReplayBufferSize">;
  logger: Logger;
  clock?: Clock;
  /** Bounds of the journal and the hub; tests shorten them. */
  tuning?: Partial<
    Pick<EventJournalOptions, "gapWaitMs" | "catchUpIntervalMs" | "replayBufferEvents"> &
      Pick<EventStreamHubOptions, "clientsMax" | "keepAliveMs" | "writeStallMs"> & { pluginClientsMax: number }
  >;
}

/** A running event stream. */
export interface EventStream {
  journal: EventJournal;
  hub: EventStreamHub;
  /** The plugin event streams: the same journal, their own client cap ({@link PLUGIN_STREAM_CLIENTS_MAX}). */
  pluginHub: EventStreamHub;
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
  const pluginHub = new EventStreamHub({
    journal,
    clock,
    clientsConnected: metrics.sseClientsConnected,
    clientsMax: tuning?.pluginClientsMax ?? PLUGIN_STREAM_CLIENTS_MAX,
    keepAliveMs: tuning?.keepAliveMs,
    writeStallMs: tuning?.writeStallMs,
  });
  const tickets = new Tickets<EventStreamTicket>({ kv, clock });
  return { journal, hub, pluginHub, tickets, stop: () => journal.stop() };
}
