/**
 * Template routes (spec document 1, "Templates"): metadata, versions and rollback, the files API,
 * variables, inheritance, search, export and import, plus the two routes the daemon fetches versions
 * with (manifest and blob). Field names are recorded in docs/decisions/templates.md. Every mutation
 * is audited with its template.* action (spec document 2).
 *
 * Uploads and imports stream: their multipart bodies are spooled to disk part by part (bounded by
 * {@link TEMPLATE_UPLOAD_BYTES_MAX}) and archives are unpacked from there entry by entry; downloads,
 * blobs and exports are served one stored chunk at a time, exports gzip-compressed as they are sent.
 */
import { tmpdir } from "node:os";
import { Readable } from "node:stream";
import type { Hono } from "hono";
import { Type } from "@sinclair/typebox";
import type { AuditRecorder } from "../../audit/types.js";
import { badRequest, validationError } from "../../shared/errors.js";
import { isCleanlyDecodedName } from "../../shared/unicode.js";
import { assertTemplateName, type TemplateChange, type TemplateService } from "../../templates/template-service.js";
import { spoolMultipart, type SpooledFile } from "../../templates/upload-spool.js";
import type { BodyLimitRoute } from "../middleware/body-limit.js";
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
/**
 * Largest request body of an upload or an import. The body streams to disk, so this bounds disk
 * use per request, not memory; the default body limit of every other route stays.
 */
export const TEMPLATE_UPLOAD_BYTES_MAX = 256 * 1024 * 1024;
const UPLOAD_MIB = TEMPLATE_UPLOAD_BYTES_MAX / (1024 * 1024);
/** The routes that take {@link TEMPLATE_UPLOAD_BYTES_MAX}, for the body-limit middleware. */
export const TEMPLATE_BODY_LIMIT_ROUTES: readonly BodyLimitRoute[] = [
  { method: "POST", path: "/api/v1/templates/import", maxBytes: TEMPLATE_UPLOAD_BYTES_MAX },
  { method: "POST", path: "/api/v1/templates/:name/files/upload", maxBytes: TEMPLATE_UPLOAD_BYTES_MAX },
];

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

/**
 * Spools the file parts named `field` of the request, runs `use` on them, then removes them: 400 for
 * a body that is not multipart/form-data or a file name that is not UTF-8 (or holds U+FFFD), 422
 * when no file part came.
 */
async function withSpooledFiles<T>(c: AppContext, field: string, spoolDirectory: string, use: (files: SpooledFile[]) => Promise<T>): Promise<T> {
  const spool = await spoolMultipart(c.req.raw.body, c.req.header("content-type"), { directory: spoolDirectory, field });
  try {
    if (spool.files.length === 0) throw validationError(`${field}: a file part is required`);
    // Part headers are decoded leniently, so bytes that were not UTF-8 arrive as U+FFFD.
    if (spool.files.some((file) => !isCleanlyDecodedName(file.fileName))) throw badRequest(`${field}: a file name is not valid UTF-8`);
    return await use(spool.files);
  } finally {
    await spool.dispose();
  }
}

/** Response body of a change: the hashes and the template after it. */
function changeBody(change: TemplateChange) {
  return { oldHash: change.oldHash, newHash: change.newHash, changed: change.changed, template: change.template };
}

/** A download response; `sizeBytes` null when the length is known only once it is sent (chunked). */
function attachment(
  body: ReadableStream<Uint8Array>,
  sizeBytes: number | null,
  fileName: string,
  contentType: string,
  extra: Record<string, string> = {},
): Response {
  const ascii = fileName.replace(/[^A-Za-z0-9._-]/g, "_");
  return new Response(body, {
    status: 200,
    headers: {
      "content-type": contentType,
      ...(sizeBytes === null ? {} : { "content-length": String(sizeBytes) }),
      "content-disposition": `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(fileName)}`,
      ...extra,
    },
  });
}

/** Options of {@link templateRoutes}. */
export interface TemplateRouteOptions {
  /** Where uploads are spooled while they stream in; the system temporary directory by default. */
  spoolDirectory?: string;
}

/** Mounts every template route on `app`. */
export function templateRoutes(
  templates: TemplateService,
  audit: AuditRecorder,
  options: TemplateRouteOptions = {},
): (app: Hono<AppEnv>, registry: RouteRegistry) => void {
  const spoolDirectory = options.spoolDirectory ?? tmpdir();
  return (app, registry) => {
    const fileAudit = async (c: AppContext, action: string, name: string, change: TemplateChange, details: Record<string, unknown>) => {
      await audited(audit, c, {
        action,
        resourceType: "template",
        resourceId: name,
        details: { ...details, oldHash: change.oldHash, newHash: change.newHash },
      });
    };

    // ---- import comes first: /templates/import must not be read as a template name ----
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

    // ---- versions ----
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
        const { size, stream } = await templates.openBlob(params.name, params.sha256, query.version);
        return new Response(stream, { headers: { "content-type": "application/octet-stream", "content-length": String(size) } });
      },
    );

    // ---- files ----
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
  };
}
