/**
 * `GET /api/v1/audit` (permission audit.view). Page mode by default (`page` from 1, `pageSize`
 * clamped 1..500, default 100; deprecated `offset`/`limit` aliases); keyset mode when `cursor` is
 * present (blank = newest page). Both newest first.
 */
import { Hono } from "hono";
import { Type } from "@sinclair/typebox";
import type { AuditService } from "../../audit/audit-service.js";
import { clampAuditPageSize } from "../../audit/audit-service.js";
import { addRoute, type RouteModule } from "../route.js";
import type { AppEnv } from "../types.js";

export const AuditRecordSchema = Type.Object({
  id: Type.Integer({ description: "Hash of _id; not sequential, not a cursor" }),
  _id: Type.String({ description: "Time-ordered ObjectId; the keyset cursor" }),
  username: Type.String(),
  action: Type.String(),
  resourceType: Type.String(),
  resourceId: Type.String(),
  details: Type.String({ description: "JSON text" }),
  before: Type.Optional(Type.Union([Type.String(), Type.Null()])),
  after: Type.Optional(Type.Union([Type.String(), Type.Null()])),
  ipAddress: Type.String(),
  createdAt: Type.String({ format: "date-time" }),
});

export const AuditQuerySchema = Type.Object({
  page: Type.Optional(Type.Integer({ description: "1-based page (page mode)" })),
  pageSize: Type.Optional(Type.Integer({ description: "Clamped to 1..500; default 100" })),
  offset: Type.Optional(Type.Integer({ description: "Deprecated: records to skip (page mode)" })),
  limit: Type.Optional(Type.Integer({ description: "Deprecated alias of pageSize" })),
  cursor: Type.Optional(Type.String({ description: "Keyset mode: _id of the last record seen; blank for the newest page" })),
  username: Type.Optional(Type.String()),
  action: Type.Optional(Type.String()),
  resourceType: Type.Optional(Type.String()),
});

export const AuditResponseSchema = Type.Union([
  Type.Object({ data: Type.Array(AuditRecordSchema), page: Type.Integer(), pageSize: Type.Integer(), total: Type.Integer() }),
  Type.Object({
    data: Type.Array(AuditRecordSchema),
    pageSize: Type.Integer(),
    nextCursor: Type.Union([Type.String(), Type.Null()]),
    total: Type.Integer(),
  }),
]);

export const auditRoutes =
  (deps: { audit: AuditService }): RouteModule =>
  (app, registry) => {
    const sub = new Hono<AppEnv>();
    addRoute(
      sub,
      registry,
      {
        method: "get",
        path: "/api/v1/audit",
        summary: "Read the audit log, newest first (page or keyset mode)",
        tag: "audit",
        permission: "audit.view",
        query: AuditQuerySchema,
        response: AuditResponseSchema,
      },
      ({ query }) => {
        const pageSize = clampAuditPageSize(query.pageSize ?? query.limit);
        const filter = { username: query.username, action: query.action, resourceType: query.resourceType };
        if (query.cursor !== undefined) return deps.audit.keyset({ cursor: query.cursor, pageSize, filter });
        const skip = query.page !== undefined ? (Math.max(1, query.page) - 1) * pageSize : Math.max(0, query.offset ?? 0);
        return deps.audit.page({ skip: Math.min(skip, Number.MAX_SAFE_INTEGER), pageSize, filter });
      },
    );
    app.route("/", sub);
  };
