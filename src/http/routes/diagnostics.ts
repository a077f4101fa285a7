/**
 * Diagnostics and sharing (spec document 2): `GET /api/v1/system/diagnostics` (the redacted support
 * bundle; permission system.diagnostics, ADMIN only by default), `POST
 * /api/v1/system/diagnostics/share` and `POST /api/v1/crashes/{id}/share` (share.invoke, plus the
 * permission that reads what is shared). Query names of the bundle: `logLines` (0 to 2,000, default
 * 500; 0 leaves the log out) and `logLevel` (minimum level of those lines, default DEBUG).
 */
import type { Hono } from "hono";
import { Type } from "@sinclair/typebox";
import type { CrashService } from "../../domain/crashes/crash-service.js";
import { DIAGNOSTICS_LOG_LINES_MAX, type DiagnosticsService } from "../../diagnostics/diagnostics-service.js";
import { redactValue } from "../../diagnostics/redaction.js";
import type { AuditRecorder } from "../../audit/types.js";
import type { ShareService } from "../../share/share-service.js";
import { forbidden } from "../../shared/errors.js";
import type { Principal } from "../../auth/principal.js";
import { addRoute, type RouteRegistry } from "../route.js";
import type { AppEnv } from "../types.js";
import { parseLevel } from "./logs.js";
import { ShareOptionsSchema, ShareResultSchema } from "./share-schemas.js";
import { auditShareCreated } from "./shares.js";

const BundleQueryFields = {
  logLines: Type.Optional(Type.Integer({ minimum: 0, maximum: DIAGNOSTICS_LOG_LINES_MAX, description: "Log records included (default 500; 0 for none)" })),
  logLevel: Type.Optional(Type.String({ maxLength: 16, description: "Minimum level of the included records (default DEBUG)" })),
};

const DiagnosticsSchema = Type.Object({
  generatedAt: Type.String({ format: "date-time" }),
  readiness: Type.Object({ status: Type.String(), checks: Type.Record(Type.String(), Type.Boolean()) }),
  overview: Type.Unknown(),
  settings: Type.Record(Type.String(), Type.Unknown()),
  config: Type.Unknown(),
  kv: Type.Object({ keyCount: Type.Integer(), prefixes: Type.Record(Type.String(), Type.Integer()) }),
  leases: Type.Object({ cluster: Type.Unknown(), kv: Type.Array(Type.Unknown()) }),
  logs: Type.Object({ records: Type.Array(Type.Unknown()), size: Type.Integer(), capacity: Type.Integer(), level: Type.String() }),
});

const requirePermission = (principal: Principal | null, permission: string) => {
  if (!principal?.permissions.has(permission)) throw forbidden(`Missing permission: ${permission}`);
};

const username = (principal: Principal | null) => principal?.username ?? "system";

export interface DiagnosticsRoutesDeps {
  diagnostics: DiagnosticsService;
  share: ShareService;
  crashes: Pick<CrashService, "get">;
  audit: AuditRecorder;
}

/** Mounts the diagnostics and share routes. */
export function diagnosticsRoutes(deps: DiagnosticsRoutesDeps): (app: Hono<AppEnv>, registry: RouteRegistry) => void {
  return (app, registry) => {
    addRoute(
      app,
      registry,
      {
        method: "get",
        path: "/api/v1/system/diagnostics",
        summary: "Redacted support data: readiness, overview, settings, config, key-value summary, leases and recent logs",
        tag: "system",
        permission: "system.diagnostics",
        query: Type.Object(BundleQueryFields),
        response: DiagnosticsSchema,
      },
      async ({ query }) => deps.diagnostics.collect({ logLines: query.logLines, logLevel: parseLevel(query.logLevel) }),
    );

    addRoute(
      app,
      registry,
      {
        method: "post",
        path: "/api/v1/system/diagnostics/share",
        summary: "Uploads the redacted diagnostics bundle to the paste service and answers its link",
        tag: "system",
        permission: "share.invoke",
        body: Type.Object({ ...BundleQueryFields, ...ShareOptionsSchema.properties }, { additionalProperties: false }),
        response: ShareResultSchema,
      },
      async ({ body, principal, c }) => {
        requirePermission(principal, "system.diagnostics");
        deps.share.requireEnabled();
        const level = parseLevel(body.logLevel);
        const text = await deps.diagnostics.collectText({ logLines: body.logLines, logLevel: level });
        const shared = await deps.share.share(
          "diagnostics",
          text,
          { expiry: body.expiry, public: body.public, burnAfterRead: body.burnAfterRead },
          username(principal),
        );
        await auditShareCreated(deps.audit, c, shared);
        return shared;
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "post",
        path: "/api/v1/crashes/:id/share",
        summary: "Uploads a redacted crash report (record and last console lines) to the paste service and answers its link",
        tag: "Crashes",
        permission: "share.invoke",
        params: Type.Object({ id: Type.String({ minLength: 1, maxLength: 256 }) }),
        body: ShareOptionsSchema,
        response: ShareResultSchema,
      },
      async ({ params, body, principal, c }) => {
        requirePermission(principal, "crashes.view");
        deps.share.requireEnabled();
        const crash = redactValue(await deps.crashes.get(params.id), await deps.diagnostics.knownSecrets());
        const { logTail, ...record } = crash;
        const text = `${JSON.stringify(record, null, 2)}\n\n--- last console lines (${logTail.length}) ---\n${logTail.join("\n")}\n`;
        const shared = await deps.share.share("crash", text, body, username(principal));
        await auditShareCreated(deps.audit, c, shared);
        return shared;
      },
    );
  };
}
