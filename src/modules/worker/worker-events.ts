/**
 * The event bus as a module sees it (spec document 3, "Bus contract"), inside its worker: each
 * subscription is registered with the controller (which forwards the matching events of the whole
 * cluster), filters of `on(type)` run here, handlers run asynchronously and a throwing one is logged
 * and isolated.
 */
import { InvalidArgumentError } from "../../sdk/module/errors.js";
import type {
  CustomCloudEvent,
  EventFilter,
  EventSubscription,
  ModuleEvent,
  ModuleEventBus,
  ModuleEventHandler,
  ModuleLogger,
} from "../../sdk/module/types.js";
import type { SubscriptionKind } from "./protocol.js";
import type { WorkerRpc } from "./worker-rpc.js";

/** Custom event types look like MODULE:ACTION. */
const CUSTOM_TYPE = /^[A-Za-z0-9_.-]+:[A-Za-z0-9_.-]+$/;

interface LocalSubscription {
  handler: ModuleEventHandler;
  filters: ((event: ModuleEvent) => boolean)[];
}

/** See the module comment. */
export class WorkerEventBus implements ModuleEventBus {
  private nextId = 1;
  private readonly subscriptions = new Map<number, LocalSubscription>();

  constructor(
    private readonly rpc: WorkerRpc,
    private readonly logger: ModuleLogger,
  ) {}

  on(type: string): EventFilter {
    const filters: ((event: ModuleEvent) => boolean)[] = [];
    const builder: EventFilter = {
      filter: (predicate) => {
        filters.push(predicate);
        return builder;
      },
      field: (name, value) => {
        filters.push((event) => event.data[name] === value);
        return builder;
      },
      subscribe: (handler) => this.add("type", type, handler, filters),
    };
    return builder;
  }

  subscribe(type: string, handler: ModuleEventHandler): EventSubscription {
    return this.add("type", type, handler, []);
  }

  subscribeByType(type: string, handler: ModuleEventHandler): EventSubscription {
    return this.add("custom-type", type, handler, []);
  }

  subscribeAll(handler: ModuleEventHandler): EventSubscription {
    return this.add("all", "", handler, []);
  }

  publish(event: CustomCloudEvent): void {
    if (!event || typeof event.type !== "string" || !CUSTOM_TYPE.test(event.type))
      throw new InvalidArgumentError(`a module publishes custom events only, typed MODULE:ACTION (got ${JSON.stringify(event?.type)})`);
    void this.rpc.call("events.publish", event.type, event.payload ?? {}, event.timestamp ?? null).catch((error: unknown) => {
      this.logger.warn(`Publishing ${event.type} failed: ${(error as Error).message}`);
    });
  }

  /** Runs the handlers of `ids` for `event`, each on its own. */
  deliver(ids: readonly number[], event: ModuleEvent): void {
    for (const id of ids) {
      const subscription = this.subscriptions.get(id);
      if (!subscription) continue;
      void (async () => {
        try {
          if (subscription.filters.every((filter) => filter(event))) await subscription.handler(event);
        } catch (error) {
          this.logger.error(`Event handler for ${event.type} failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
        }
      })();
    }
  }

  private add(kind: SubscriptionKind, type: string, handler: ModuleEventHandler, filters: ((event: ModuleEvent) => boolean)[]): EventSubscription {
    if (typeof handler !== "function") throw new InvalidArgumentError("an event handler must be a function");
    const id = this.nextId++;
    this.subscriptions.set(id, { handler, filters: [...filters] });
    void this.rpc.call("events.subscribe", id, kind, type).catch((error: unknown) => this.logger.warn(`Subscribing failed: ${(error as Error).message}`));
    let active = true;
    return {
      unsubscribe: () => {
        if (!active) return;
        active = false;
        this.subscriptions.delete(id);
        void this.rpc.call("events.unsubscribe", id).catch(() => undefined);
      },
    };
  }
}
