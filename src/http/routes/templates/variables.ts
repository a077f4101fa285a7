/** A template's {{var}} substitutions: read, replace, and scan the text files for placeholders. */
import { Type } from "@sinclair/typebox";
import { addRoute } from "../../route.js";
import { audited } from "../../audited.js";
import { NameParams, tag, type TemplateRouteScope } from "./common.js";

const VariablesBody = Type.Object({ variables: Type.Record(Type.String(), Type.String({ maxLength: 4096 }), { maxProperties: 256 }) });

/** Mounts read, replace (audited as template.variables.update) and scan of the variables. */
export function mountTemplateVariableRoutes({ app, registry, templates, audit }: TemplateRouteScope): void {
  addRoute(
    app,
    registry,
    { method: "get", path: "/api/v1/templates/:name/variables", summary: "The {{var}} substitutions", tag, permission: "templates.view", params: NameParams },
    async ({ params }) => ({ variables: await templates.variables(params.name) }),
  );

  addRoute(
    app,
    registry,
    {
      method: "put",
      path: "/api/v1/templates/:name/variables",
      summary: "Replace the {{var}} substitutions (body variables)",
      tag,
      permission: "templates.update",
      params: NameParams,
      body: VariablesBody,
    },
    async ({ params, body, c }) => {
      const { before, after } = await templates.replaceVariables(params.name, body.variables);
      await audited(audit, c, { action: "template.variables.update", resourceType: "template", resourceId: params.name, before, after });
      return { variables: after };
    },
  );

  addRoute(
    app,
    registry,
    {
      method: "get",
      path: "/api/v1/templates/:name/variables/scan",
      summary: "Placeholders found in the text files",
      tag,
      permission: "templates.view",
      params: NameParams,
    },
    ({ params }) => templates.scanVariables(params.name),
  );
}
