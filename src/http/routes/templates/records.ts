/**
 * Template records: list, create, read, change (description, platform) and delete. Every mutation is
 * audited with its template.* action.
 */
import { Type } from "@sinclair/typebox";
import { addRoute } from "../../route.js";
import { audited } from "../../audited.js";
import { NameParams, TemplateSchema, tag, type TemplateRouteScope } from "./common.js";

const CreateBody = Type.Object({
  name: Type.String({ maxLength: 256 }),
  description: Type.Optional(Type.String({ maxLength: 1024 })),
  platform: Type.Optional(Type.String({ maxLength: 64, pattern: "^[a-z0-9_-]*$" })),
});
const PatchBody = Type.Object({
  description: Type.Optional(Type.String({ maxLength: 1024 })),
  platform: Type.Optional(Type.String({ maxLength: 64, pattern: "^[a-z0-9_-]*$" })),
});

/** Mounts list, create, get, patch and delete of a template record. */
export function mountTemplateRecordRoutes({ app, registry, templates, audit }: TemplateRouteScope): void {
  addRoute(
    app,
    registry,
    {
      method: "get",
      path: "/api/v1/templates",
      summary: "List templates (synthetic `_` templates omitted)",
      tag,
      permission: "templates.view",
      response: Type.Array(TemplateSchema),
    },
    () => templates.list(),
  );

  addRoute(
    app,
    registry,
    {
      method: "post",
      path: "/api/v1/templates",
      summary: "Create an empty template",
      tag,
      permission: "templates.create",
      body: CreateBody,
      response: TemplateSchema,
      successStatus: 201,
    },
    async ({ body, c }) => {
      const created = await templates.create(body);
      await audited(audit, c, { action: "template.create", resourceType: "template", resourceId: created.name, after: created });
      return c.json(created, 201);
    },
  );

  addRoute(
    app,
    registry,
    {
      method: "get",
      path: "/api/v1/templates/:name",
      summary: "Get one template",
      tag,
      permission: "templates.view",
      params: NameParams,
      response: TemplateSchema,
    },
    ({ params }) => templates.get(params.name),
  );

  addRoute(
    app,
    registry,
    {
      method: "patch",
      path: "/api/v1/templates/:name",
      summary: "Change description or platform",
      tag,
      permission: "templates.update",
      params: NameParams,
      body: PatchBody,
      response: TemplateSchema,
    },
    async ({ params, body, c }) => {
      const { before, after } = await templates.update(params.name, body);
      await audited(audit, c, { action: "template.update", resourceType: "template", resourceId: params.name, details: { changes: body }, before, after });
      return after;
    },
  );

  addRoute(
    app,
    registry,
    {
      method: "delete",
      path: "/api/v1/templates/:name",
      summary: "Delete a template (400 PROTECTED for _module-plugins- names)",
      tag,
      permission: "templates.delete",
      params: NameParams,
      successStatus: 204,
    },
    async ({ params, c }) => {
      const before = await templates.delete(params.name);
      await audited(audit, c, { action: "template.delete", resourceType: "template", resourceId: params.name, before });
      return c.body(null, 204);
    },
  );
}
