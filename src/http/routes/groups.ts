/** Group routes (spec document 1, "Groups"): list, get, create, PATCH, DELETE. */
import type { Hono } from "hono";
import { Type } from "@sinclair/typebox";
import type { AuditRecorder } from "../../audit/types.js";
import type { GroupService } from "../../domain/groups/group-service.js";
import { GroupCreateSchema, GroupListItemSchema, GroupPatchSchema, GroupSchema } from "../../domain/groups/group-schemas.js";
import { addRoute, type RouteRegistry } from "../route.js";
import { audited } from "../audited.js";
import type { AppEnv } from "../types.js";

const GroupParams = Type.Object({ name: Type.String({ minLength: 1, maxLength: 256 }) });
const tag = "Groups";

/** Mounts the group routes; every mutation is audited as group.create, group.update or group.delete. */
export function groupRoutes(groups: GroupService, audit: AuditRecorder): (app: Hono<AppEnv>, registry: RouteRegistry) => void {
  return (app, registry) => {
    addRoute(
      app,
      registry,
      {
        method: "get",
        path: "/api/v1/groups",
        summary: "List groups (list form)",
        tag,
        permission: "groups.view",
        response: Type.Array(GroupListItemSchema),
      },
      () => groups.list(),
    );

    addRoute(
      app,
      registry,
      {
        method: "get",
        path: "/api/v1/groups/:name",
        summary: "Get one group (full record)",
        tag,
        permission: "groups.view",
        params: GroupParams,
        response: GroupSchema,
      },
      ({ params }) => groups.get(params.name),
    );

    addRoute(
      app,
      registry,
      {
        method: "post",
        path: "/api/v1/groups",
        summary: "Create a group",
        tag,
        permission: "groups.create",
        body: GroupCreateSchema,
        response: GroupSchema,
        successStatus: 201,
      },
      async ({ body, c }) => {
        const created = await groups.create(body);
        await audited(audit, c, { action: "group.create", resourceType: "group", resourceId: created.name, after: created });
        return created;
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "patch",
        path: "/api/v1/groups/:name",
        summary: "Change minInstances, maxInstances, memoryMb, routing, scalingMode, maintenance or loadScaling",
        tag,
        permission: "groups.update",
        params: GroupParams,
        body: GroupPatchSchema,
        response: GroupSchema,
      },
      async ({ params, body, c }) => {
        const { before, after } = await groups.update(params.name, body);
        await audited(audit, c, { action: "group.update", resourceType: "group", resourceId: params.name, details: { changes: body }, before, after });
        return after;
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "delete",
        path: "/api/v1/groups/:name",
        summary: "Delete a group; its running instances are stopped",
        tag,
        permission: "groups.delete",
        params: GroupParams,
        successStatus: 204,
      },
      async ({ params, c }) => {
        const before = await groups.delete(params.name);
        await audited(audit, c, { action: "group.delete", resourceType: "group", resourceId: params.name, before });
        return c.body(null, 204);
      },
    );
  };
}
