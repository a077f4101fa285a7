/** Plain data of the plugin API (spec documents 1 and 3). Unknown fields from the controller are kept. */

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

/** One world of a metrics payload. */
export interface WorldMetrics {
  name: string;
  environment: string;
  entityCount: number;
  chunkCount: number;
  playerCount: number;
}

/** The metrics payload of spec document 3 (`POST /api/plugin/metrics`). */
export interface MetricsPayload {
  tps1m: number;
  tps5m: number;
  tps15m: number;
  msptAvg: number;
  heapUsedMb: number;
  heapMaxMb: number;
  heapCommittedMb: number;
  gcCollections: number;
  gcTimeMs: number;
  threadCount: number;
  daemonThreadCount: number;
  playerCount: number;
  maxPlayers: number;
  worldCount: number;
  totalEntities: number;
  totalChunks: number;
  worlds: WorldMetrics[];
  serverVersion: string;
  pluginCount: number;
  uptimeMs: number;
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

/** Where a transfer stands: waiting for the player's arrival, arrived, or given up. */
export type TransferState = "PENDING" | "COMPLETED" | "FAILED";

/**
 * A transfer as the controller answers `transfer` / `transfer-to-group` (202) and sends it on the
 * plugin event stream (`event: transfer`, `transfer-completed`, `transfer-failed`).
 */
export interface Transfer {
  readonly id: string;
  readonly playerUuid: string;
  readonly playerName: string;
  /** The server the player was on when the transfer was asked for; null while only on a proxy. */
  readonly fromInstanceId: string | null;
  readonly targetInstanceId: string;
  /** The group the target was chosen from (`transfer-to-group`); null for a transfer to one instance. */
  readonly targetGroup: string | null;
  /** The instance that moves the player: its proxy, or the server it joined directly. */
  readonly holderInstanceId: string;
  /** The instance whose plugin asked. */
  readonly requestedBy: string;
  readonly requestedAt: string;
  readonly state: TransferState;
  /** TARGET_GONE, HOLDER_GONE, SUPERSEDED, PLAYER_LEFT or TIMEOUT when FAILED; else null. */
  readonly failureReason: string | null;
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
