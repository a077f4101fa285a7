/** Node routes (spec document 1, "Nodes"): list with state filter, get, drain, undrain. */
import type { Hono } from "hono";
import { Type } from "@sinclair/typebox";
import type { AuditRecorder } from "../../audit/types.js";
import type { NodeService } from "../../domain/nodes/node-service.js";
import { NodeSchema, NodeStateSchema } from "../../domain/nodes/node-schemas.js";
import { addRoute, type RouteRegistry } from "../route.js";
import { audited } from "../audited.js";
import type { AppEnv } from "../types.js";

const tag = "Nodes";
const NodeParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 256 }) });
const ListQuery = Type.Object({ state: Type.Optional(Type.Union([NodeStateSchema, Type.Literal("")])) });

/** Mounts the node routes; drain and undrain are audited as node.drain and node.undrain. */
export function nodeRoutes(nodes: NodeService, audit: AuditRecorder): (app: Hono<AppEnv>, registry: RouteRegistry) => void {
  return (app, registry) => {
    addRoute(
      app,
      registry,
      {
        method: "get",
        path: "/api/v1/nodes",
        summary: "List nodes, optionally in one state",
        tag,
        permission: "nodes.view",
        query: ListQuery,
        response: Type.Array(NodeSchema),
      },
      ({ query }) => nodes.list(query.state || undefined),
    );

    addRoute(
      app,
      registry,
      {
        method: "get",
        path: "/api/v1/nodes/:id",
        summary: "Get one node",
        tag,
        permission: "nodes.view",
        params: NodeParams,
        response: NodeSchema,
      },
      ({ params }) => nodes.get(params.id),
    );

    addRoute(
      app,
      registry,
      {
        method: "post",
        path: "/api/v1/nodes/:id/drain",
        summary: "Drain a node: no new placements; running instances continue",
        tag,
        permission: "nodes.manage",
        params: NodeParams,
        response: NodeSchema,
      },
      async ({ params, c }) => {
        const { before, after } = await nodes.drain(params.id);
        await audited(audit, c, { action: "node.drain", resourceType: "node", resourceId: params.id, before, after });
        return after;
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "post",
        path: "/api/v1/nodes/:id/undrain",
        summary: "Undrain a DRAINING node: placement resumes (409 INVALID_STATE otherwise)",
        tag,
        permission: "nodes.manage",
        params: NodeParams,
        response: NodeSchema,
      },
      async ({ params, c }) => {
        const { before, after } = await nodes.undrain(params.id);
        await audited(audit, c, { action: "node.undrain", resourceType: "node", resourceId: params.id, before, after });
        return after;
      },
    );
  };
}

