/**
 * The files API of a template: list, mkdir, read and write text, download, upload (streamed, spooled
 * to disk), extract, rename and delete, plus rehash. A change is audited only when it changed
 * something, except rename and delete, which always are.
 */
import { Type } from "@sinclair/typebox";
import type { TemplateChange } from "../../../templates/template-service.js";
import { addRoute } from "../../route.js";
import { audited } from "../../audited.js";
import type { AppContext } from "../../types.js";
import { NameParams, PathField, HashField, TemplateSchema, tag, type TemplateRouteScope } from "./common.js";
import { UPLOAD_MIB, attachment, withSpooledFiles } from "./transfer.js";

const ChangeSchema = Type.Object({ oldHash: Type.String(), newHash: Type.String(), changed: Type.Boolean(), template: TemplateSchema });
const FileQuery = Type.Object({ path: Type.Optional(PathField), version: Type.Optional(HashField) });

/** Response body of a change: the hashes and the template after it. */
function changeBody(change: TemplateChange) {
  return { oldHash: change.oldHash, newHash: change.newHash, changed: change.changed, template: change.template };
}

/** Mounts the file routes and rehash. */
export function mountTemplateFileRoutes({ app, registry, templates, audit, spoolDirectory }: TemplateRouteScope): void {
  const fileAudit = async (c: AppContext, action: string, name: string, change: TemplateChange, details: Record<string, unknown>) => {
    await audited(audit, c, {
      action,
      resourceType: "template",
      resourceId: name,
      details: { ...details, oldHash: change.oldHash, newHash: change.newHash },
    });
  };

  addRoute(
    app,
    registry,
    {
      method: "get",
      path: "/api/v1/templates/:name/files",
      summary: "List a directory (query path, version)",
      tag,
      permission: "templates.view",
      params: NameParams,
      query: FileQuery,
    },
    ({ params, query }) => templates.listFiles(params.name, query.path, query.version),
  );

  addRoute(
    app,
    registry,
    {
      method: "post",
      path: "/api/v1/templates/:name/files/mkdir",
      summary: "Create a directory (body path)",
      tag,
      permission: "templates.update",
      params: NameParams,
      body: Type.Object({ path: PathField }),
      response: ChangeSchema,
    },
    async ({ params, body, c }) => {
      const change = await templates.mkdir(params.name, body.path);
      if (change.changed) await fileAudit(c, "template.file.upload", params.name, change, { path: body.path, directory: true });
      return changeBody(change);
    },
  );

  addRoute(
    app,
    registry,
    {
      method: "get",
      path: "/api/v1/templates/:name/files/content",
      summary: "Read a UTF-8 text file (query path, version)",
      tag,
      permission: "templates.view",
      params: NameParams,
      query: FileQuery,
    },
    ({ params, query }) => templates.readText(params.name, query.path, query.version),
  );

  addRoute(
    app,
    registry,
    {
      method: "put",
      path: "/api/v1/templates/:name/files/content",
      summary: "Write a UTF-8 text file (body path, content)",
      tag,
      permission: "templates.update",
      params: NameParams,
      body: Type.Object({ path: PathField, content: Type.String() }),
      response: ChangeSchema,
    },
    async ({ params, body, c }) => {
      const change = await templates.writeText(params.name, body.path, body.content);
      if (change.changed) await fileAudit(c, "template.file.upload", params.name, change, { path: body.path, bytes: Buffer.byteLength(body.content) });
      return changeBody(change);
    },
  );

  addRoute(
    app,
    registry,
    {
      method: "get",
      path: "/api/v1/templates/:name/files/download",
      summary: "Download a file (query path, version)",
      tag,
      permission: "templates.view",
      params: NameParams,
      query: FileQuery,
    },
    async ({ params, query }) => {
      const { entry, stream } = await templates.openFile(params.name, query.path, query.version);
      return attachment(stream, entry.size, entry.path.slice(entry.path.lastIndexOf("/") + 1), "application/octet-stream", {
        "x-content-sha256": entry.sha256,
      });
    },
  );

  addRoute(
    app,
    registry,
    {
      method: "post",
      path: "/api/v1/templates/:name/files/upload",
      summary: `Upload multipart files (parts \`file\`, body up to ${UPLOAD_MIB} MiB, streamed) into directory \`path\`; extract=true unpacks ZIP files`,
      tag,
      permission: "templates.update",
      params: NameParams,
      query: Type.Object({ path: Type.Optional(PathField), extract: Type.Optional(Type.Boolean()) }),
      response: ChangeSchema,
    },
    async ({ params, query, c }) => {
      await templates.get(params.name); // 404 before the body streams in, not after
      const { change, fileNames } = await withSpooledFiles(c, "file", spoolDirectory, async (files) => ({
        change: await templates.upload(params.name, query.path, files, query.extract ?? false),
        fileNames: files.map((f) => f.fileName).slice(0, 50),
      }));
      if (change.changed) {
        await fileAudit(c, "template.file.upload", params.name, change, { path: query.path ?? "", files: fileNames, extract: query.extract ?? false });
      }
      return changeBody(change);
    },
  );

  addRoute(
    app,
    registry,
    {
      method: "post",
      path: "/api/v1/templates/:name/files/extract",
      summary: "Extract a ZIP already in the template (body path, destination)",
      tag,
      permission: "templates.update",
      params: NameParams,
      body: Type.Object({ path: PathField, destination: Type.Optional(PathField) }),
      response: ChangeSchema,
    },
    async ({ params, body, c }) => {
      const change = await templates.extract(params.name, body.path, body.destination);
      if (change.changed) await fileAudit(c, "template.file.extract", params.name, change, { path: body.path, destination: body.destination });
      return changeBody(change);
    },
  );

  addRoute(
    app,
    registry,
    {
      method: "post",
      path: "/api/v1/templates/:name/files/rename",
      summary: "Move a file or directory (body from, to)",
      tag,
      permission: "templates.update",
      params: NameParams,
      body: Type.Object({ from: PathField, to: PathField }),
      response: ChangeSchema,
    },
    async ({ params, body, c }) => {
      const change = await templates.rename(params.name, body.from, body.to);
      await fileAudit(c, "template.file.rename", params.name, change, { from: body.from, to: body.to });
      return changeBody(change);
    },
  );

  addRoute(
    app,
    registry,
    {
      method: "delete",
      path: "/api/v1/templates/:name/files",
      summary: "Delete a file or directory (query path)",
      tag,
      permission: "templates.update",
      params: NameParams,
      query: Type.Object({ path: Type.Optional(PathField) }),
      response: ChangeSchema,
    },
    async ({ params, query, c }) => {
      const change = await templates.deleteFile(params.name, query.path);
      await fileAudit(c, "template.file.delete", params.name, change, { path: query.path });
      return changeBody(change);
    },
  );

  addRoute(
    app,
    registry,
    {
      method: "post",
      path: "/api/v1/templates/:name/rehash",
      summary: "Recompute the content hash and check every blob",
      tag,
      permission: "templates.update",
      params: NameParams,
    },
    async ({ params, c }) => {
      const result = await templates.rehash(params.name);
      if (result.changed) {
        await audited(audit, c, {
          action: "template.update",
          resourceType: "template",
          resourceId: params.name,
          details: { rehash: true, oldHash: result.previousHash, newHash: result.hash },
        });
      }
      return result;
    },
  );
}
