/** Group routes (spec document 1, "Groups"): list, get, create, PATCH, DELETE. */
import type { Hono } from "hono";
import { Type } from "@sinclair/typebox";
import type { AuditRecorder } from "../../audit/types.js";
import type { GroupService } from "../../domain/groups/group-service.js";
import { GroupCreateSchema, GroupListItemSchema, GroupPatchSchema, GroupSchema } from "../../domain/groups/group-schemas.js";
import { addRoute, type RouteRegistry } from "../route.js";
import type { AppContext, AppEnv, Principal } from "../types.js";

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
      async ({ body, principal, c }) => {
        const created = await groups.create(body);
        await audit.record({ action: "group.create", resourceType: "group", resourceId: created.name, after: created }, actorOf(principal, c));
        return created;
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "patch",
        path: "/api/v1/groups/:name",
        summary: "Change minInstances, maxInstances, memoryMb, routing, scalingMode or maintenance",
        tag,
        permission: "groups.update",
        params: GroupParams,
        body: GroupPatchSchema,
        response: GroupSchema,
      },
      async ({ params, body, principal, c }) => {
        const { before, after } = await groups.update(params.name, body);
        await audit.record(
          { action: "group.update", resourceType: "group", resourceId: params.name, details: { changes: body }, before, after },
          actorOf(principal, c),
        );
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
      async ({ params, principal, c }) => {
        const before = await groups.delete(params.name);
        await audit.record({ action: "group.delete", resourceType: "group", resourceId: params.name, before }, actorOf(principal, c));
        return c.body(null, 204);
      },
    );
  };
}

function actorOf(principal: Principal | null, c: AppContext) {
  return { username: principal?.username ?? "system", ipAddress: c.get("clientIp") ?? "" };
}
