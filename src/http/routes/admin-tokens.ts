/**
 * Node join token routes (spec document 1, "Node join tokens"): create (the value is returned once),
 * list (never the value or its hash), revoke (204).
 */
import type { Hono } from "hono";
import { Type } from "@sinclair/typebox";
import type { AuditRecorder } from "../../audit/types.js";
import type { NodeTokenService } from "../../domain/node-tokens/node-token-service.js";
import { CreatedNodeTokenSchema, NodeTokenCreateSchema, NodeTokenSchema } from "../../domain/node-tokens/node-token-schemas.js";
import { addRoute, type RouteRegistry } from "../route.js";
import { audited } from "../audited.js";
import type { AppEnv } from "../types.js";

const tag = "Tokens";

/** Mounts the token routes; audited as token.create and token.revoke (never with the value). */
export function adminTokenRoutes(tokens: NodeTokenService, audit: AuditRecorder): (app: Hono<AppEnv>, registry: RouteRegistry) => void {
  return (app, registry) => {
    addRoute(
      app,
      registry,
      {
        method: "post",
        path: "/api/v1/admin/tokens",
        summary: "Create a node join token (optional nodeId; ttlSeconds or ttl such as 1h; default 1h)",
        tag,
        permission: "tokens.manage",
        body: NodeTokenCreateSchema,
        response: CreatedNodeTokenSchema,
        successStatus: 201,
      },
      async ({ body, principal, c }) => {
        const created = await tokens.create(body, principal?.username ?? "system");
        const { token: _secret, ...record } = created;
        await audited(audit, c, {
          action: "token.create",
          resourceType: "token",
          resourceId: created.id,
          details: { nodeId: created.nodeId, expiresAt: created.expiresAt },
          after: record,
        });
        return created;
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "get",
        path: "/api/v1/admin/tokens",
        summary: "List node join tokens (without values)",
        tag,
        permission: "tokens.manage",
        response: Type.Array(NodeTokenSchema),
      },
      () => tokens.list(),
    );

    addRoute(
      app,
      registry,
      {
        method: "delete",
        path: "/api/v1/admin/tokens/:id",
        summary: "Revoke a node join token",
        tag,
        permission: "tokens.manage",
        params: Type.Object({ id: Type.String({ minLength: 1, maxLength: 256 }) }),
        successStatus: 204,
      },
      async ({ params, c }) => {
        const before = await tokens.revoke(params.id);
        await audited(audit, c, { action: "token.revoke", resourceType: "token", resourceId: params.id, before });
        return c.body(null, 204);
      },
    );
  };
}
