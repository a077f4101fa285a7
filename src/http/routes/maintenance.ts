/**
 * Global maintenance routes: `GET /api/v1/maintenance` (system.view), `PATCH /api/v1/maintenance`
 * (maintenance.manage; audited as `maintenance.update` with before and after), and the plugin's
 * read `GET /api/plugin/maintenance` (workload token). docs/decisions/maintenance.md.
 */
import type { Hono } from "hono";
import type { AuditRecorder } from "../../audit/types.js";
import type { GroupService } from "../../domain/groups/group-service.js";
import type { InstanceService } from "../../domain/instances/instance-service.js";
import { MaintenancePatchSchema, MaintenanceSchema, PluginMaintenanceSchema } from "../../domain/maintenance/maintenance-schemas.js";
import type { MaintenanceService } from "../../domain/maintenance/maintenance-service.js";
import { addRoute, type RouteRegistry } from "../route.js";
import { audited } from "../audited.js";
import type { AppEnv } from "../types.js";
import { workloadOf } from "./plugin-context.js";

export interface MaintenanceRouteDeps {
  maintenance: MaintenanceService;
  groups: Pick<GroupService, "getDoc">;
  instances: Pick<InstanceService, "getDoc">;
  audit: AuditRecorder;
}

/** Mounts the maintenance routes. */
export function maintenanceRoutes(deps: MaintenanceRouteDeps): (app: Hono<AppEnv>, registry: RouteRegistry) => void {
  return (app, registry) => {
    addRoute(
      app,
      registry,
      {
        method: "get",
        path: "/api/v1/maintenance",
        summary: "The global maintenance switch, its message and the players admitted while it is on",
        tag: "Maintenance",
        permission: "system.view",
        response: MaintenanceSchema,
      },
      () => deps.maintenance.get(),
    );

    addRoute(
      app,
      registry,
      {
        method: "patch",
        path: "/api/v1/maintenance",
        summary: "Switches global maintenance on or off, sets its message or replaces the allowed players (MAINTENANCE_UPDATED)",
        tag: "Maintenance",
        permission: "maintenance.manage",
        body: MaintenancePatchSchema,
        response: MaintenanceSchema,
      },
      async ({ body, principal, c }) => {
        const { before, after } = await deps.maintenance.update(body, principal?.username ?? "system");
        await audited(deps.audit, c, {
          action: "maintenance.update",
          resourceType: "maintenance",
          resourceId: "global",
          details: { changes: body },
          before,
          after,
        });
        return after;
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "get",
        path: "/api/plugin/maintenance",
        summary: "Whether the network and this instance's group are in maintenance, and the message refused players are shown",
        tag: "Plugin",
        auth: "workload",
        response: PluginMaintenanceSchema,
      },
      async ({ principal }) => {
        const workload = workloadOf(principal);
        const [state, instance] = await Promise.all([deps.maintenance.current(), deps.instances.getDoc(workload.instanceId)]);
        const group = instance ? await deps.groups.getDoc(instance.group) : null;
        return { globalEnabled: state.enabled, message: state.message, groupMaintenance: group?.maintenance ?? false };
      },
    );
  };
}
