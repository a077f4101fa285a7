/**
 * Whole templates as tar.gz archives: import (the multipart body spooled to disk, then unpacked entry
 * by entry) and export (stored chunks gzip-compressed as they are sent).
 */
import { Readable } from "node:stream";
import { Type } from "@sinclair/typebox";
import { assertTemplateName } from "../../../templates/template-service.js";
import { addRoute } from "../../route.js";
import { audited } from "../../audited.js";
import { HashField, Name, NameParams, TemplateSchema, tag, type TemplateRouteScope } from "./common.js";
import { UPLOAD_MIB, attachment, withSpooledFiles } from "./transfer.js";

/** Mounts the import, audited as template.import. It goes first: /templates/import must not be read as a template name. */
export function mountTemplateImportRoute({ app, registry, templates, audit, spoolDirectory }: TemplateRouteScope): void {
  addRoute(
    app,
    registry,
    {
      method: "post",
      path: "/api/v1/templates/import",
      summary: `Import a template from a multipart tar.gz (part \`file\`, body up to ${UPLOAD_MIB} MiB); query name, description, platform`,
      tag,
      permission: "templates.create",
      query: Type.Object({
        name: Name,
        description: Type.Optional(Type.String({ maxLength: 1024 })),
        platform: Type.Optional(Type.String({ maxLength: 64, pattern: "^[a-z0-9_-]*$" })),
      }),
      response: TemplateSchema,
      successStatus: 201,
    },
    async ({ query, c }) => {
      assertTemplateName(query.name, "name"); // before the body streams in, not after
      const { created, bytes } = await withSpooledFiles(c, "file", spoolDirectory, async ([file]) => ({
        created: await templates.importArchive(query.name, { path: file.path }, { description: query.description, platform: query.platform }),
        bytes: file.content.size,
      }));
      await audited(audit, c, { action: "template.import", resourceType: "template", resourceId: created.name, details: { bytes }, after: created });
      return c.json(created, 201);
    },
  );
}

/** Mounts the export, audited as template.export. */
export function mountTemplateExportRoute({ app, registry, templates, audit }: TemplateRouteScope): void {
  addRoute(
    app,
    registry,
    {
      method: "get",
      path: "/api/v1/templates/:name/export",
      summary: "The files as tar.gz, streamed (query version)",
      tag,
      permission: "templates.view",
      params: NameParams,
      query: Type.Object({ version: Type.Optional(HashField) }),
    },
    async ({ params, query, c }) => {
      const { hash, sizeBytes, stream } = await templates.exportArchive(params.name, query.version);
      await audited(audit, c, { action: "template.export", resourceType: "template", resourceId: params.name, details: { hash, sizeBytes } });
      const body = Readable.toWeb(stream) as ReadableStream<Uint8Array>;
      return attachment(body, null, `${params.name}-${hash.slice(0, 12)}.tar.gz`, "application/gzip", { "x-template-hash": hash });
    },
  );
}
