/** `GET /api/v1/openapi.json`: the OpenAPI 3.1 document of every registered route (public). */
import { Hono } from "hono";
import { Type } from "@sinclair/typebox";
import { buildOpenApiDocument } from "../openapi.js";
import { addRoute, type RouteModule } from "../route.js";
import type { AppEnv } from "../types.js";

/** The outline of the document; paths and components are free-form OpenAPI objects. */
export const OpenApiDocumentSchema = Type.Object({
  openapi: Type.String(),
  info: Type.Object({ title: Type.String(), version: Type.String() }),
  paths: Type.Record(Type.String(), Type.Record(Type.String(), Type.Unknown())),
  components: Type.Record(Type.String(), Type.Unknown()),
});

export const openApiRoutes =
  (deps: { version: string }): RouteModule =>
  (app, registry) => {
    const sub = new Hono<AppEnv>();
    let cached: { routeCount: number; document: object } | null = null;
    addRoute(
      sub,
      registry,
      {
        method: "get",
        path: "/api/v1/openapi.json",
        summary: "This API's OpenAPI 3.1 document",
        tag: "system",
        auth: "public",
        response: OpenApiDocumentSchema,
      },
      () => {
        if (cached?.routeCount !== registry.routes.length) {
          const document = buildOpenApiDocument(registry, { title: "Cloud controller API", version: deps.version });
          cached = { routeCount: registry.routes.length, document };
        }
        return cached.document;
      },
    );
    app.route("/", sub);
  };
