/**
 * The plugin event stream: what an instance's plugin receives on `GET /api/v1/events/stream` with
 * the ticket of `POST /api/plugin/events/ticket`. From the cluster's journal (same sequence numbers,
 * same resume rules as the general stream): the player events a plugin may subscribe to
 * (PLAYER_CONNECTED, PLAYER_DISCONNECTED, PLAYER_TRANSFER, PLAYER_JOURNEY; cluster-wide), the
 * maintenance switches (MAINTENANCE_UPDATED, GROUP_MAINTENANCE_CHANGED) and custom
 * `MODULE:ACTION` events, except those the instance published itself (its own bus already ran
 * them). Besides the journal, frames addressed to this instance: `event: transfer` (a transfer it
 * has to carry out; every pending one again when the stream opens), `event: transfer-completed`
 * and `event: transfer-failed`, each with the transfer as data (`transfers.ts`).
 *
 * The `connected` frame carries `registryEpoch`, the player registry's epoch read as the stream
 * opens (`players.ts`); when this controller finds the epoch changed while the stream is open,
 * `event: registry-epoch` `{registryEpoch}` says so. A plugin that saw another epoch before reports
 * its players again (docs/decisions/plugin-sdk.md).
 */
import type { JournalEntry } from "../events/event-journal.js";
import type { StreamShape } from "../events/event-stream.js";
import { sseFrame } from "../events/event-stream.js";
import { isBuiltInEventType } from "../events/event-types.js";
import type { Logger } from "../logs/types.js";
import { MAINTENANCE_EVENT_TYPES, PLAYER_EVENT_TYPES } from "../sdk/contracts/plugin-events.js";
import { REGISTRY_EPOCH_FRAME } from "../sdk/contracts/plugin-stream.js";
import type { PluginDeliveries } from "./plugin-deliveries.js";
import type { PlayerService } from "./players.js";
import type { TransferService } from "./transfers.js";

/** Built-in types a plugin's stream carries (spec document 3: "Player events a plugin may subscribe to", and the maintenance switches). */
export const PLUGIN_STREAM_EVENT_TYPES: ReadonlySet<string> = new Set<string>([
  ...PLAYER_EVENT_TYPES,
  // Proxies admit players by these (docs/decisions/maintenance.md).
  ...MAINTENANCE_EVENT_TYPES,
]);
/** Frames waiting for one slow plugin stream; beyond it the oldest are dropped (pending transfers come again on reconnect). */
export const pluginStreamQueuedFramesMax = 1_000;
/** Message of the plugin stream's connected frame. */
export const PLUGIN_STREAM_GREETING = "Connected to the plugin event stream";

/** Whether a journal entry goes to the plugin stream of `instanceId`. */
export function acceptsForPlugin(entry: JournalEntry, instanceId: string): boolean {
  if (PLUGIN_STREAM_EVENT_TYPES.has(entry.type)) return true;
  return !isBuiltInEventType(entry.type) && entry.type !== "UNKNOWN" && entry.source !== instanceId;
}

/** A shaped stream for one instance, and the function that releases it when the stream ends. */
export interface PluginStream {
  shape: StreamShape;
  close(): void;
}

/**
 * Opens the instance's stream shape: listens for its deliveries and for changes of the registry's
 * epoch first, then queues every pending transfer and reads the epoch for the connected frame.
 */
export async function openPluginStream(
  deps: { deliveries: PluginDeliveries; transfers: TransferService; players: Pick<PlayerService, "epoch" | "onEpochChange">; logger: Logger },
  instanceId: string,
): Promise<PluginStream> {
  const queue: string[] = [];
  const sent = new Set<string>();
  const listeners = new Set<() => void>();
  let dropped = 0;
  const push = (event: string, data: Record<string, unknown>, key = `${event}:${String(data.id)}`) => {
    if (sent.has(key)) return;
    if (sent.size >= pluginStreamQueuedFramesMax * 10) sent.clear();
    sent.add(key);
    if (queue.length >= pluginStreamQueuedFramesMax) {
      queue.shift();
      if (++dropped === 1) deps.logger.warn(`Plugin stream of ${instanceId}: more than ${pluginStreamQueuedFramesMax} frames waiting; dropping the oldest`);
    }
    queue.push(sseFrame(event, data));
    for (const listener of [...listeners]) listener();
  };
  const detachDeliveries = deps.deliveries.attach(instanceId, (delivery) => push(delivery.event, delivery.data));
  const detachEpoch = deps.players.onEpochChange((epoch) => push(REGISTRY_EPOCH_FRAME, { registryEpoch: epoch }, `${REGISTRY_EPOCH_FRAME}:${epoch}`));
  const detach = () => {
    detachDeliveries();
    detachEpoch();
  };
  let registryEpoch: string;
  try {
    for (const transfer of await deps.transfers.pendingFor(instanceId)) push("transfer", { ...transfer });
    registryEpoch = await deps.players.epoch();
  } catch (err) {
    detach();
    throw err;
  }
  return {
    shape: {
      accept: (entry) => acceptsForPlugin(entry, instanceId),
      greeting: PLUGIN_STREAM_GREETING,
      connectedFields: { registryEpoch },
      side: {
        take: () => queue.splice(0, queue.length),
        listen: (listener) => {
          listeners.add(listener);
          return () => listeners.delete(listener);
        },
      },
    },
    close: detach,
  };
}
