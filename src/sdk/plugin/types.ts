/** Plain data of the plugin API (spec documents 1 and 3). Unknown fields from the controller are kept. */
export type { MetricsPayload, WorldMetrics } from "../contracts/plugin-metrics.js";
export type { Transfer, TransferState } from "../contracts/plugin-stream.js";

/** An immutable view of a player (spec document 3, "Plugin-side objects"). */
export interface PlayerView {
  readonly uuid: string;
  readonly name: string;
  readonly instanceId: string;
  readonly group: string;
  /** The proxy holding the player; null on a game-server instance. */
  readonly proxyInstanceId: string | null;
  /** ISO-8601 time the player connected; null on a game-server instance. */
  readonly connectedAt: string | null;
}

/** An instance record as `GET /api/plugin/instances` lists it (spec document 1, "Instance record"). */
export interface InstanceInfo {
  id: string;
  group: string;
  node?: string;
  state?: string;
  port?: number;
  playerCount?: number;
  [field: string]: unknown;
}

/** A group with its online counts as `GET /api/plugin/groups` lists it. */
export interface GroupInfo {
  name: string;
  runningInstances?: number;
  totalPlayers?: number;
  [field: string]: unknown;
}

/** Maintenance as `GET /api/plugin/maintenance` answers it. */
export interface PluginMaintenance {
  globalEnabled: boolean;
  /** The operator's message for refused players; null when none was set. */
  message: string | null;
  /** Whether this instance's own group is in maintenance. */
  groupMaintenance: boolean;
}

/**
 * The controller's answer to a player coming onto this instance (`CloudClient.admitPlayer`):
 * admitted, or refused with `MAINTENANCE` (the network is in maintenance) or `GROUP_MAINTENANCE`
 * (this instance's group is) and the text to show the player.
 */
export type PlayerAdmissionResult = { readonly admitted: true } | { readonly admitted: false; readonly code: string; readonly message: string };

/**
 * What the controller grants a Minecraft account (`GET /api/plugin/players/{uuid}/permissions`):
 * the permissions of the user it is linked to, none when it is not linked.
 */
export interface PlayerPermissions {
  readonly uuid: string;
  readonly linked: boolean;
  readonly permissions: ReadonlySet<string>;
}

/** A player-to-player message (`POST /api/plugin/message/send`). */
export interface PlayerMessage {
  fromUuid: string;
  fromName: string;
  toUuid: string;
  toName: string;
  content: string;
  replyToId?: string;
}

/**
 * An event as the plugin event stream delivers it: the bus event (`type`, `source`, `timestamp`,
 * payload under `data`) with its cluster-wide `sequence`.
 */
export interface CloudEvent<T extends Record<string, unknown> = Record<string, unknown>> {
  readonly type: string;
  readonly sequence: number;
  /** Who published it: `controller`, a controller id, or an instance id (plugin events). */
  readonly source: string;
  readonly timestamp: string;
  readonly data: T;
}

/** Where the SDK reports what it cannot throw (fire-and-forget calls, the event stream, handlers). */
export interface SdkLogger {
  info(message: string): void;
  warn(message: string): void;
}

/** A logger that drops everything. */
export const silentLogger: SdkLogger = { info: () => {}, warn: () => {} };
