/**
 * Cross-controller event propagation (spec document 3, "Delivery paths"): with a shared key-value
 * store, each controller republishes the nine bridged event types from its local bus on one
 * pub/sub channel, tagged with its controller id, and publishes its peers' events on its local
 * bus. Without the store (development) no bridge runs and each controller has its own bus.
 *
 * Loops are ruled out twice. On the wire, every message names the controller that published it
 * (`origin`), and a bridge drops messages of its own origin. On the local bus, an event that came
 * from a peer carries the source `peer:<origin>` ({@link peerEventSource}), and a bridge never
 * forwards an event with that source; local publishers never use the `peer:` prefix. So an event
 * crosses the channel once and reaches every other controller's bus once. The source also tells
 * local subscribers (the SSE stream, for one) which controller an event came from.
 */
import type { Logger } from "../logs/types.js";
import { BRIDGED_EVENT_TYPES } from "../events/event-types.js";
import type { CloudEvent, EventBus, Subscription } from "../events/types.js";
import { assert } from "../shared/errors.js";
import type { KvStore } from "../store/ports.js";
import { EVENT_BRIDGE_CHANNEL } from "./keys.js";
import { isValidControllerId } from "./lease.js";

/** Events sent to the channel but not yet confirmed; beyond it new events are dropped and counted. */
export const BRIDGE_OUTBOUND_IN_FLIGHT_EVENTS_MAX = 10_000;
/** Version of the wire message; a message of another version is ignored. */
export const BRIDGE_MESSAGE_VERSION = 1;

const PEER_SOURCE_PREFIX = "peer:";

/** The local source of an event that came from controller `controllerId`. */
export const peerEventSource = (controllerId: string): string => `${PEER_SOURCE_PREFIX}${controllerId}`;

/** The controller a bridged event came from, or null for a local event. */
export function peerOf(event: CloudEvent): string | null {
  return event.source.startsWith(PEER_SOURCE_PREFIX) ? event.source.slice(PEER_SOURCE_PREFIX.length) : null;
}

/** One event on the channel. */
interface BridgeMessage {
  v: number;
  origin: string;
  type: string;
  timestamp: string;
  data: Record<string, unknown>;
}

/** Options of {@link EventBridge}. */
export interface EventBridgeOptions {
  kv: KvStore;
  bus: EventBus;
  /** This controller's id, the origin of what it publishes. */
  controllerId: string;
  logger: Logger;
  channel?: string;
  outboundInFlightEventsMax?: number;
}

/** Bridges the local bus and the peers' buses through the key-value store's pub/sub. */
export class EventBridge {
  private readonly kv: KvStore;
  private readonly bus: EventBus;
  private readonly logger: Logger;
  private readonly channel: string;
  private readonly outboundInFlightEventsMax: number;
  private readonly subscriptions: Subscription[] = [];
  private readonly inFlight = new Set<Promise<void>>();
  private unsubscribeChannel: (() => Promise<void>) | undefined;
  private state: "new" | "running" | "stopped" = "new";
  private dropped = 0;
  private failed = 0;
  private rejected = 0;

  constructor(private readonly options: EventBridgeOptions) {
    assert(isValidControllerId(options.controllerId), `controller id must be non-empty and without "|": ${options.controllerId}`);
    this.kv = options.kv;
    this.bus = options.bus;
    this.logger = options.logger;
    this.channel = options.channel ?? EVENT_BRIDGE_CHANNEL;
    this.outboundInFlightEventsMax = options.outboundInFlightEventsMax ?? BRIDGE_OUTBOUND_IN_FLIGHT_EVENTS_MAX;
  }

  /** Events dropped because too many were in flight to the channel. */
  get droppedEvents(): number {
    return this.dropped;
  }

  /** Events whose publish to the channel failed. */
  get failedEvents(): number {
    return this.failed;
  }

  /** Channel messages ignored as malformed, of another version or of a type that is not bridged. */
  get rejectedMessages(): number {
    return this.rejected;
  }

  /** Subscribes to the channel, then to the local bus. */
  async start(): Promise<void> {
    assert(this.state === "new", "event bridge already started");
    this.state = "running";
    this.unsubscribeChannel = await this.kv.subscribe(this.channel, (message) => this.receive(message));
    for (const type of BRIDGED_EVENT_TYPES) this.subscriptions.push(this.bus.subscribe(type, (event) => this.send(event)));
  }

  /** Stops forwarding both ways and waits for the events still in flight to the channel. */
  async stop(): Promise<void> {
    if (this.state === "stopped") return;
    this.state = "stopped";
    for (const subscription of this.subscriptions.splice(0)) subscription.unsubscribe();
    const unsubscribe = this.unsubscribeChannel;
    this.unsubscribeChannel = undefined;
    await Promise.all([...this.inFlight]);
    try {
      await unsubscribe?.();
    } catch (error) {
      this.logger.warn("Unsubscribing the event bridge from its channel failed", error);
    }
  }

  /** Resolves when every event handed to the channel so far was published (or failed). */
  async flush(): Promise<void> {
    await Promise.all([...this.inFlight]);
  }

  private send(event: CloudEvent): void {
    if (this.state !== "running" || peerOf(event) !== null) return;
    if (this.inFlight.size >= this.outboundInFlightEventsMax) {
      this.dropped++;
      if (this.dropped === 1 || this.dropped % 1000 === 0) {
        this.logger.warn(`Event bridge: ${this.outboundInFlightEventsMax} events in flight, dropped ${this.dropped} so far, latest ${event.type}`);
      }
      return;
    }
    const message: BridgeMessage = {
      v: BRIDGE_MESSAGE_VERSION,
      origin: this.options.controllerId,
      type: event.type,
      timestamp: event.timestamp,
      data: event.data,
    };
    const published = this.kv.publish(this.channel, JSON.stringify(message)).then(
      () => undefined,
      (error: unknown) => {
        this.failed++;
        if (this.failed === 1 || this.failed % 1000 === 0)
          this.logger.warn(`Event bridge: publishing failed ${this.failed} times so far, latest ${event.type}`, error);
      },
    );
    this.inFlight.add(published);
    void published.finally(() => this.inFlight.delete(published));
  }

  private receive(raw: string): void {
    if (this.state !== "running") return;
    const message = parseMessage(raw);
    if (!message) {
      this.rejected++;
      if (this.rejected === 1 || this.rejected % 1000 === 0) this.logger.warn(`Event bridge: ignored ${this.rejected} unreadable messages so far`);
      return;
    }
    if (message.origin === this.options.controllerId) return;
    this.bus.publishEvent({ type: message.type, source: peerEventSource(message.origin), timestamp: message.timestamp, data: message.data });
  }
}

function parseMessage(raw: string): BridgeMessage | null {
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    // Not a bridge message (every controller publishes JSON): the caller counts and reports it.
    return null;
  }
  if (typeof parsed !== "object" || parsed === null) return null;
  const message = parsed as Partial<BridgeMessage>;
  if (message.v !== BRIDGE_MESSAGE_VERSION) return null;
  if (typeof message.origin !== "string" || !isValidControllerId(message.origin)) return null;
  if (typeof message.type !== "string" || !BRIDGED_EVENT_TYPES.has(message.type)) return null;
  if (typeof message.timestamp !== "string") return null;
  if (typeof message.data !== "object" || message.data === null || Array.isArray(message.data)) return null;
  return message as BridgeMessage;
}
