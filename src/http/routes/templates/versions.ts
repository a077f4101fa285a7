/** A template's versions: list them, delete a snapshot, and roll back to one. */
import { Type } from "@sinclair/typebox";
import { badRequest } from "../../../shared/errors.js";
import { addRoute } from "../../route.js";
import { audited } from "../../audited.js";
import { HashField, Name, NameParams, tag, type TemplateRouteScope } from "./common.js";

const VersionSchema = Type.Object({ templateName: Type.String(), hash: Type.String(), sizeBytes: Type.Integer(), createdAt: Type.String() });

/** Mounts the version list, snapshot deletion (audited as template.version.delete) and rollback (template.rollback). */
export function mountTemplateVersionRoutes({ app, registry, templates, audit }: TemplateRouteScope): void {
  addRoute(
    app,
    registry,
    {
      method: "get",
      path: "/api/v1/templates/:name/versions",
      summary: "Versions, newest first",
      tag,
      permission: "templates.view",
      params: NameParams,
      response: Type.Array(VersionSchema),
    },
    ({ params }) => templates.listVersions(params.name),
  );

  addRoute(
    app,
    registry,
    {
      method: "delete",
      path: "/api/v1/templates/:name/versions/:hash",
      summary: "Delete a snapshot (not the current one); unused blobs are collected",
      tag,
      permission: "templates.delete",
      params: Type.Object({ name: Name, hash: HashField }),
      successStatus: 204,
    },
    async ({ params, c }) => {
      const before = await templates.deleteVersion(params.name, params.hash);
      await audited(audit, c, {
        action: "template.version.delete",
        resourceType: "template",
        resourceId: params.name,
        details: { hash: params.hash },
        before,
      });
      return c.body(null, 204);
    },
  );

  addRoute(
    app,
    registry,
    {
      method: "post",
      path: "/api/v1/templates/:name/rollback",
      summary: "Make a snapshot current",
      tag,
      permission: "templates.update",
      params: NameParams,
      // The hash is checked by the service so that a missing or blank one is 400 BAD_REQUEST (spec).
      body: Type.Object({ hash: Type.Optional(Type.Unknown()) }),
      response: Type.Object({ status: Type.String(), hash: Type.String() }),
    },
    async ({ params, body, c }) => {
      const hash = typeof body.hash === "string" ? body.hash : undefined;
      if (body.hash !== undefined && hash === undefined) throw badRequest("hash must be a string");
      const change = await templates.rollback(params.name, hash);
      await audited(audit, c, {
        action: "template.rollback",
        resourceType: "template",
        resourceId: params.name,
        details: { oldHash: change.oldHash, newHash: change.newHash },
      });
      return { status: "restored", hash: change.newHash };
    },
  );
}
