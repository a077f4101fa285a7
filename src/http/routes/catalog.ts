/**
 * The software catalog routes (docs/decisions/catalog.md): builds listed, added, changed,
 * recommended and removed (audited as catalog.add, catalog.update, catalog.recommend and
 * catalog.remove), and the mirrored build's bytes for daemons (`GET /api/v1/catalog/artifacts/{sha256}`,
 * their node credential holds catalog.view).
 */
import type { Hono } from "hono";
import { Type } from "@sinclair/typebox";
import type { AuditRecorder } from "../../audit/types.js";
import type { BuildMirror } from "../../catalog/build-mirror.js";
import { BuildCreateSchema, BuildPatchSchema, BuildSchema, CATALOG_VERSION_PATTERN, SHA256_PATTERN } from "../../catalog/catalog-schemas.js";
import type { CatalogService } from "../../catalog/catalog-service.js";
import { notFound } from "../../shared/errors.js";
import { addRoute, type RouteRegistry } from "../route.js";
import { audited } from "../audited.js";
import type { AppEnv } from "../types.js";

const tag = "Catalog";
const BuildParams = Type.Object({
  platform: Type.String({ minLength: 1, maxLength: 64 }),
  version: Type.String({ pattern: CATALOG_VERSION_PATTERN }),
});

export interface CatalogRouteDeps {
  catalog: CatalogService;
  mirror: BuildMirror;
  audit: AuditRecorder;
}

/** Mounts the catalog routes. */
export function catalogRoutes(deps: CatalogRouteDeps): (app: Hono<AppEnv>, registry: RouteRegistry) => void {
  const { catalog, audit } = deps;
  const actor = (username: string | undefined) => username ?? "system";
  return (app, registry) => {
    addRoute(
      app,
      registry,
      {
        method: "get",
        path: "/api/v1/catalog/builds",
        summary: "Platform builds, by platform, newest version first (query platform)",
        tag,
        permission: "catalog.view",
        query: Type.Object({ platform: Type.Optional(Type.String({ maxLength: 64 })) }),
        response: Type.Array(BuildSchema),
      },
      ({ query }) => catalog.list(query.platform || undefined),
    );

    addRoute(
      app,
      registry,
      {
        method: "get",
        path: "/api/v1/catalog/builds/:platform/:version",
        summary: "One build; 404 BUILD_NOT_FOUND",
        tag,
        permission: "catalog.view",
        params: BuildParams,
        response: BuildSchema,
      },
      ({ params }) => catalog.get(params.platform, params.version),
    );

    addRoute(
      app,
      registry,
      {
        method: "post",
        path: "/api/v1/catalog/builds",
        summary: "Add a build (platform, version, downloadUrl, sha256, recommended); 409 BUILD_EXISTS",
        tag,
        permission: "catalog.manage",
        body: BuildCreateSchema,
        response: BuildSchema,
        successStatus: 201,
      },
      async ({ body, principal, c }) => {
        const created = await catalog.add(body, actor(principal?.username));
        await audited(audit, c, { action: "catalog.add", resourceType: "build", resourceId: `${created.platform}:${created.version}`, after: created });
        return created;
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "patch",
        path: "/api/v1/catalog/builds/:platform/:version",
        summary: "Change a build's downloadUrl or sha256 (frozen revisions keep theirs: a deployment rolls it out)",
        tag,
        permission: "catalog.manage",
        params: BuildParams,
        body: BuildPatchSchema,
        response: BuildSchema,
      },
      async ({ params, body, principal, c }) => {
        const { before, after } = await catalog.update(params.platform, params.version, body, actor(principal?.username));
        await audited(audit, c, {
          action: "catalog.update",
          resourceType: "build",
          resourceId: `${after!.platform}:${after!.version}`,
          details: { changes: body },
          before,
          after,
        });
        return after;
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "post",
        path: "/api/v1/catalog/builds/:platform/:version/recommend",
        summary: "Make a build its platform's recommended one (the default platformVersion of new groups)",
        tag,
        permission: "catalog.manage",
        params: BuildParams,
        response: BuildSchema,
      },
      async ({ params, principal, c }) => {
        const { before, after } = await catalog.recommend(params.platform, params.version, actor(principal?.username));
        await audited(audit, c, { action: "catalog.recommend", resourceType: "build", resourceId: `${after!.platform}:${after!.version}`, before, after });
        return after;
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "delete",
        path: "/api/v1/catalog/builds/:platform/:version",
        summary: "Remove a build no group names; 409 BUILD_IN_USE",
        tag,
        permission: "catalog.manage",
        params: BuildParams,
        successStatus: 204,
      },
      async ({ params, c }) => {
        const before = await catalog.remove(params.platform, params.version);
        await audited(audit, c, { action: "catalog.remove", resourceType: "build", resourceId: `${before.platform}:${before.version}`, before });
        return c.body(null, 204);
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "get",
        path: "/api/v1/catalog/artifacts/:sha256",
        summary: "A mirrored build's bytes (daemons fetch builds here with their node credential); 404 BUILD_NOT_MIRRORED",
        tag,
        permission: "catalog.view",
        params: Type.Object({ sha256: Type.String({ pattern: SHA256_PATTERN }) }),
      },
      async ({ params }) => {
        const opened = await deps.mirror.open(params.sha256);
        if (!opened) throw notFound(`Build ${params.sha256} is not mirrored by the controllers`, "BUILD_NOT_MIRRORED");
        return new Response(opened.stream, { headers: { "content-type": "application/octet-stream", "content-length": String(opened.size) } });
      },
    );
  };
}
