/**
 * Recorded shares (docs/decisions/logs.md, "Sharing"): `GET /api/v1/shares` (newest first, `limit`
 * 1 to 500, default 100), `GET /api/v1/shares/{id}` and `DELETE /api/v1/shares/{id}`, which revokes
 * the share: the paste service deletes the paste and the record is marked revoked (200 with the
 * record). Permission share.invoke. Answers never carry a delete token. Revokes are audited as
 * `share.revoke`; the share routes audit `share.create` through {@link auditShareCreated}.
 */
import type { Hono } from "hono";
import { Type } from "@sinclair/typebox";
import type { AuditRecorder } from "../../audit/types.js";
import { SHARE_LIST_LIMIT_DEFAULT, SHARE_LIST_LIMIT_MAX } from "../../share/share-records.js";
import type { ShareResult, ShareService } from "../../share/share-service.js";
import { audited } from "../audited.js";
import { addRoute, type RouteRegistry } from "../route.js";
import type { AppContext, AppEnv } from "../types.js";
import { ShareRecordSchema } from "./share-schemas.js";

const tag = "Shares";

/** Audits a share just made (without its password or delete link). */
export async function auditShareCreated(audit: AuditRecorder, c: AppContext, result: ShareResult): Promise<void> {
  await audited(audit, c, {
    action: "share.create",
    resourceType: "share",
    resourceId: result.id,
    details: { kind: result.kind, expiry: result.expiry, public: result.public, burnAfterRead: result.burnAfterRead, sizeChars: result.sizeChars },
  });
}

export interface ShareRoutesDeps {
  share: Pick<ShareService, "list" | "get" | "revoke">;
  audit: AuditRecorder;
}

/** Mounts the share record routes. */
export function shareRoutes(deps: ShareRoutesDeps): (app: Hono<AppEnv>, registry: RouteRegistry) => void {
  const IdParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 64 }) });
  return (app, registry) => {
    addRoute(
      app,
      registry,
      {
        method: "get",
        path: "/api/v1/shares",
        summary: "Recorded shares, newest first (revoked ones included; expired ones gone); never a delete token",
        tag,
        permission: "share.invoke",
        query: Type.Object({
          limit: Type.Optional(
            Type.Integer({ minimum: 1, maximum: SHARE_LIST_LIMIT_MAX, description: `At most this many (default ${SHARE_LIST_LIMIT_DEFAULT})` }),
          ),
        }),
        response: Type.Array(ShareRecordSchema),
      },
      ({ query }) => deps.share.list(query.limit),
    );

    addRoute(
      app,
      registry,
      {
        method: "get",
        path: "/api/v1/shares/:id",
        summary: "One recorded share",
        tag,
        permission: "share.invoke",
        params: IdParams,
        response: ShareRecordSchema,
      },
      ({ params }) => deps.share.get(params.id),
    );

    addRoute(
      app,
      registry,
      {
        method: "delete",
        path: "/api/v1/shares/:id",
        summary:
          "Revokes a share: the paste service deletes the paste, then the record is marked revoked (409 SHARE_ALREADY_REVOKED, 409 SHARE_NOT_REVOCABLE without a delete token, 502 PASTE_UPSTREAM_ERROR leaves it revocable)",
        tag,
        permission: "share.invoke",
        params: IdParams,
        response: ShareRecordSchema,
      },
      async ({ params, principal, c }) => {
        const { before, after } = await deps.share.revoke(params.id, principal?.username ?? "system");
        await audited(deps.audit, c, { action: "share.revoke", resourceType: "share", resourceId: params.id, before, after });
        return after;
      },
    );
  };
}
