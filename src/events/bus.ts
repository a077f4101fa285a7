/**
 * The in-process event bus (spec document 3, "Bus contract"). `publish` only enqueues; deliveries run
 * on a later macrotask (setImmediate), each handler isolated: a throwing or rejecting handler is
 * logged and the others still run. The pending queue is bounded; beyond the bound new events are
 * dropped and counted, so a publishing loop cannot exhaust memory.
 */
import { nextTurn, systemClock, type Clock } from "../shared/clock.js";
import type { Logger } from "../logs/types.js";
import { isBuiltInEventType } from "./event-types.js";
import type { CloudEvent, EventBus, EventFilterBuilder, EventHandler, Subscription } from "./types.js";

/** Events waiting for delivery before new ones are dropped. */
export const EVENT_QUEUE_EVENTS_MAX = 100_000;
/** Events delivered per macrotask before yielding to I/O. */
const DELIVERY_BATCH_EVENTS = 1000;
/** Source used when a publisher names none. */
export const DEFAULT_EVENT_SOURCE = "controller";

export interface EventBusOptions {
  logger: Logger;
  clock?: Clock;
  queueEventsMax?: number;
}

/** The controller bus: the {@link EventBus} contract plus what tests and shutdown need. */
export interface ControllerEventBus extends EventBus {
  /** Resolves once every queued event was delivered and every async handler settled. */
  flush(): Promise<void>;
  /** Events published but not yet delivered. */
  readonly pendingEvents: number;
  /** Events dropped because the queue was full. */
  readonly droppedEvents: number;
  /** Active subscriptions. */
  readonly subscriptionCount: number;
}

type Match = { kind: "type"; type: string } | { kind: "custom"; type: string } | { kind: "all" };

interface Sub {
  readonly match: Match;
  readonly filters: readonly ((event: CloudEvent) => boolean)[];
  readonly handler: EventHandler;
  active: boolean;
}

/** Creates an event bus; handlers run asynchronously and in isolation. */
export function createEventBus(options: EventBusOptions): ControllerEventBus {
  const { logger } = options;
  const clock = options.clock ?? systemClock;
  const queueEventsMax = options.queueEventsMax ?? EVENT_QUEUE_EVENTS_MAX;
  const subs = new Set<Sub>();
  const queue: { event: CloudEvent; targets: Sub[] }[] = [];
  let queueHead = 0;
  const inflight = new Set<Promise<unknown>>();
  let scheduled = false;
  let dropped = 0;
  let idleWaiters: (() => void)[] = [];

  const matches = (sub: Sub, event: CloudEvent): boolean => {
    switch (sub.match.kind) {
      case "all":
        break;
      case "type":
        if (event.type !== sub.match.type) return false;
        break;
      case "custom":
        if (event.type !== sub.match.type || isBuiltInEventType(event.type)) return false;
        break;
    }
    for (const filter of sub.filters) if (!filter(event)) return false;
    return true;
  };

  const reportFailure = (event: CloudEvent, err: unknown): void => {
    try {
      logger.error(`Event handler for ${event.type} failed`, err);
    } catch {
      // logging must never take the bus down
    }
  };

  function invoke(sub: Sub, event: CloudEvent): void {
    let filtered: boolean;
    try {
      filtered = matches(sub, event);
    } catch (err) {
      reportFailure(event, err);
      return;
    }
    if (!filtered) return;
    try {
      const result = sub.handler(event);
      if (result && typeof (result as Promise<void>).then === "function") {
        const settled = Promise.resolve(result).then(undefined, (err: unknown) => reportFailure(event, err));
        inflight.add(settled);
        void settled.finally(() => {
          inflight.delete(settled);
          notifyIdle();
        });
      }
    } catch (err) {
      reportFailure(event, err);
    }
  }

  function drain(): void {
    scheduled = false;
    const end = Math.min(queue.length, queueHead + DELIVERY_BATCH_EVENTS);
    for (; queueHead < end; queueHead++) {
      const { event, targets } = queue[queueHead];
      for (const sub of targets) if (sub.active) invoke(sub, event);
    }
    if (queueHead >= queue.length) {
      queue.length = 0;
      queueHead = 0;
      notifyIdle();
    } else {
      queue.splice(0, queueHead); // drop delivered entries so the array stays within the bound
      queueHead = 0;
      schedule();
    }
  }

  function schedule(): void {
    if (scheduled) return;
    scheduled = true;
    nextTurn(drain);
  }

  function notifyIdle(): void {
    if (queue.length - queueHead > 0 || inflight.size > 0) return;
    const waiters = idleWaiters;
    idleWaiters = [];
    for (const resolve of waiters) resolve();
  }

  function publishEvent(input: CloudEvent): void {
    if (typeof input.type !== "string" || input.type === "") throw new TypeError("event type must be a non-empty string");
    const event: CloudEvent = Object.freeze({
      type: input.type,
      source: input.source || DEFAULT_EVENT_SOURCE,
      timestamp: input.timestamp || new Date(clock.nowMs()).toISOString(),
      data: input.data ?? {},
    });
    if (subs.size === 0) return;
    if (queue.length - queueHead >= queueEventsMax) {
      dropped++;
      if (dropped === 1 || dropped % 1000 === 0)
        logger.warn(`Event queue full (${queueEventsMax} events): dropped ${dropped} events so far, latest ${event.type}`);
      return;
    }
    queue.push({ event, targets: [...subs] });
    schedule();
  }

  function add(match: Match, filters: readonly ((event: CloudEvent) => boolean)[], handler: EventHandler): Subscription {
    if (typeof handler !== "function") throw new TypeError("event handler must be a function");
    const sub: Sub = { match, filters, handler, active: true };
    subs.add(sub);
    return {
      unsubscribe: () => {
        sub.active = false;
        subs.delete(sub);
      },
    };
  }

  function builder(type: string, filters: readonly ((event: CloudEvent) => boolean)[]): EventFilterBuilder {
    return {
      where: (predicate) => builder(type, [...filters, predicate]),
      field: (name, value) => builder(type, [...filters, (event) => Object.is((event.data as Record<string, unknown>)[name], value)]),
      subscribe: (handler) => add({ kind: "type", type }, filters, handler),
    };
  }

  return {
    publish: (type, data, source) => publishEvent({ type, data: data ?? {}, source: source ?? DEFAULT_EVENT_SOURCE, timestamp: "" }),
    publishEvent,
    subscribe: (type, handler) => add({ kind: "type", type }, [], handler),
    subscribeByType: (type, handler) => add({ kind: "custom", type }, [], handler),
    subscribeAll: (handler) => add({ kind: "all" }, [], handler),
    on: (type) => builder(type, []),
    flush: () =>
      new Promise<void>((resolve) => {
        idleWaiters.push(resolve);
        notifyIdle();
      }),
    get pendingEvents() {
      return queue.length - queueHead;
    },
    get droppedEvents() {
      return dropped;
    },
    get subscriptionCount() {
      return subs.size;
    },
  };
}
