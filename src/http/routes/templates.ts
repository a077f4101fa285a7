/**
 * Template routes (spec document 1, "Templates"): metadata, versions and rollback, the files API,
 * variables, inheritance, search, export and import, plus the two routes the daemon fetches versions
 * with (manifest and blob). Field names are recorded in docs/decisions/templates.md. Every mutation
 * is audited with its template.* action (spec document 2).
 *
 * Uploads and imports stream: their multipart bodies are spooled to disk part by part (bounded by
 * {@link TEMPLATE_UPLOAD_BYTES_MAX}) and archives are unpacked from there entry by entry; downloads,
 * blobs and exports are served one stored chunk at a time, exports gzip-compressed as they are sent.
 *
 * Each group of routes lives in templates/; this file mounts them in the order Hono matches them.
 */
import { tmpdir } from "node:os";
import type { Hono } from "hono";
import type { AuditRecorder } from "../../audit/types.js";
import type { TemplateService } from "../../templates/template-service.js";
import type { RouteRegistry } from "../route.js";
import type { AppEnv } from "../types.js";
import { mountTemplateExportRoute, mountTemplateImportRoute } from "./templates/archives.js";
import { mountTemplateFetchRoutes } from "./templates/daemon-fetch.js";
import { mountTemplateFileRoutes } from "./templates/files.js";
import { mountTemplateLayerAndSearchRoutes } from "./templates/layers-and-search.js";
import { mountTemplateRecordRoutes } from "./templates/records.js";
import { mountTemplateVariableRoutes } from "./templates/variables.js";
import { mountTemplateVersionRoutes } from "./templates/versions.js";

export { TEMPLATE_SEARCH_RESULTS_MAX } from "./templates/layers-and-search.js";
export { TEMPLATE_BODY_LIMIT_ROUTES, TEMPLATE_UPLOAD_BYTES_MAX } from "./templates/transfer.js";

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
    const scope = { app, registry, templates, audit, spoolDirectory };
    mountTemplateImportRoute(scope); // first: /templates/import must not be read as a template name
    mountTemplateRecordRoutes(scope);
    mountTemplateVersionRoutes(scope);
    mountTemplateFetchRoutes(scope);
    mountTemplateFileRoutes(scope);
    mountTemplateVariableRoutes(scope);
    mountTemplateLayerAndSearchRoutes(scope);
    mountTemplateExportRoute(scope);
  };
}
