/**
 * The plugin-side event bus (spec document 3, "Bus contract"): handlers run synchronously on the
 * delivering call, in subscription order; a throwing handler is logged and the others still run.
 * Events arrive from the plugin event stream (PluginEventStream); `publish` forwards a custom event
 * to the controller, and it comes back through the stream like every other event.
 */
import { PLAYER_EVENT_TYPES } from "../contracts/plugin-events.js";
import type { CloudClient } from "./cloud-client.js";
import { silentLogger, type CloudEvent, type SdkLogger } from "./types.js";

export type EventHandler = (event: CloudEvent) => void;

/** What every subscribe returns; dropping it without unsubscribing leaks the handler. */
export interface Subscription {
  unsubscribe(): void;
}

/** Fluent subscription: filters are ANDed. */
export interface EventFilterBuilder {
  where(predicate: (event: CloudEvent) => boolean): EventFilterBuilder;
  /** The payload field `name` equals `value`. */
  field(name: string, value: unknown): EventFilterBuilder;
  /** Only events published by `source` (an instance id for plugin events). */
  from(source: string): EventFilterBuilder;
  subscribe(handler: EventHandler): Subscription;
}

export { PLAYER_EVENT_TYPES };
/** The stream's synthetic event telling the client to fetch state again over REST. */
export const RESYNC_REQUIRED = "RESYNC_REQUIRED";
/** Handlers one bus holds at most (a plugin that subscribes in a loop fails loudly instead of leaking). */
export const handlersMax = 1_024;

interface Entry {
  matches: (event: CloudEvent) => boolean;
  handler: EventHandler;
}

const isCustomType = (type: string) => type.includes(":");

export class PluginEventBus {
  private entries: Entry[] = [];
  private readonly logger: SdkLogger;

  constructor(
    private readonly client: Pick<CloudClient, "publishEvent"> | null,
    logger: SdkLogger = silentLogger,
  ) {
    this.logger = logger;
  }

  /** Typed, unfiltered: every event of this type. */
  subscribe(type: string, handler: EventHandler): Subscription {
    return this.add((event) => event.type === type, handler);
  }

  /** Only custom (`MODULE:ACTION`) events with this type string. */
  subscribeByType(type: string, handler: EventHandler): Subscription {
    return this.add((event) => isCustomType(event.type) && event.type === type, handler);
  }

  /** Every event. */
  subscribeAll(handler: EventHandler): Subscription {
    return this.add(() => true, handler);
  }

  on(type: string): EventFilterBuilder {
    const filters: ((event: CloudEvent) => boolean)[] = [(event) => event.type === type];
    const builder: EventFilterBuilder = {
      where: (predicate) => (filters.push(predicate), builder),
      field: (name, value) => (filters.push((event) => event.data[name] === value), builder),
      from: (source) => (filters.push((event) => event.source === source), builder),
      subscribe: (handler) => this.add((event) => filters.every((filter) => filter(event)), handler),
    };
    return builder;
  }

  /** Fire-and-forget: forwards a custom event to the controller (`POST /api/plugin/events`). */
  publish(type: string, data: Record<string, unknown> = {}): void {
    if (this.client === null) throw new Error("this bus has no client to publish through");
    this.client.publishEvent(type, data);
  }

  /** Runs every matching handler now, in subscription order; a throwing handler is logged and isolated. */
  deliver(event: CloudEvent): void {
    for (const entry of [...this.entries]) {
      if (!entry.matches(event)) continue;
      try {
        entry.handler(event);
      } catch (error) {
        this.logger.warn(`Event handler for ${event.type} threw: ${(error as Error)?.message ?? String(error)}`);
      }
    }
  }

  get handlerCount(): number {
    return this.entries.length;
  }

  private add(matches: (event: CloudEvent) => boolean, handler: EventHandler): Subscription {
    if (this.entries.length >= handlersMax) throw new Error(`an event bus holds at most ${handlersMax} handlers`);
    const entry: Entry = { matches, handler };
    this.entries.push(entry);
    return { unsubscribe: () => (this.entries = this.entries.filter((e) => e !== entry)) };
  }
}
