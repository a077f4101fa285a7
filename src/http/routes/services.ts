/**
 * Instance routes under /api/v1/services (spec document 1, "Instances"): list and get. The list is
 * the spec's bare array; with `pageSize` or `cursor` it is keyset-paged by instance id instead
 * (`{data, pageSize, nextCursor, total}`, see `../keyset.ts`), which the dashboard uses so that a
 * network of ten thousand instances is read a page at a time.
 */
import type { Hono } from "hono";
import { Type } from "@sinclair/typebox";
import type { InstanceService } from "../../domain/instances/instance-service.js";
import { InstanceListItemSchema, InstanceSchema, InstanceStateSchema } from "../../domain/instances/instance-schemas.js";
import { addRoute, type RouteRegistry } from "../route.js";
import { KeysetPageSchema, keysetPage, PAGE_SIZE_DEFAULT, PageSizeQuery, sortedBy } from "../keyset.js";
import type { AppEnv } from "../types.js";
import type { AuditRecorder } from "../../audit/types.js";
import { audited } from "../audited.js";

/** Removes finished instance records (scheduler/instance-removal.ts). */
export interface FinishedInstanceRemoval {
  removeFinished(id: string): Promise<unknown>;
}

const tag = "Services";
/** Empty filter values are accepted and ignored. */
const ListQuery = Type.Object({
  group: Type.Optional(Type.String({ maxLength: 256 })),
  node: Type.Optional(Type.String({ maxLength: 256 })),
  state: Type.Optional(Type.Union([InstanceStateSchema, Type.Literal("")])),
  pageSize: Type.Optional(PageSizeQuery),
  cursor: Type.Optional(Type.String({ maxLength: 256, description: "Keyset paging: the id of the last instance seen; blank for the first page" })),
});

/** Mounts the instance list and get routes, and the delete of a finished instance when `removal` is given. */
export function serviceRoutes(
  instances: InstanceService,
  removal?: { removal: FinishedInstanceRemoval; audit: AuditRecorder },
): (app: Hono<AppEnv>, registry: RouteRegistry) => void {
  // Callers that share one list read (the service coalesces them) also share its encoded JSON.
  const serialized = new WeakMap<object, Uint8Array<ArrayBuffer>>();
  const toJson = (list: readonly object[]): Uint8Array<ArrayBuffer> => {
    let bytes = serialized.get(list);
    if (bytes === undefined) {
      bytes = new TextEncoder().encode(JSON.stringify(list));
      serialized.set(list, bytes);
    }
    return bytes;
  };
  return (app, registry) => {
    addRoute(
      app,
      registry,
      {
        method: "get",
        path: "/api/v1/services",
        summary: "List instances, optionally filtered by group, node and state; keyset-paged by id when pageSize or cursor is given",
        tag,
        permission: "instances.view",
        query: ListQuery,
        response: Type.Union([Type.Array(InstanceListItemSchema), KeysetPageSchema(InstanceListItemSchema)]),
      },
      async ({ query, c }) => {
        const list = await instances.list({ group: query.group, node: query.node, state: query.state || undefined });
        if (query.pageSize === undefined && query.cursor === undefined) return c.body(toJson(list), 200, { "content-type": "application/json" });
        const byId = sortedBy(list, (item) => item.id);
        return keysetPage(byId, (item) => item.id, query.cursor || null, query.pageSize ?? PAGE_SIZE_DEFAULT);
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "get",
        path: "/api/v1/services/:id",
        summary: "Get one instance",
        tag,
        permission: "instances.view",
        params: Type.Object({ id: Type.String({ minLength: 1, maxLength: 256 }) }),
        response: InstanceSchema,
      },
      ({ params }) => instances.get(params.id),
    );

    if (removal) {
      addRoute(
        app,
        registry,
        {
          method: "delete",
          path: "/api/v1/services/:id",
          summary: "Delete the record of a STOPPED or CRASHED instance: 409 INSTANCE_NOT_FINISHED while it lives, 409 STATIC_SLOT for a STATIC group's slot",
          tag,
          permission: "instances.delete",
          params: Type.Object({ id: Type.String({ minLength: 1, maxLength: 256 }) }),
          successStatus: 204,
        },
        async ({ params, c }) => {
          const before = await removal.removal.removeFinished(params.id);
          await audited(removal.audit, c, { action: "instance.delete", resourceType: "instance", resourceId: params.id, before });
          return c.body(null, 204);
        },
      );
    }
  };
}
