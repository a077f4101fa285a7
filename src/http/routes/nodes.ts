/**
 * Node routes (spec document 1, "Nodes"): list with state filter, get, drain, undrain; and the
 * routes the spec leaves open (docs/decisions/node-states.md): cordon, uncordon, delete,
 * revoke-cert, unrevoke-cert.
 */
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
const DeleteQuery = Type.Object({ force: Type.Optional(Type.Boolean()) });

/** The node actions that answer the node record, each audited as `node.<path segment>`. */
const actions = [
  { path: "cordon", summary: "Cordon a node: placement skips it; its state and running instances are untouched", act: "cordon" },
  { path: "uncordon", summary: "Uncordon a cordoned node (409 INVALID_STATE otherwise)", act: "uncordon" },
  {
    path: "revoke-cert",
    summary: "Revoke a node's certificate: its daemon cannot open a stream and a live session ends",
    act: "revokeCertificate",
  },
  { path: "unrevoke-cert", summary: "Lift a certificate revocation (409 INVALID_STATE when not revoked)", act: "unrevokeCertificate" },
] as const;

/** Mounts the node routes; every change is audited as node.<action> with the record before and after. */
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

    for (const action of actions) {
      addRoute(
        app,
        registry,
        {
          method: "post",
          path: `/api/v1/nodes/:id/${action.path}`,
          summary: action.summary,
          tag,
          permission: "nodes.manage",
          params: NodeParams,
          response: NodeSchema,
        },
        async ({ params, c }) => {
          const { before, after } = await nodes[action.act](params.id);
          await audited(audit, c, { action: `node.${action.path}`, resourceType: "node", resourceId: params.id, before, after });
          return after;
        },
      );
    }

    addRoute(
      app,
      registry,
      {
        method: "delete",
        path: "/api/v1/nodes/:id",
        summary: "Delete an UNREACHABLE or OFFLINE node (409 while connected, or while instances are live unless force=true)",
        tag,
        permission: "nodes.manage",
        params: NodeParams,
        query: DeleteQuery,
        successStatus: 204,
      },
      async ({ params, query, c }) => {
        const before = await nodes.delete(params.id, { force: query.force === true });
        await audited(audit, c, { action: "node.delete", resourceType: "node", resourceId: params.id, before, details: { force: query.force === true } });
        return c.body(null, 204);
      },
    );
  };
}
