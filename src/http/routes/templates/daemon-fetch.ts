/** The two routes the daemon fetches a template version with: its manifest and its file blobs. */
import { Type } from "@sinclair/typebox";
import { addRoute } from "../../route.js";
import { HashField, Name, NameParams, tag, type TemplateRouteScope } from "./common.js";

/** Mounts the manifest and blob routes; the blob streams with its length known. */
export function mountTemplateFetchRoutes({ app, registry, templates }: TemplateRouteScope): void {
  addRoute(
    app,
    registry,
    {
      method: "get",
      path: "/api/v1/templates/:name/manifest",
      summary: "A version's manifest (query version, default current) with the template's variables",
      tag,
      permission: "templates.view",
      params: NameParams,
      query: Type.Object({ version: Type.Optional(HashField) }),
    },
    ({ params, query }) => templates.manifest(params.name, query.version),
  );

  addRoute(
    app,
    registry,
    {
      method: "get",
      path: "/api/v1/templates/:name/blobs/:sha256",
      summary: "One file blob of a version (query version, default current)",
      tag,
      permission: "templates.view",
      params: Type.Object({ name: Name, sha256: HashField }),
      query: Type.Object({ version: Type.Optional(HashField) }),
    },
    async ({ params, query }) => {
      const { size, stream } = await templates.openBlob(params.name, params.sha256, query.version);
      return new Response(stream, { headers: { "content-type": "application/octet-stream", "content-length": String(size) } });
    },
  );
}
