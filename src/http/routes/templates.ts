/**
 * Template routes (spec document 1, "Templates"): metadata, versions and rollback, the files API,
 * variables, inheritance, search, export and import, plus the two routes the daemon fetches versions
 * with (manifest and blob). Field names are recorded in docs/decisions/templates.md. Every mutation
 * is audited with its template.* action (spec document 2).
 */
import type { Hono } from "hono";
import { Type } from "@sinclair/typebox";
import type { AuditRecorder } from "../../audit/types.js";
import { ApiError, badRequest, validationError } from "../../shared/errors.js";
import type { TemplateChange, TemplateService, UploadedFile } from "../../templates/template-service.js";
import { addRoute, type RouteRegistry } from "../route.js";
import { audited } from "../audited.js";
import type { AppContext, AppEnv } from "../types.js";

const tag = "Templates";
const Name = Type.String({ minLength: 1, maxLength: 256 });
const NameParams = Type.Object({ name: Name });
const PathField = Type.String({ maxLength: 4096 });
const HashField = Type.String({ maxLength: 128 });
/** The most hits one search returns (spec document 1, "Limits"). */
export const TEMPLATE_SEARCH_RESULTS_MAX = 200;

const TemplateSchema = Type.Object({
  name: Type.String(),
  description: Type.String(),
  platform: Type.String(),
  hash: Type.String(),
  sizeBytes: Type.Integer(),
});
const VersionSchema = Type.Object({ templateName: Type.String(), hash: Type.String(), sizeBytes: Type.Integer(), createdAt: Type.String() });
const ChangeSchema = Type.Object({ oldHash: Type.String(), newHash: Type.String(), changed: Type.Boolean(), template: TemplateSchema });
const CreateBody = Type.Object({
  name: Type.String({ maxLength: 256 }),
  description: Type.Optional(Type.String({ maxLength: 1024 })),
  platform: Type.Optional(Type.String({ maxLength: 64, pattern: "^[a-z0-9_-]*$" })),
});
const PatchBody = Type.Object({
  description: Type.Optional(Type.String({ maxLength: 1024 })),
  platform: Type.Optional(Type.String({ maxLength: 64, pattern: "^[a-z0-9_-]*$" })),
});
const FileQuery = Type.Object({ path: Type.Optional(PathField), version: Type.Optional(HashField) });
const VariablesBody = Type.Object({ variables: Type.Record(Type.String(), Type.String({ maxLength: 4096 }), { maxProperties: 256 }) });

/** Bytes of a multipart body, as files; 400 when the body is not multipart/form-data. */
async function multipartFiles(c: AppContext, field: string): Promise<UploadedFile[]> {
  if (!(c.req.header("content-type") ?? "").toLowerCase().startsWith("multipart/form-data")) {
    throw badRequest("Expected a multipart/form-data body");
  }
  let form: FormData;
  try {
    form = await c.req.raw.formData();
  } catch (err) {
    if (err instanceof ApiError) throw err;
    throw badRequest("Malformed multipart body");
  }
  const files: UploadedFile[] = [];
  for (const value of form.getAll(field)) {
    if (typeof value === "string") continue;
    files.push({ fileName: value.name, data: new Uint8Array(await value.arrayBuffer()) });
  }
  if (files.length === 0) throw validationError(`${field}: a file part is required`);
  return files;
}

/** Response body of a change: the hashes and the template after it. */
function changeBody(change: TemplateChange) {
  return { oldHash: change.oldHash, newHash: change.newHash, changed: change.changed, template: change.template };
}

function attachment(data: Uint8Array, fileName: string, contentType: string, extra: Record<string, string> = {}): Response {
  const ascii = fileName.replace(/[^A-Za-z0-9._-]/g, "_");
  return new Response(data, {
    status: 200,
    headers: {
      "content-type": contentType,
      "content-length": String(data.byteLength),
      "content-disposition": `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(fileName)}`,
      ...extra,
    },
  });
}

/** Mounts every template route on `app`. */
export function templateRoutes(templates: TemplateService, audit: AuditRecorder): (app: Hono<AppEnv>, registry: RouteRegistry) => void {
  return (app, registry) => {
    const fileAudit = async (c: AppContext, action: string, name: string, change: TemplateChange, details: Record<string, unknown>) => {
      await audited(audit, c, { action, resourceType: "template", resourceId: name, details: { ...details, oldHash: change.oldHash, newHash: change.newHash } });
    };

    // ---- import comes first: /templates/import must not be read as a template name ----
    addRoute(
      app,
      registry,
      {
        method: "post",
        path: "/api/v1/templates/import",
        summary: "Import a template from a multipart tar.gz (part `file`); query name, description, platform",
        tag,
        permission: "templates.create",
        query: Type.Object({ name: Name, description: Type.Optional(Type.String({ maxLength: 1024 })), platform: Type.Optional(Type.String({ maxLength: 64, pattern: "^[a-z0-9_-]*$" })) }),
        response: TemplateSchema,
        successStatus: 201,
      },
      async ({ query, c }) => {
        const [file] = await multipartFiles(c, "file");
        const created = await templates.importArchive(query.name, file.data, { description: query.description, platform: query.platform });
        await audited(audit, c, { action: "template.import", resourceType: "template", resourceId: created.name, details: { bytes: file.data.byteLength }, after: created });
        return c.json(created, 201);
      },
    );

    addRoute(
      app,
      registry,
      { method: "get", path: "/api/v1/templates", summary: "List templates (synthetic `_` templates omitted)", tag, permission: "templates.view", response: Type.Array(TemplateSchema) },
      () => templates.list(),
    );

    addRoute(
      app,
      registry,
      { method: "post", path: "/api/v1/templates", summary: "Create an empty template", tag, permission: "templates.create", body: CreateBody, response: TemplateSchema, successStatus: 201 },
      async ({ body, c }) => {
        const created = await templates.create(body);
        await audited(audit, c, { action: "template.create", resourceType: "template", resourceId: created.name, after: created });
        return c.json(created, 201);
      },
    );

    addRoute(
      app,
      registry,
      { method: "get", path: "/api/v1/templates/:name", summary: "Get one template", tag, permission: "templates.view", params: NameParams, response: TemplateSchema },
      ({ params }) => templates.get(params.name),
    );

    addRoute(
      app,
      registry,
      { method: "patch", path: "/api/v1/templates/:name", summary: "Change description or platform", tag, permission: "templates.update", params: NameParams, body: PatchBody, response: TemplateSchema },
      async ({ params, body, c }) => {
        const { before, after } = await templates.update(params.name, body);
        await audited(audit, c, { action: "template.update", resourceType: "template", resourceId: params.name, details: { changes: body }, before, after });
        return after;
      },
    );

    addRoute(
      app,
      registry,
      { method: "delete", path: "/api/v1/templates/:name", summary: "Delete a template (400 PROTECTED for _module-plugins- names)", tag, permission: "templates.delete", params: NameParams, successStatus: 204 },
      async ({ params, c }) => {
        const before = await templates.delete(params.name);
        await audited(audit, c, { action: "template.delete", resourceType: "template", resourceId: params.name, before });
        return c.body(null, 204);
      },
    );

    // ---- versions ----
    addRoute(
      app,
      registry,
      { method: "get", path: "/api/v1/templates/:name/versions", summary: "Versions, newest first", tag, permission: "templates.view", params: NameParams, response: Type.Array(VersionSchema) },
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
        await audited(audit, c, { action: "template.version.delete", resourceType: "template", resourceId: params.name, details: { hash: params.hash }, before });
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
        await audited(audit, c, { action: "template.rollback", resourceType: "template", resourceId: params.name, details: { oldHash: change.oldHash, newHash: change.newHash } });
        return { status: "restored", hash: change.newHash };
      },
    );

    // ---- daemon fetch path ----
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
        const data = await templates.blob(params.name, params.sha256, query.version);
        return new Response(data, { headers: { "content-type": "application/octet-stream", "content-length": String(data.byteLength) } });
      },
    );

    // ---- files ----
    addRoute(
      app,
      registry,
      { method: "get", path: "/api/v1/templates/:name/files", summary: "List a directory (query path, version)", tag, permission: "templates.view", params: NameParams, query: FileQuery },
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
      { method: "get", path: "/api/v1/templates/:name/files/content", summary: "Read a UTF-8 text file (query path, version)", tag, permission: "templates.view", params: NameParams, query: FileQuery },
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
      { method: "get", path: "/api/v1/templates/:name/files/download", summary: "Download a file (query path, version)", tag, permission: "templates.view", params: NameParams, query: FileQuery },
      async ({ params, query }) => {
        const { entry, data } = await templates.readFile(params.name, query.path, query.version);
        return attachment(data, entry.path.slice(entry.path.lastIndexOf("/") + 1), "application/octet-stream", { "x-content-sha256": entry.sha256 });
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "post",
        path: "/api/v1/templates/:name/files/upload",
        summary: "Upload multipart files (parts `file`) into directory `path`; extract=true unpacks ZIP files",
        tag,
        permission: "templates.update",
        params: NameParams,
        query: Type.Object({ path: Type.Optional(PathField), extract: Type.Optional(Type.Boolean()) }),
        response: ChangeSchema,
      },
      async ({ params, query, c }) => {
        const files = await multipartFiles(c, "file");
        const change = await templates.upload(params.name, query.path, files, query.extract ?? false);
        if (change.changed) {
          await fileAudit(c, "template.file.upload", params.name, change, { path: query.path ?? "", files: files.map((f) => f.fileName).slice(0, 50), extract: query.extract ?? false });
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
      { method: "post", path: "/api/v1/templates/:name/rehash", summary: "Recompute the content hash and check every blob", tag, permission: "templates.update", params: NameParams },
      async ({ params, c }) => {
        const result = await templates.rehash(params.name);
        if (result.changed) {
          await audited(audit, c, { action: "template.update", resourceType: "template", resourceId: params.name, details: { rehash: true, oldHash: result.previousHash, newHash: result.hash } });
        }
        return result;
      },
    );

    // ---- variables ----
    addRoute(
      app,
      registry,
      { method: "get", path: "/api/v1/templates/:name/variables", summary: "The {{var}} substitutions", tag, permission: "templates.view", params: NameParams },
      async ({ params }) => ({ variables: await templates.variables(params.name) }),
    );

    addRoute(
      app,
      registry,
      { method: "put", path: "/api/v1/templates/:name/variables", summary: "Replace the {{var}} substitutions (body variables)", tag, permission: "templates.update", params: NameParams, body: VariablesBody },
      async ({ params, body, c }) => {
        const { before, after } = await templates.replaceVariables(params.name, body.variables);
        await audited(audit, c, { action: "template.variables.update", resourceType: "template", resourceId: params.name, before, after });
        return { variables: after };
      },
    );

    addRoute(
      app,
      registry,
      { method: "get", path: "/api/v1/templates/:name/variables/scan", summary: "Placeholders found in the text files", tag, permission: "templates.view", params: NameParams },
      ({ params }) => templates.scanVariables(params.name),
    );

    addRoute(
      app,
      registry,
      { method: "get", path: "/api/v1/templates/:name/inheritance", summary: "Layer chain: base, base-<platform>, name (existing ones)", tag, permission: "templates.view", params: NameParams },
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

    addRoute(
      app,
      registry,
      { method: "get", path: "/api/v1/templates/:name/export", summary: "The files as tar.gz (query version)", tag, permission: "templates.view", params: NameParams, query: Type.Object({ version: Type.Optional(HashField) }) },
      async ({ params, query, c }) => {
        const { hash, archive } = await templates.exportArchive(params.name, query.version);
        await audited(audit, c, { action: "template.export", resourceType: "template", resourceId: params.name, details: { hash, bytes: archive.byteLength } });
        return attachment(archive, `${params.name}-${hash.slice(0, 12)}.tar.gz`, "application/gzip", { "x-template-hash": hash });
      },
    );
  };
}
