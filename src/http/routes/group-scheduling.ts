/**
 * Scheduler operations on a group: `POST /api/v1/groups/{group}/start` (spec document 1: a result
 * object with an optional count of instances scheduled) and `POST /api/v1/groups/{group}/resume`
 * (ends a crash-loop pause; docs/decisions/scheduler.md).
 */
import type { Hono } from "hono";
import { Type } from "@sinclair/typebox";
import type { AuditRecorder } from "../../audit/types.js";
import type { GroupService } from "../../domain/groups/group-service.js";
import { GroupSchema } from "../../domain/groups/group-schemas.js";
import { addRoute, type RouteRegistry } from "../route.js";
import { audited } from "../audited.js";
import type { AppEnv } from "../types.js";

const tag = "Groups";
const GroupParams = Type.Object({ group: Type.String({ minLength: 1, maxLength: 256 }) });

/** What the routes need of the scheduler. */
export interface GroupOperations {
  startExplicitly(group: string): Promise<{ count: number; reason?: string }>;
  resume(group: string): Promise<void>;
}

/** The start result: how many instances were scheduled, and why none when none. */
export const StartResultSchema = Type.Object({ count: Type.Integer({ minimum: 0 }), reason: Type.Optional(Type.String()) });

/** Mounts start (audited as group.start) and resume (audited as group.resume). */
export function groupSchedulingRoutes(
  groups: GroupService,
  operations: GroupOperations,
  audit: AuditRecorder,
): (app: Hono<AppEnv>, registry: RouteRegistry) => void {
  return (app, registry) => {
    addRoute(
      app,
      registry,
      {
        method: "post",
        path: "/api/v1/groups/:group/start",
        summary: "Schedule instances now, as many as the scaling mode allows",
        tag,
        permission: "groups.start",
        params: GroupParams,
        response: StartResultSchema,
      },
      async ({ params, c }) => {
        await groups.get(params.group);
        const result = await operations.startExplicitly(params.group);
        await audited(audit, c, { action: "group.start", resourceType: "group", resourceId: params.group, details: result });
        return result;
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "post",
        path: "/api/v1/groups/:group/resume",
        summary: "Resume a group paused by a crash loop (a group that is not paused is returned unchanged)",
        tag,
        permission: "groups.update",
        params: GroupParams,
        response: GroupSchema,
      },
      async ({ params, c }) => {
        const before = await groups.get(params.group);
        if (!before.paused) return before;
        await operations.resume(params.group);
        const after = await groups.get(params.group);
        await audited(audit, c, { action: "group.resume", resourceType: "group", resourceId: params.group, before, after });
        return after;
      },
    );
  };
}
