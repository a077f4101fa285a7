/**
 * The cluster-shared config (docs/decisions/cluster-config.md): read the active version with the
 * values in force on this controller (`GET /api/v1/cluster/config`, CLUSTER_VIEW), patch it
 * (`PATCH /api/v1/cluster/config`, CLUSTER_MANAGE, audited as cluster.config.patched) and roll it
 * back to an earlier version (`POST /api/v1/cluster/config/rollback`, CLUSTER_MANAGE, audited as
 * cluster.config.rolled_back). The version history is `GET /api/v1/cluster/config/versions`.
 */
import type { Hono } from "hono";
import { Type } from "@sinclair/typebox";
import type { AuditRecorder } from "../../audit/types.js";
import type { ClusterConfigAdmin, ConfigChange } from "../../cluster/state/cluster-config-admin.js";
import { SHARED_SETTING_KEYS } from "../../cluster/state/shared-settings.js";
import { addRoute, type RouteRegistry } from "../route.js";
import { audited } from "../audited.js";
import type { AppEnv } from "../types.js";

/** What the routes read of this controller's settings. */
export interface SettingsView {
  clusterVersion(): number | null;
  effective(): { key: string; value: number | boolean; source: "cluster" | "controller.yml" }[];
}

export interface ClusterConfigRouteDeps {
  admin: ClusterConfigAdmin;
  settings: SettingsView;
  active(): { version: number | null; config: Readonly<Record<string, unknown>> };
  audit: AuditRecorder;
}

const tag = "Cluster";
const Effective = Type.Array(Type.Object({ key: Type.String(), value: Type.Union([Type.Number(), Type.Boolean()]), source: Type.String() }));
const ConfigView = Type.Object({
  activeVersion: Type.Union([Type.Integer(), Type.Null()]),
  config: Type.Record(Type.String(), Type.Unknown()),
  /** Each cluster-shared key's value in force on the controller that answers, and where it comes from. */
  effective: Effective,
  keys: Type.Array(Type.String()),
});
const ChangeView = Type.Object({
  changed: Type.Boolean(),
  activeVersion: Type.Union([Type.Integer(), Type.Null()]),
  parentVersion: Type.Union([Type.Integer(), Type.Null()]),
  config: Type.Record(Type.String(), Type.Unknown()),
});

/** Mounts the cluster config routes. */
export function clusterConfigRoutes(deps: ClusterConfigRouteDeps): (app: Hono<AppEnv>, registry: RouteRegistry) => void {
  const view = (change: ConfigChange) => ({
    changed: change.changed,
    activeVersion: change.version,
    parentVersion: change.parentVersion,
    config: change.after,
  });
  return (app, registry) => {
    addRoute(
      app,
      registry,
      {
        method: "get",
        path: "/api/v1/cluster/config",
        summary: "The active cluster-shared config and the values in force on this controller",
        tag,
        permission: "CLUSTER_VIEW",
        response: ConfigView,
      },
      () => {
        const active = deps.active();
        return { activeVersion: active.version, config: { ...active.config }, effective: deps.settings.effective(), keys: [...SHARED_SETTING_KEYS] };
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "patch",
        path: "/api/v1/cluster/config",
        summary: "Set (or with null remove) cluster-shared keys: a new config version (CLUSTER_CONFIG_CHANGED)",
        tag,
        permission: "CLUSTER_MANAGE",
        body: Type.Object(
          {
            settings: Type.Record(Type.String({ maxLength: 128 }), Type.Union([Type.Number(), Type.Boolean(), Type.Null()]), { maxProperties: 64 }),
            comment: Type.Optional(Type.String({ maxLength: 500 })),
          },
          { additionalProperties: false },
        ),
        response: ChangeView,
      },
      async ({ body, principal, c }) => {
        const change = await deps.admin.patch(body.settings, body.comment ?? "", principal?.username ?? "system");
        if (change.changed) {
          await audited(deps.audit, c, {
            action: "cluster.config.patched",
            resourceType: "cluster-config",
            resourceId: String(change.version),
            details: { version: change.version, parentVersion: change.parentVersion, settings: body.settings },
            before: change.before,
            after: change.after,
          });
        }
        return view(change);
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "post",
        path: "/api/v1/cluster/config/rollback",
        summary: "Make an earlier config version the active one again (CLUSTER_CONFIG_CHANGED); 404 CONFIG_VERSION_NOT_FOUND",
        tag,
        permission: "CLUSTER_MANAGE",
        body: Type.Object({ version: Type.Integer({ minimum: 1 }) }, { additionalProperties: false }),
        response: ChangeView,
      },
      async ({ body, principal, c }) => {
        const change = await deps.admin.rollback(body.version, principal?.username ?? "system");
        await audited(deps.audit, c, {
          action: "cluster.config.rolled_back",
          resourceType: "cluster-config",
          resourceId: String(change.version),
          details: { version: change.version, parentVersion: change.parentVersion },
          before: change.before,
          after: change.after,
        });
        return view(change);
      },
    );
  };
}
