/**
 * Operator routes around the plugin API: revoking workload tokens (audit actions
 * `workload-credential.revoke` and `workload-credential.revoke-instance`, spec document 2), and the
 * metrics the plugins report, per instance and per group.
 */
import type { Hono } from "hono";
import { Type } from "@sinclair/typebox";
import type { AuditRecorder } from "../../audit/types.js";
import type { GroupService } from "../../domain/groups/group-service.js";
import type { InstanceService } from "../../domain/instances/instance-service.js";
import { FINISHED_STATES } from "../../domain/instances/instance-schemas.js";
import type { MachineCredentials } from "../../plugin-api/credentials.js";
import type { InstanceMetricsService } from "../../plugin-api/instance-metrics.js";
import { isoFromMs } from "../../domain/shared/time.js";
import type { Clock } from "../../shared/clock.js";
import { notFound, validationError } from "../../shared/errors.js";
import { audited } from "../audited.js";
import { addRoute, type RouteRegistry } from "../route.js";
import type { AppEnv } from "../types.js";

export interface PluginAdminRouteDeps {
  credentials: MachineCredentials;
  instances: InstanceService;
  groups: Pick<GroupService, "getDoc">;
  metrics: InstanceMetricsService;
  audit: AuditRecorder;
  clock: Clock;
}

/** Mounts the revocation routes and the metrics reads. */
export function pluginAdminRoutes(deps: PluginAdminRouteDeps): (app: Hono<AppEnv>, registry: RouteRegistry) => void {
  return (app, registry) => {
    addRoute(
      app,
      registry,
      {
        method: "post",
        path: "/api/v1/workload-credentials/revoke",
        summary: "Revokes one workload token (for example one that leaked) and its whole refresh family, on every controller at once",
        tag: "Workload credentials",
        permission: "tokens.manage",
        body: Type.Object({ token: Type.String({ minLength: 1, maxLength: 2_048 }) }),
        response: Type.Object({ tokenId: Type.String(), instanceId: Type.String(), revoked: Type.Boolean() }),
      },
      async ({ body, c }) => {
        const revoked = await deps.credentials.revokeWorkloadToken(body.token);
        if (!revoked) throw validationError("token: not a current workload token of this cluster");
        await audited(deps.audit, c, {
          action: "workload-credential.revoke",
          resourceType: "workload-credential",
          resourceId: revoked.tokenId,
          details: { instanceId: revoked.instanceId, group: revoked.group },
        });
        return { tokenId: revoked.tokenId, instanceId: revoked.instanceId, revoked: true };
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "post",
        path: "/api/v1/services/:id/workload-credentials/revoke",
        summary: "Revokes every workload token of the instance's current start and every one issued to it so far (its next start gets a working one)",
        tag: "Workload credentials",
        permission: "tokens.manage",
        params: Type.Object({ id: Type.String({ minLength: 1, maxLength: 128 }) }),
        response: Type.Object({ instanceId: Type.String(), revokedAt: Type.String({ format: "date-time" }) }),
      },
      async ({ params, c }) => {
        const instance = await deps.instances.getDoc(params.id);
        if (!instance) throw notFound(`Instance not found: ${params.id}`);
        const revokedAt = isoFromMs(deps.clock.nowMs());
        await deps.credentials.revokeInstanceTokens(instance.id, instance.startId ?? "");
        await audited(deps.audit, c, {
          action: "workload-credential.revoke-instance",
          resourceType: "instance",
          resourceId: instance.id,
          details: { group: instance.group, node: instance.node },
        });
        return { instanceId: instance.id, revokedAt };
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "get",
        path: "/api/v1/services/:id/metrics",
        summary: "The latest metrics snapshot the instance's plugin reported (404 when none in the last 2 minutes)",
        tag: "Instances",
        permission: "instances.view",
        params: Type.Object({ id: Type.String({ minLength: 1, maxLength: 128 }) }),
      },
      async ({ params }) => {
        const snapshot = await deps.metrics.latest(params.id);
        if (!snapshot) throw notFound(`No current metrics for instance: ${params.id}`);
        return snapshot;
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "get",
        path: "/api/v1/groups/:name/metrics",
        summary: "Aggregates over the latest metrics of the group's live instances",
        tag: "Groups",
        permission: "groups.view",
        params: Type.Object({ name: Type.String({ minLength: 1, maxLength: 128 }) }),
      },
      async ({ params }) => {
        if (!(await deps.groups.getDoc(params.name))) throw notFound(`Group not found: ${params.name}`);
        const live = (await deps.instances.findDocs({ group: params.name })).filter((i) => !FINISHED_STATES.has(i.state)).map((i) => i.id);
        return deps.metrics.forGroup(params.name, live);
      },
    );
  };
}
