/**
 * The events a plugin receives on its event stream (spec document 3, "Built-in event types and
 * fields", "Player events a plugin may subscribe to"; the maintenance switches proxies admit players
 * by) and the shape of a custom event's type: one declaration, which the controller publishes and
 * the plugin SDK reads. It lives in the SDK, which imports nothing from the rest of the package;
 * `src/events/event-types.ts` takes these payloads from here for the controller's bus.
 *
 * Payloads are type aliases (not interfaces) so they stay assignable to Record<string, unknown>.
 */

import type { AssertNever } from "./type-checks.js";

/** Custom event types look like `MODULE:ACTION` (spec document 3, "Bus contract"). */
export const CUSTOM_EVENT_TYPE_PATTERN = /^[A-Za-z0-9_.-]+:[A-Za-z0-9_.-]+$/;

/** Player events a plugin may subscribe to (spec document 3); they are cluster-wide. */
export const PLAYER_EVENT_TYPES = ["PLAYER_CONNECTED", "PLAYER_DISCONNECTED", "PLAYER_TRANSFER", "PLAYER_JOURNEY"] as const;

/** The built-in events that change a plugin's maintenance view (proxies admit players by them). */
export const MAINTENANCE_EVENT_TYPES = ["MAINTENANCE_UPDATED", "GROUP_MAINTENANCE_CHANGED"] as const;

/** PLAYER_CONNECTED and PLAYER_DISCONNECTED. */
export type PlayerPayload = { uuid: string; name: string; instanceId: string; group: string };
/** PLAYER_TRANSFER. */
export type PlayerTransferPayload = { uuid: string; name: string; fromInstanceId: string; toInstanceId: string };
/** PLAYER_JOURNEY: one entry of the player's journey (joined, moved, left). */
export type PlayerJourneyPayload = { entry: Record<string, unknown> };
/** MAINTENANCE_UPDATED: the global switch and the message refused players are shown. */
export type MaintenanceUpdatedPayload = { globalEnabled: boolean; message: string | null };
/** GROUP_MAINTENANCE_CHANGED. */
export type GroupMaintenanceChangedPayload = { groupName: string; maintenance: boolean; message: string | null };

/** Payload of each built-in event type a plugin's stream carries. */
export interface PluginEventPayloads {
  PLAYER_CONNECTED: PlayerPayload;
  PLAYER_DISCONNECTED: PlayerPayload;
  PLAYER_TRANSFER: PlayerTransferPayload;
  PLAYER_JOURNEY: PlayerJourneyPayload;
  MAINTENANCE_UPDATED: MaintenanceUpdatedPayload;
  GROUP_MAINTENANCE_CHANGED: GroupMaintenanceChangedPayload;
}

/** Built-in event types a plugin's stream carries. */
export type PluginEventType = keyof PluginEventPayloads;

/** Compile-time only: the two type lists above name exactly the types of {@link PluginEventPayloads}. */
export type PluginEventTypesAreWhole = AssertNever<
  | Exclude<PluginEventType, (typeof PLAYER_EVENT_TYPES)[number] | (typeof MAINTENANCE_EVENT_TYPES)[number]>
  | Exclude<(typeof PLAYER_EVENT_TYPES)[number] | (typeof MAINTENANCE_EVENT_TYPES)[number], PluginEventType>
>;
