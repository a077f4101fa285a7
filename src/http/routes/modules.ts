/**
 * Module management routes (spec document 3, "Module management"): the list, the multipart upload
 * (`bundle` part, or `file`/`jar`; optional `signature` part), the registry install and catalog,
 * capabilities and their change stream, upgrade, frontend reload, delete, the leak report and its
 * cleanup, and the drop of a module's storage. Reading needs `modules.view`; changing needs
 * MODULES_MANAGE. Changes are audited as `platform-module.*` actions. The routes of the modules
 * themselves are in `module-routes.ts`, mounted after these.
 */
import { tmpdir } from "node:os";
import type { Hono } from "hono";
import { openSseResponse } from "../sse-response.js";
import { Type } from "@sinclair/typebox";
import type { AuditRecorder } from "../../audit/types.js";
import type { Tickets } from "../../coordination/tickets.js";
import { sseFrame, type EventStreamHub } from "../../events/event-stream.js";
import type { EventStreamTicket } from "../../events/types.js";
import { MODULE_BUNDLE_BYTES_MAX, SIGNATURE_BYTES_MAX } from "../../modules/bundle/bundle-limits.js";
import type { ModulePlatform } from "../../modules/module-platform.js";
import type { UploadedBundle } from "../../modules/module-service.js";
import { ApiError, forbidden } from "../../shared/errors.js";
import { isCleanlyDecodedName } from "../../shared/unicode.js";
import { spoolMultipart } from "../../templates/upload-spool.js";
import { audited } from "../audited.js";
import type { BodyLimitRoute } from "../middleware/body-limit.js";
import { addRoute, type RouteRegistry } from "../route.js";
import type { AppContext, AppEnv } from "../types.js";
import { parseResumePosition } from "./events.js";
import { readFile } from "node:fs/promises";

const tag = "Modules";
/** Multipart framing and a signature on top of the largest bundle. */
const MODULE_UPLOAD_BYTES_MAX = MODULE_BUNDLE_BYTES_MAX + 256 * 1024;
/** The uploads stream their bodies with their own limit. */
export const MODULE_BODY_LIMIT_ROUTES: readonly BodyLimitRoute[] = [
  { method: "POST", path: "/api/v1/modules/platform/upload", maxBytes: MODULE_UPLOAD_BYTES_MAX },
  { method: "POST", path: "/api/v1/modules/platform/:moduleId/upgrade", maxBytes: MODULE_UPLOAD_BYTES_MAX },
  { method: "POST", path: "/api/v1/modules/platform/:moduleId/frontend/reload", maxBytes: MODULE_UPLOAD_BYTES_MAX },
];
const BUNDLE_FIELDS = ["bundle", "file", "jar"];
const SIGNATURE_FIELD = "signature";

const Id = Type.String({ minLength: 1, maxLength: 128 });
const IdParams = Type.Object({ moduleId: Id });
const Nullable = <T extends Parameters<typeof Type.Union>[0][number]>(schema: T) => Type.Union([schema, Type.Null()]);
const ModuleSchema = Type.Object({
  id: Type.String(),
  version: Type.String(),
  state: Type.String({
    description: "LOADING, UNRESOLVED, STARTING, ACTIVE, RELOADING, UPGRADING, STOPPING, FAILED on this controller; NOT_LOADED when it does not run here",
  }),
  enabled: Type.Boolean({ description: "Whether it runs on controllers (hosts include controller)" }),
  hasFrontend: Type.Boolean(),
  frontend: Nullable(Type.Object({ entry: Type.String(), contentHash: Type.String() })),
  platformPluginCount: Type.Integer({ description: "Extension variants it streams to servers" }),
  hosts: Type.Array(Type.String()),
  health: Nullable(Type.String({ description: "healthy or degraded while ACTIVE" })),
  failure: Nullable(Type.Object({ cause: Type.String(), reason: Type.String(), at: Type.String() })),
  routes: Type.Array(Type.Object({ method: Type.String(), template: Type.String() })),
  signed: Type.Boolean(),
  signedBy: Nullable(Type.String()),
  source: Type.String(),
  installedAt: Type.String(),
  updatedAt: Type.String(),
  installedBy: Type.String(),
  generation: Type.Integer(),
  capabilities: Type.Object({
    provides: Type.Array(Type.Object({ id: Type.String(), version: Type.String(), deprecated: Type.Boolean() })),
    requires: Type.Array(Type.Object({ id: Type.String(), versionRange: Type.String() })),
  }),
  storage: Type.Object({ mongo: Type.Boolean(), redis: Type.Boolean(), limits: Type.Object({ mongoDocuments: Type.Integer(), redisKeys: Type.Integer() }) }),
});
const Binding = Nullable(Type.Object({ moduleId: Type.String(), version: Type.String(), deprecated: Type.Boolean() }));
const CapabilitiesSchema = Type.Object({
  providers: Type.Array(
    Type.Object({
      capabilityId: Type.String(),
      version: Type.String(),
      moduleId: Type.String(),
      deprecatedSince: Nullable(Type.String()),
      removedIn: Nullable(Type.String()),
      deprecated: Type.Boolean(),
      active: Type.Boolean(),
    }),
  ),
  requirements: Type.Array(
    Type.Object({ moduleId: Type.String(), capabilityId: Type.String(), versionRange: Type.String(), resolved: Type.Boolean(), provider: Binding }),
  ),
});
const CatalogSchema = Type.Object({
  registries: Type.Array(Type.Object({ url: Type.String(), reachable: Type.Boolean(), error: Nullable(Type.String()), moduleCount: Type.Integer() })),
  modules: Type.Array(
    Type.Object({
      id: Type.String(),
      registry: Type.String(),
      description: Type.String(),
      tags: Type.Array(Type.String()),
      latest: Type.String(),
      versions: Type.Array(Type.String()),
      installedVersion: Nullable(Type.String()),
      unsigned: Type.Boolean(),
    }),
  ),
});
const LeakReportSchema = Type.Object({
  pollIntervalMs: Type.Integer(),
  pending: Type.Integer(),
  leaked: Type.Integer(),
  loaders: Type.Array(
    Type.Object({
      controllerId: Type.String(),
      moduleId: Type.String(),
      version: Type.String(),
      threadId: Type.Integer(),
      retiredAt: Type.String(),
      survivedPolls: Type.Integer(),
      status: Type.String({ description: "pending until it survived a poll, then leaked" }),
    }),
  ),
});

export interface ModuleRouteDeps {
  platform: ModulePlatform;
  audit: AuditRecorder;
  /** The event stream's hub and tickets: the capability-change stream uses them. */
  hub: EventStreamHub;
  tickets: Tickets<EventStreamTicket>;
  /** The permissions a user holds now (null: no such user): the capability-change stream needs modules.view. */
  permissionsOf: (username: string) => Promise<ReadonlySet<string> | null>;
  spoolDirectory?: string;
}

/**
 * Spools the multipart body (a bundle part and an optional signature part) and runs `use` on it;
 * 400 `code` when the body is not multipart, holds no bundle or more than one bundle or signature.
 */
async function withUpload<T>(c: AppContext, spoolDirectory: string, code: string, use: (upload: UploadedBundle) => Promise<T>): Promise<T> {
  let spool;
  try {
    spool = await spoolMultipart(c.req.raw.body, c.req.header("content-type"), { directory: spoolDirectory, field: [...BUNDLE_FIELDS, SIGNATURE_FIELD] });
  } catch (error) {
    if (error instanceof ApiError && error.status === 400) throw new ApiError(400, code, error.message);
    throw error;
  }
  try {
    const bundles = spool.files.filter((file) => file.field !== SIGNATURE_FIELD);
    const signatures = spool.files.filter((file) => file.field === SIGNATURE_FIELD);
    if (bundles.length !== 1) throw new ApiError(400, code, `bundle: exactly one bundle file part is required (got ${bundles.length})`);
    if (signatures.length > 1) throw new ApiError(400, code, "signature: at most one signature part is allowed");
    if (spool.files.some((file) => !isCleanlyDecodedName(file.fileName))) throw new ApiError(400, code, "a file name is not valid UTF-8");
    if (bundles[0].content.size === 0) throw new ApiError(400, code, "bundle: the file is empty");
    const signature = signatures[0];
    if (signature && signature.content.size > SIGNATURE_BYTES_MAX)
      throw new ApiError(422, "SIGNATURE_VERIFICATION_FAILED", `signature: larger than ${SIGNATURE_BYTES_MAX} bytes`);
    return await use({ path: bundles[0].path, content: bundles[0].content, signature: signature ? await readFile(signature.path) : null, source: "upload" });
  } finally {
    await spool.dispose();
  }
}

const by = (c: AppContext) => c.get("principal")?.username ?? "system";

/** Mounts the management routes. */
export function moduleManagementRoutes(deps: ModuleRouteDeps): (app: Hono<AppEnv>, registry: RouteRegistry) => void {
  const { platform, audit } = deps;
  const spoolDirectory = deps.spoolDirectory ?? tmpdir();
  return (app, registry) => {
    addRoute(
      app,
      registry,
      {
        method: "get",
        path: "/api/v1/modules",
        summary: "Installed platform modules, with their state on this controller",
        tag,
        permission: "modules.view",
        response: Type.Array(ModuleSchema),
      },
      () => platform.list(),
    );

    addRoute(
      app,
      registry,
      {
        method: "post",
        path: "/api/v1/modules/platform/upload",
        summary: `Install a module: multipart with the bundle (.tgz or .zip, part \`bundle\`, up to ${MODULE_BUNDLE_BYTES_MAX / 1024 ** 2} MiB) and its detached signature (part \`signature\`); 409 when installed, 422 PLATFORM_INSTALL_FAILED or SIGNATURE_VERIFICATION_FAILED`,
        tag,
        permission: "MODULES_MANAGE",
        response: ModuleSchema,
        successStatus: 201,
      },
      async ({ c }) => {
        const record = await withUpload(c, spoolDirectory, "PLATFORM_INSTALL_FAILED", (upload) => platform.service.install(upload, by(c)));
        await audited(audit, c, {
          action: "platform-module.install",
          resourceType: "module",
          resourceId: record._id,
          details: { version: record.version, sha256: record.bundle.sha256, signedBy: record.signedBy, source: "upload" },
        });
        return c.json(await platform.view(record._id), 201);
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "post",
        path: "/api/v1/modules/platform/registry/install",
        summary:
          "Install (or upgrade) a module from a configured registry: module is id or id@version (@latest or none: the newest); registry pins one of modules.registries",
        tag,
        permission: "MODULES_MANAGE",
        body: Type.Object(
          { module: Type.String({ minLength: 1, maxLength: 200 }), registry: Type.Optional(Type.Union([Type.String({ maxLength: 2048 }), Type.Null()])) },
          { additionalProperties: false },
        ),
        response: ModuleSchema,
        successStatus: 201,
      },
      async ({ body, c }) => {
        const { view, created } = await platform.installFromRegistry(body.module, body.registry ?? null, by(c));
        await audited(audit, c, {
          action: created ? "platform-module.install" : "platform-module.upgrade",
          resourceType: "module",
          resourceId: view.id,
          details: { version: view.version, source: view.source },
        });
        return c.json(view, created ? 201 : 200);
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "get",
        path: "/api/v1/modules/platform/registry",
        summary: "The configured registries and the modules they offer",
        tag,
        permission: "modules.view",
        response: CatalogSchema,
      },
      () => platform.catalog(),
    );

    addRoute(
      app,
      registry,
      {
        method: "get",
        path: "/api/v1/modules/platform/capabilities",
        summary: "Capability providers and the requirements bound to them on this controller",
        tag,
        permission: "modules.view",
        response: CapabilitiesSchema,
      },
      () => platform.capabilities(),
    );

    addRoute(
      app,
      registry,
      {
        method: "get",
        path: "/api/v1/modules/platform/capabilities/stream",
        summary:
          "SSE stream of capability changes (CAPABILITY_* events of the cluster; ticket from POST /api/v1/events/ticket; resume with lastSequence or Last-Event-ID)",
        tag,
        auth: "public",
        query: Type.Object({ ticket: Type.Optional(Type.String({ maxLength: 256 })), lastSequence: Type.Optional(Type.String({ maxLength: 32 })) }),
      },
      async ({ query, c }) => {
        const position = parseResumePosition(query.lastSequence, c.req.header("last-event-id"));
        const redeemed = query.ticket ? await deps.tickets.redeem(query.ticket) : null;
        if (redeemed?.kind === "events" && !(await deps.permissionsOf(redeemed.username))?.has("modules.view"))
          throw forbidden("Missing permission: modules.view");
        const { sink, response } = openSseResponse(c);
        if (redeemed?.kind !== "events") {
          sink.write(sseFrame("error", { message: "Unauthorized" }));
          sink.end();
          return response;
        }
        // The stream outlives the handler: the hub writes to the response until the client goes.
        void deps.hub.serve(sink, position, { accept: (entry) => entry.type.startsWith("CAPABILITY_"), greeting: "Capability changes" });
        return response;
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "get",
        path: "/api/v1/modules/platform/leaked-classloaders",
        summary: "Module workers that did not end after unload, on every controller (pending until they survive one poll, then leaked)",
        tag,
        permission: "modules.view",
        response: LeakReportSchema,
      },
      () => platform.leakReport(),
    );

    addRoute(
      app,
      registry,
      {
        method: "post",
        path: "/api/v1/modules/platform/leaked-classloaders/force-cleanup",
        summary: "Terminate the module workers that did not end after unload, on every controller",
        tag,
        permission: "MODULES_MANAGE",
        response: Type.Object({ terminated: Type.Integer({ description: "Terminated on the controller that took the request" }) }),
      },
      async ({ c }) => {
        const result = await platform.forceCleanup();
        await audited(audit, c, { action: "platform-module.classloader.force-cleanup", resourceType: "module", resourceId: "*", details: result });
        return result;
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "post",
        path: "/api/v1/modules/platform/:moduleId/upgrade",
        summary:
          "Upgrade a module: multipart like the upload; 404 when not installed, 409 when the bundle is another module, 422 PLATFORM_UPGRADE_FAILED (the previous version keeps running)",
        tag,
        permission: "MODULES_MANAGE",
        params: IdParams,
        response: ModuleSchema,
      },
      async ({ params, c }) => {
        const before = (await platform.records.get(params.moduleId))?.version ?? null;
        const record = await withUpload(c, spoolDirectory, "PLATFORM_UPGRADE_FAILED", (upload) => platform.service.upgrade(params.moduleId, upload, by(c)));
        await audited(audit, c, {
          action: "platform-module.upgrade",
          resourceType: "module",
          resourceId: record._id,
          details: { from: before, to: record.version, sha256: record.bundle.sha256, signedBy: record.signedBy },
        });
        return platform.view(record._id);
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "post",
        path: "/api/v1/modules/platform/:moduleId/frontend/reload",
        summary:
          "Re-stage a module's dashboard bundle only (the backend keeps running); optionally multipart with a bundle whose backend is unchanged (409 otherwise)",
        tag,
        permission: "MODULES_MANAGE",
        params: IdParams,
        response: ModuleSchema,
      },
      async ({ params, c }) => {
        const multipart = (c.req.header("content-type") ?? "").toLowerCase().startsWith("multipart/");
        const record = multipart
          ? await withUpload(c, spoolDirectory, "PLATFORM_UPGRADE_FAILED", (upload) => platform.service.reloadFrontend(params.moduleId, upload, by(c)))
          : await platform.service.reloadFrontend(params.moduleId, null, by(c));
        await audited(audit, c, {
          action: "platform-module.frontend.reload",
          resourceType: "module",
          resourceId: record._id,
          details: { contentHash: record.frontend?.contentHash ?? null },
        });
        return platform.view(record._id);
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "delete",
        path: "/api/v1/modules/platform/:moduleId/storage",
        summary: "Drop a module's documents and key-value keys (installed or not)",
        tag,
        permission: "MODULES_MANAGE",
        params: IdParams,
        response: Type.Object({ documents: Type.Integer(), keys: Type.Integer() }),
      },
      async ({ params, c }) => {
        if (!/^[a-z][a-z0-9-]*$/.test(params.moduleId)) throw new ApiError(404, "NOT_FOUND", `No module ${params.moduleId}`);
        const dropped = await platform.dropStorage(params.moduleId);
        await audited(audit, c, { action: "platform-module.storage.drop", resourceType: "module", resourceId: params.moduleId, details: dropped });
        return dropped;
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "delete",
        path: "/api/v1/modules/platform/:moduleId",
        summary: "Remove a module: stopped and unloaded on every controller, its bundle deleted (its storage stays; drop it with DELETE .../storage)",
        tag,
        permission: "MODULES_MANAGE",
        params: IdParams,
        successStatus: 204,
      },
      async ({ params, c }) => {
        const record = await platform.service.remove(params.moduleId);
        await audited(audit, c, { action: "platform-module.delete", resourceType: "module", resourceId: record._id, details: { version: record.version } });
        return c.body(null, 204);
      },
    );
  };
}
