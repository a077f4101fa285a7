/** Read-only views across a template's files: the layer chain it inherits and a search of paths and text. */
import { Type } from "@sinclair/typebox";
import { addRoute } from "../../route.js";
import { NameParams, tag, type TemplateRouteScope } from "./common.js";

/** The most hits one search returns (spec document 1, "Limits"). */
export const TEMPLATE_SEARCH_RESULTS_MAX = 200;

/** Mounts the inheritance chain and the search. */
export function mountTemplateLayerAndSearchRoutes({ app, registry, templates }: TemplateRouteScope): void {
  addRoute(
    app,
    registry,
    {
      method: "get",
      path: "/api/v1/templates/:name/inheritance",
      summary: "Layer chain: base, base-<platform>, name (existing ones)",
      tag,
      permission: "templates.view",
      params: NameParams,
    },
    ({ params }) => templates.inheritance(params.name),
  );

  addRoute(
    app,
    registry,
    {
      method: "get",
      path: "/api/v1/templates/:name/search",
      summary: "Case-insensitive search of paths and text (query q, maxResults at most 200)",
      tag,
      permission: "templates.view",
      params: NameParams,
      query: Type.Object({
        q: Type.String({ minLength: 1, maxLength: 200 }),
        maxResults: Type.Optional(Type.Integer({ minimum: 1, maximum: TEMPLATE_SEARCH_RESULTS_MAX, default: 50 })),
      }),
    },
    ({ params, query }) => templates.search(params.name, query.q, query.maxResults ?? 50),
  );
}
