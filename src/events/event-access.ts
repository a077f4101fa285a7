/**
 * Who reads which events on the general stream (docs/decisions/events.md, "Who reads the stream").
 * `events.view` opens the stream; each event then reaches a client only when the user also holds
 * the view permission of the surface the event describes: a player's name needs `players.view`, a
 * crash's log tail `crashes.view`, a node's load `nodes.view`. Custom `MODULE:ACTION` events and the
 * synthetic RESYNC_REQUIRED have no surface of their own: `events.view` covers them.
 *
 * A stream outlives the ticket that opened it, so the user's permissions are read again every
 * {@link EVENT_STREAM_PERMISSIONS_REFRESH_MS}: a narrowed role narrows the open stream, and a user
 * who lost `events.view` (or was deleted) is cut off.
 */
import type { Clock, Timer } from "../shared/clock.js";
import type { JournalEntry } from "./event-journal.js";
import type { BuiltInEventType } from "./event-types.js";

/** Opens the general event stream (and gets its tickets). */
export const EVENTS_VIEW = "events.view";
/** How often an open stream reads its user's permissions again. */
export const EVENT_STREAM_PERMISSIONS_REFRESH_MS = 5_000;

/** The view permission each built-in type needs besides {@link EVENTS_VIEW}: the surface whose data it carries. */
export const EVENT_SURFACE_PERMISSIONS: { readonly [K in BuiltInEventType]: string } = {
  NODE_CONNECTED: "nodes.view",
  NODE_DISCONNECTED: "nodes.view",
  NODE_STATUS: "nodes.view",
  NODE_HEARTBEAT_STALE: "nodes.view",
  NODE_HEARTBEAT_RESUMED: "nodes.view",
  NODE_DRAIN_REQUESTED: "nodes.view",
  NODE_DRAIN_COMPLETED: "nodes.view",
  NODE_CACHE_STATUS: "nodes.view",
  INSTANCE_STATE_CHANGED: "instances.view",
  INSTANCE_CRASHED: "crashes.view",
  INSTANCE_DRAINING: "instances.view",
  INSTANCE_CONSOLE_OUTPUT: "instances.console",
  INSTANCE_METRICS: "instances.view",
  GROUP_CREATED: "groups.view",
  GROUP_UPDATED: "groups.view",
  GROUP_DELETED: "groups.view",
  GROUP_AGGREGATES_UPDATED: "groups.view",
  GROUP_MAINTENANCE_CHANGED: "groups.view",
  GROUP_CRASH_LOOP: "groups.view",
  DEPLOYMENT_CREATED: "deployments.view",
  DEPLOYMENT_COMPLETED: "deployments.view",
  PLAYER_CONNECTED: "players.view",
  PLAYER_DISCONNECTED: "players.view",
  PLAYER_TRANSFER: "players.view",
  PLAYER_JOURNEY: "players.view",
  TEMPLATE_UPDATED: "templates.view",
  MAINTENANCE_UPDATED: "system.view",
  MODULE_LOADED: "modules.view",
  MODULE_UNLOADED: "modules.view",
  MODULE_FRONTEND_RELOADED: "modules.view",
  CAPABILITY_REGISTERED: "modules.view",
  CAPABILITY_UNREGISTERED: "modules.view",
  CAPABILITY_PROVIDER_CHANGED: "modules.view",
  CLUSTER_CONFIG_CHANGED: "CLUSTER_VIEW",
  CHOREOGRAPHY_OVERLAY_ACTIVATED: "groups.view",
  CHOREOGRAPHY_OVERLAY_DEACTIVATED: "groups.view",
};

const SURFACES: ReadonlyMap<string, string> = new Map(Object.entries(EVENT_SURFACE_PERMISSIONS));

/** Whether a holder of `permissions` (who holds {@link EVENTS_VIEW}) receives an event of `type`. */
export function mayReceive(type: string, permissions: ReadonlySet<string>): boolean {
  const surface = SURFACES.get(type);
  return surface === undefined || permissions.has(surface);
}

/** Reads a user's permissions now; null when the user no longer exists. */
export type PermissionsOf = (username: string) => Promise<ReadonlySet<string> | null>;

/** Options of {@link watchStreamAccess}. */
export interface StreamAccessOptions {
  username: string;
  /** The permissions read when the stream opened (they held {@link EVENTS_VIEW}). */
  permissions: ReadonlySet<string>;
  permissionsOf: PermissionsOf;
  clock: Clock;
  refreshMs?: number;
  /** The user lost {@link EVENTS_VIEW} or no longer exists: the stream must end. Called at most once. */
  onLost(): void;
  /** A read of the permissions failed; the last ones stay in force until the next read. */
  onRefreshFailed?(err: unknown): void;
}

/** A user's view of the stream while it is open. */
export interface StreamAccess {
  accept(entry: JournalEntry): boolean;
  stop(): void;
}

/** Filters one user's stream by the permissions the user holds now, read again every refresh. */
export function watchStreamAccess(options: StreamAccessOptions): StreamAccess {
  let permissions = options.permissions;
  let lost = false;
  let reading = false;
  const timer: Timer = options.clock.setInterval(
    () => {
      if (reading || lost) return;
      reading = true;
      options.permissionsOf(options.username).then(
        (current) => {
          reading = false;
          if (lost) return;
          if (current === null || !current.has(EVENTS_VIEW)) {
            lost = true;
            timer.cancel();
            options.onLost();
            return;
          }
          permissions = current;
        },
        (err: unknown) => {
          reading = false;
          options.onRefreshFailed?.(err);
        },
      );
    },
    options.refreshMs ?? EVENT_STREAM_PERMISSIONS_REFRESH_MS,
    { unref: true },
  );
  return {
    accept: (entry) => !lost && mayReceive(entry.type, permissions),
    stop: () => timer.cancel(),
  };
}
