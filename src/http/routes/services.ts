/** Instance routes under /api/v1/services (spec document 1, "Instances"): list and get. */
import type { Hono } from "hono";
import { Type } from "@sinclair/typebox";
import type { InstanceService } from "../../domain/instances/instance-service.js";
import { InstanceListItemSchema, InstanceSchema, InstanceStateSchema } from "../../domain/instances/instance-schemas.js";
import { addRoute, type RouteRegistry } from "../route.js";
import type { AppEnv } from "../types.js";

const tag = "Services";
/** Empty filter values are accepted and ignored. */
const ListQuery = Type.Object({
  group: Type.Optional(Type.String({ maxLength: 256 })),
  node: Type.Optional(Type.String({ maxLength: 256 })),
  state: Type.Optional(Type.Union([InstanceStateSchema, Type.Literal("")])),
});

/** Mounts the read-only instance routes. */
export function serviceRoutes(instances: InstanceService): (app: Hono<AppEnv>, registry: RouteRegistry) => void {
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
        summary: "List instances, optionally filtered by group, node and state",
        tag,
        permission: "instances.view",
        query: ListQuery,
        response: Type.Array(InstanceListItemSchema),
      },
      async ({ query, c }) => {
        const list = await instances.list({ group: query.group, node: query.node, state: query.state || undefined });
        return c.body(toJson(list), 200, { "content-type": "application/json" });
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
  };
}
