/** The in-process event bus contract (spec document 3, "Bus contract"). */

/** Built-in events use SCREAMING_SNAKE_CASE types; custom ones MODULE:ACTION. */
export interface CloudEvent<T extends Record<string, unknown> = Record<string, unknown>> {
  readonly type: string;
  /** Publisher: a controller id, an instance id (plugin events) or "controller". */
  readonly source: string;
  readonly timestamp: string;
  readonly data: T;
}

export type EventHandler = (event: CloudEvent) => void | Promise<void>;

export interface Subscription {
  unsubscribe(): void;
}

export interface EventBus {
  /** Fire-and-forget: handlers run asynchronously; a throwing handler is logged and isolated. */
  publish(type: string, data: Record<string, unknown>, source?: string): void;
  publishEvent(event: CloudEvent): void;
  /** Built-in type, unfiltered. */
  subscribe(type: string, handler: EventHandler): Subscription;
  /** Only custom events with that type string. */
  subscribeByType(type: string, handler: EventHandler): Subscription;
  subscribeAll(handler: EventHandler): Subscription;
  /** Fluent builder: filters are ANDed, then subscribe. */
  on(type: string): EventFilterBuilder;
}

export interface EventFilterBuilder {
  where(predicate: (event: CloudEvent) => boolean): EventFilterBuilder;
  field(name: string, value: unknown): EventFilterBuilder;
  subscribe(handler: EventHandler): Subscription;
}

/** Payload of an event-stream ticket. */
export interface EventStreamTicket {
  /** `events`: the general stream of a signed-in user; `plugin-events`: the plugin event stream of `instanceId`. */
  readonly kind: "events" | "plugin-events";
  readonly username: string;
  readonly instanceId?: string;
  readonly [field: string]: unknown;
}
