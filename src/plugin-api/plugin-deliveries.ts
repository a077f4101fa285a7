/**
 * Frames addressed to one instance's plugin event stream (transfers to carry out, and their
 * outcome), whichever controller holds that stream. A frame is published on one key-value channel
 * (`cloud:v1:plugin:deliveries`); every controller hears it and hands it to the streams of that
 * instance open on it. What must survive a lost frame (a pending transfer) is also kept in the
 * store and sent again when the stream reconnects (`transfers.ts`).
 */
import { KV_KEY_PREFIX } from "../coordination/keys.js";
import type { Logger } from "../logs/types.js";
import type { KvStore } from "../store/ports.js";

/** The channel every delivery goes out on. */
export const PLUGIN_DELIVERY_CHANNEL = `${KV_KEY_PREFIX}plugin:deliveries`;

/** One frame for one instance: the SSE event name and its JSON data. */
export interface PluginDelivery {
  instanceId: string;
  event: string;
  data: Record<string, unknown>;
}

export type DeliveryListener = (delivery: PluginDelivery) => void;

/** Fans deliveries out to the local streams of their instance. */
export class PluginDeliveries {
  private readonly listeners = new Map<string, Set<DeliveryListener>>();
  private unsubscribe: (() => Promise<void>) | null = null;

  constructor(
    private readonly kv: KvStore,
    private readonly logger: Logger,
  ) {}

  async start(): Promise<void> {
    this.unsubscribe = await this.kv.subscribe(PLUGIN_DELIVERY_CHANNEL, (text) => this.receive(text));
  }

  async stop(): Promise<void> {
    const unsubscribe = this.unsubscribe;
    this.unsubscribe = null;
    await unsubscribe?.();
  }

  /** Sends a frame to the instance's streams on every controller. */
  async send(delivery: PluginDelivery): Promise<void> {
    await this.kv.publish(PLUGIN_DELIVERY_CHANNEL, JSON.stringify(delivery));
  }

  /** Listens for the frames of one instance; returns the function that stops listening. */
  attach(instanceId: string, listener: DeliveryListener): () => void {
    let set = this.listeners.get(instanceId);
    if (!set) this.listeners.set(instanceId, (set = new Set()));
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0 && this.listeners.get(instanceId) === set) this.listeners.delete(instanceId);
    };
  }

  private receive(text: string): void {
    let delivery: PluginDelivery;
    try {
      delivery = JSON.parse(text) as PluginDelivery;
    } catch {
      this.logger.warn("Plugin deliveries: ignored an unreadable frame");
      return;
    }
    for (const listener of this.listeners.get(delivery.instanceId) ?? []) listener(delivery);
  }
}
