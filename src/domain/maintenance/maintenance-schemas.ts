/**
 * Global maintenance (spec document 2, audit action `maintenance.update`; document 3,
 * MAINTENANCE_UPDATED {globalEnabled, message}): one network-wide switch with a message and the
 * players still admitted while it is on. docs/decisions/maintenance.md explains the choices.
 */
import { Type, type Static } from "@sinclair/typebox";

/** Longest maintenance message (a kick screen's text, not an essay). */
export const maintenanceMessageCharsMax = 512;
/** Entries of the allowed-players list at most (staff and testers, not a second user directory). */
export const allowedPlayersMax = 1_000;
/** What a refused player is told when the operator gave no message. */
export const DEFAULT_MAINTENANCE_MESSAGE = "The network is in maintenance. Please come back later.";

/** A player name (Minecraft: 1-16 of A-Z a-z 0-9 _) or a UUID in its textual form. */
export const ALLOWED_PLAYER_PATTERN = "^([A-Za-z0-9_]{1,16}|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})$";

/** The global maintenance state as `GET /api/v1/maintenance` returns it. */
export const MaintenanceSchema = Type.Object({
  enabled: Type.Boolean(),
  /** What refused players are told; null means the default text. */
  message: Type.Union([Type.String(), Type.Null()]),
  /** Players admitted while maintenance is on: names (case-insensitive) or UUIDs (lower case). */
  allowedPlayers: Type.Array(Type.String()),
  /** The permission whose holders' linked players are admitted as well. */
  bypassPermission: Type.String(),
  updatedAt: Type.Union([Type.String({ format: "date-time" }), Type.Null()]),
  updatedBy: Type.Union([Type.String(), Type.Null()]),
});
export type Maintenance = Static<typeof MaintenanceSchema>;

/** `PATCH /api/v1/maintenance`: omitted keys keep their values; `allowedPlayers` replaces the list. */
export const MaintenancePatchSchema = Type.Object(
  {
    enabled: Type.Optional(Type.Boolean()),
    message: Type.Optional(Type.Union([Type.String({ maxLength: maintenanceMessageCharsMax }), Type.Null()])),
    allowedPlayers: Type.Optional(Type.Array(Type.String({ pattern: ALLOWED_PLAYER_PATTERN }), { maxItems: allowedPlayersMax })),
  },
  { additionalProperties: false },
);
export type MaintenancePatch = Static<typeof MaintenancePatchSchema>;

/** What the plugin API tells instances (`GET /api/plugin/maintenance`). */
export const PluginMaintenanceSchema = Type.Object({
  globalEnabled: Type.Boolean(),
  message: Type.Union([Type.String(), Type.Null()]),
  /** Whether this instance's own group is in maintenance (it then takes no new players either). */
  groupMaintenance: Type.Boolean(),
});
