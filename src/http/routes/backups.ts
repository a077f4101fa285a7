/**
 * Backup and restore routes (spec document 2, "Backup and restore"): create (201, prunes to
 * `backup.retentionCount`), list, show, download, delete, upload, verify and restore. Reading and
 * verifying need BACKUPS_VIEW; creating and deleting BACKUPS_MANAGE; downloading, uploading and
 * restoring BACKUPS_RESTORE (a bundle is the whole database: password hashes, the audit log, the
 * users and their roles); restoring a bundle this cluster did not authenticate (`foreign: true`)
 * an ADMIN, one who holds every permission. Changes are audited as `backup.*` actions.
 */
import type { Hono } from "hono";
import { Type } from "@sinclair/typebox";
import type { AuditRecorder } from "../../audit/types.js";
import { ALL_PERMISSIONS } from "../../auth/permissions.js";
import type { Principal } from "../../auth/principal.js";
import { VERIFY_RETRY_AFTER_SECONDS, type BackupService } from "../../backup/backup-service.js";
import { ApiError, forbidden } from "../../shared/errors.js";
import { audited } from "../audited.js";
import type { BodyLimitRoute } from "../middleware/body-limit.js";
import { addRoute, type RouteRegistry } from "../route.js";
import type { AppEnv } from "../types.js";

const tag = "Backups";
/** Largest bundle an upload may send; the body streams to disk, so this bounds disk, not memory. */
export const BACKUP_UPLOAD_BYTES_MAX = 16 * 1024 ** 3;

/** The upload route streams its body with its own limit. */
export const BACKUP_BODY_LIMIT_ROUTES: readonly BodyLimitRoute[] = [{ method: "POST", path: "/api/v1/backups/upload", maxBytes: BACKUP_UPLOAD_BYTES_MAX }];

const IdParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 64 }) });
const Part = Type.Object({ file: Type.String(), sizeBytes: Type.Integer(), sha256: Type.String() });
const RecordSchema = Type.Object({
  id: Type.String(),
  sizeBytes: Type.Integer(),
  sha256: Type.String({ description: "sha256 of the bundle file" }),
  mongoDocumentCount: Type.Integer({ description: "Documents of every collection together, whatever the document store" }),
  createdAt: Type.String({ description: "When this controller recorded the backup (made or uploaded), by its own clock" }),
  manifestCreatedAt: Type.Optional(Type.String({ description: "The creation time the bundle's manifest states (information only)" })),
  clusterId: Type.Optional(Type.String({ description: "The cluster the manifest names as its maker" })),
  foreign: Type.Optional(
    Type.Boolean({ description: "True when this cluster did not authenticate the bundle: restorable only with foreign: true by an ADMIN" }),
  ),
  controller: Type.Object({ nodeId: Type.String(), softwareVersion: Type.String() }),
  profile: Type.String(),
  documentStore: Type.String(),
  collections: Type.Array(
    Type.Object({ name: Type.String(), documentCount: Type.Integer(), file: Type.String(), sizeBytes: Type.Integer(), sha256: Type.String() }),
  ),
  collectionPrefixGroups: Type.Array(Type.Object({ prefix: Type.String(), collectionCount: Type.Integer() })),
  kv: Type.Array(
    Type.Object({
      part: Type.String(),
      prefix: Type.String(),
      keyCount: Type.Integer(),
      file: Type.String(),
      sizeBytes: Type.Integer(),
      sha256: Type.String(),
    }),
  ),
  blobs: Type.Object({ count: Type.Integer(), totalBytes: Type.Integer(), index: Part }),
});
const Names = Type.Array(Type.String());
const ValidationReportSchema = Type.Object({
  id: Type.String(),
  valid: Type.Boolean(),
  missingFiles: Names,
  missingDirectories: Names,
  missingMongoCollections: Names,
  missingMongoCollectionPrefixes: Names,
  missingRedisPrefixes: Names,
  emptyRequiredFiles: Names,
  checksumMismatches: Names,
  problems: Names,
  authenticated: Type.Boolean({ description: "True when this cluster authenticates the bundle's manifest; valid requires it" }),
});
const IdListSchema = Type.Object({
  count: Type.Integer(),
  ids: Type.Array(Type.String(), { description: "The first ids (at most 20); count says how many in all" }),
});
const RestoreDiffSchema = Type.Object({
  collections: Type.Array(Type.Object({ name: Type.String(), added: IdListSchema, replaced: IdListSchema, removed: IdListSchema, unchanged: Type.Integer() })),
  blobs: Type.Union([Type.Object({ added: IdListSchema, removed: IdListSchema }), Type.Null()]),
});
const RestoreReportSchema = Type.Object({
  id: Type.String(),
  dryRun: Type.Boolean(),
  foreign: Type.Boolean({ description: "True when the bundle is not authenticated by this cluster (taken with foreign: true)" }),
  filesystem: Type.Object({ applied: Type.Boolean(), entryCount: Type.Integer(), rollbackRoot: Type.Union([Type.String(), Type.Null()]) }),
  datastores: Type.Object({ applied: Type.Boolean(), mongoCollections: Names, mongoPrefixGroups: Names, redisPrefixes: Names }),
  diff: Type.Union([RestoreDiffSchema, Type.Null()], {
    description: "A dry run's diff: what the restore would add, replace and remove; null on a restore that ran",
  }),
});
/** `id` is checked by the handler so that its absence is the spec's 400 VALIDATION_ERROR. */
const RestoreBody = Type.Object({
  id: Type.Optional(Type.Unknown({ description: "The backup to restore (required)" })),
  dryRun: Type.Boolean({ default: false }),
  filesystem: Type.Boolean({ default: true }),
  datastores: Type.Boolean({ default: true }),
  foreign: Type.Boolean({
    default: false,
    description: "Take a bundle this cluster did not authenticate (another cluster's: the migration path); ADMIN only",
  }),
});

/** An ADMIN: holds every permission of the catalog (the ADMIN role does; a custom role may too). */
function isAdministrator(principal: Principal | null): boolean {
  return principal !== null && ALL_PERMISSIONS.every((permission) => principal.permissions.has(permission));
}

/** Mounts the backup and restore routes. */
export function backupRoutes(backups: BackupService, audit: AuditRecorder): (app: Hono<AppEnv>, registry: RouteRegistry) => void {
  return (app, registry) => {
    addRoute(
      app,
      registry,
      {
        method: "post",
        path: "/api/v1/backups",
        summary: "Back up the document store, the key-value counters and the template blobs into one bundle; prunes to backup.retentionCount",
        tag,
        permission: "BACKUPS_MANAGE",
        response: RecordSchema,
        successStatus: 201,
      },
      async ({ c }) => {
        const record = await backups.create();
        await audited(audit, c, {
          action: "backup.create",
          resourceType: "backup",
          resourceId: record.id,
          details: { sizeBytes: record.sizeBytes, mongoDocumentCount: record.mongoDocumentCount },
        });
        return c.json(record, 201);
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "get",
        path: "/api/v1/backups",
        summary: "Backups held by this controller, newest first",
        tag,
        permission: "BACKUPS_VIEW",
        response: Type.Array(RecordSchema),
      },
      () => backups.list(),
    );

    addRoute(
      app,
      registry,
      {
        method: "post",
        path: "/api/v1/backups/upload",
        summary: `Upload a bundle made elsewhere (the tar.gz as the body, up to ${BACKUP_UPLOAD_BYTES_MAX / 1024 ** 3} GiB, streamed); it must verify (422 INVALID_BUNDLE); one this cluster did not authenticate is recorded as foreign`,
        tag,
        permission: "BACKUPS_RESTORE",
        response: RecordSchema,
        successStatus: 201,
      },
      async ({ c }) => {
        const record = await backups.upload(c.req.raw.body);
        await audited(audit, c, {
          action: "backup.upload",
          resourceType: "backup",
          resourceId: record.id,
          details: { sizeBytes: record.sizeBytes, foreign: record.foreign === true },
        });
        return c.json(record, 201);
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "get",
        path: "/api/v1/backups/:id",
        summary: "One backup's manifest",
        tag,
        permission: "BACKUPS_VIEW",
        params: IdParams,
        response: RecordSchema,
      },
      ({ params }) => backups.get(params.id),
    );

    addRoute(
      app,
      registry,
      {
        method: "get",
        path: "/api/v1/backups/:id/download",
        summary: "The bundle (tar.gz), streamed: the whole database, password hashes and audit log included",
        tag,
        permission: "BACKUPS_RESTORE",
        params: IdParams,
      },
      async ({ params }) => {
        const { record, stream } = await backups.openDownload(params.id);
        return new Response(stream, {
          headers: {
            "content-type": "application/gzip",
            "content-length": String(record.sizeBytes),
            "content-disposition": `attachment; filename="backup-${record.id}.tar.gz"`,
          },
        });
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "delete",
        path: "/api/v1/backups/:id",
        summary: "Delete a backup",
        tag,
        permission: "BACKUPS_MANAGE",
        params: IdParams,
        response: RecordSchema,
      },
      async ({ params, c }) => {
        const record = await backups.delete(params.id);
        await audited(audit, c, { action: "backup.delete", resourceType: "backup", resourceId: record.id });
        return record;
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "post",
        path: "/api/v1/backups/:id/verify",
        summary:
          "Verify a bundle: entries, checksums, allowed collections, required collections and prefixes, this cluster's authentication; valid only when every list is empty. One at a time: 503 VERIFY_BUSY",
        tag,
        permission: "BACKUPS_VIEW",
        params: IdParams,
        response: ValidationReportSchema,
      },
      async ({ params, c }) => {
        try {
          return await backups.verify(params.id);
        } catch (err) {
          if (err instanceof ApiError && err.code === "VERIFY_BUSY") c.header("Retry-After", String(VERIFY_RETRY_AFTER_SECONDS));
          throw err;
        }
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "post",
        path: "/api/v1/restore",
        summary:
          "Restore a backup (id required: 400 VALIDATION_ERROR; a bundle failing validation, or not authenticated by this cluster without foreign: true: 422 RESTORE_REJECTED; foreign: true needs an ADMIN); a dry run changes nothing",
        tag,
        permission: "BACKUPS_RESTORE",
        body: RestoreBody,
        response: RestoreReportSchema,
      },
      async ({ body, c, principal }) => {
        if (typeof body.id !== "string" || body.id.trim() === "") throw new ApiError(400, "VALIDATION_ERROR", "id: required, the backup to restore");
        // A foreign bundle replaces the users and roles with ones nobody here vouches for: whoever takes it must hold everything already.
        if (body.foreign && !isAdministrator(principal)) throw forbidden("Restoring a foreign bundle (foreign: true) needs an ADMIN (every permission)");
        const report = await backups.restore(body.id, {
          dryRun: body.dryRun,
          filesystem: body.filesystem,
          datastores: body.datastores,
          foreign: body.foreign,
        });
        if (!report.dryRun) {
          await audited(audit, c, {
            action: "backup.restore",
            resourceType: "backup",
            resourceId: report.id,
            details: { filesystem: report.filesystem, collections: report.datastores.mongoCollections.length, foreign: report.foreign },
          });
        }
        return report;
      },
    );
  };
}
