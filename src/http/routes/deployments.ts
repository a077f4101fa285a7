/**
 * Deployments of a group (issue 13; paths and payloads decided in docs/decisions/deployments.md):
 * create, list, show one revision with per-instance progress, pause, resume, promote and rollback.
 * Reads need deployments.view, changes deployments.manage; every change is audited.
 */
import type { Hono } from "hono";
import { Type } from "@sinclair/typebox";
import type { AuditRecorder } from "../../audit/types.js";
import {
  DeploymentCreateSchema,
  DeploymentDetailSchema,
  DeploymentRollbackSchema,
  DeploymentSchema,
  type DeploymentDetail,
} from "../../deployments/deployment-schemas.js";
import type { DeploymentService } from "../../deployments/deployment-service.js";
import { addRoute, type RouteRegistry } from "../route.js";
import { audited } from "../audited.js";
import type { AppEnv } from "../types.js";

const tag = "Deployments";
const GroupParams = Type.Object({ group: Type.String({ minLength: 1, maxLength: 256 }) });
const RevisionParams = Type.Object({ group: Type.String({ minLength: 1, maxLength: 256 }), revision: Type.Integer({ minimum: 1, maximum: 2_147_483_647 }) });

/** Mounts the deployment routes. */
export function deploymentRoutes(deployments: DeploymentService, audit: AuditRecorder): (app: Hono<AppEnv>, registry: RouteRegistry) => void {
  return (app, registry) => {
    addRoute(
      app,
      registry,
      {
        method: "post",
        path: "/api/v1/groups/:group/deployments",
        summary: "Roll the group out to a new revision (an empty body is a rolling restart); 409 DEPLOYMENT_ACTIVE while another runs",
        tag,
        permission: "deployments.manage",
        params: GroupParams,
        body: DeploymentCreateSchema,
        response: DeploymentDetailSchema,
        successStatus: 201,
      },
      async ({ params, body, principal, c }) => {
        const created = await deployments.create(params.group, body, principal?.username ?? "system");
        await audited(audit, c, {
          action: "deployment.create",
          resourceType: "group",
          resourceId: params.group,
          details: { revision: created.revision, previousRevision: created.previousRevision, settings: created.settings, changes: created.changes },
        });
        return created;
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "get",
        path: "/api/v1/groups/:group/deployments",
        summary: "The group's deployments, newest first",
        tag,
        permission: "deployments.view",
        params: GroupParams,
        response: Type.Array(DeploymentSchema),
      },
      ({ params }) => deployments.list(params.group),
    );

    addRoute(
      app,
      registry,
      {
        method: "get",
        path: "/api/v1/groups/:group/deployments/:revision",
        summary: "One deployment: its revision (template layers pinned to hashes) and per-instance progress",
        tag,
        permission: "deployments.view",
        params: RevisionParams,
        response: DeploymentDetailSchema,
      },
      ({ params }) => deployments.show(params.group, params.revision),
    );

    const control = (verb: "pause" | "resume" | "promote", summary: string, run: (group: string, revision: number) => Promise<DeploymentDetail>) =>
      addRoute(
        app,
        registry,
        {
          method: "post",
          path: `/api/v1/groups/:group/deployments/:revision/${verb}`,
          summary,
          tag,
          permission: "deployments.manage",
          params: RevisionParams,
          response: DeploymentDetailSchema,
        },
        async ({ params, c }) => {
          const result = await run(params.group, params.revision);
          await audited(audit, c, { action: `deployment.${verb}`, resourceType: "group", resourceId: params.group, details: { revision: params.revision } });
          return result;
        },
      );
    control("pause", "Pause a deployment: nothing more is started or retired (409 once finished)", (g, r) => deployments.pause(g, r));
    control("resume", "Resume a paused deployment (409 once finished)", (g, r) => deployments.resume(g, r));
    control("promote", "Promote the canaries: the rollout replaces the rest (409 NO_CANARY without canaries)", (g, r) => deployments.promote(g, r));

    addRoute(
      app,
      registry,
      {
        method: "post",
        path: "/api/v1/groups/:group/deployments/:revision/rollback",
        summary: "Stop the rollout (ROLLED_BACK); with restore true, the previous revision also replaces this one's instances",
        tag,
        permission: "deployments.manage",
        params: RevisionParams,
        body: DeploymentRollbackSchema,
        response: DeploymentDetailSchema,
      },
      async ({ params, body, principal, c }) => {
        const restore = body.restore ?? false;
        const result = await deployments.rollback(params.group, params.revision, restore, principal?.username ?? "system");
        await audited(audit, c, {
          action: "deployment.rollback",
          resourceType: "group",
          resourceId: params.group,
          details: { revision: params.revision, restore },
        });
        return result;
      },
    );
  };
}
