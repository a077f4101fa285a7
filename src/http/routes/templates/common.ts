/**
 * What every group of template routes shares: the OpenAPI tag, the parameter and record schemas, and
 * the scope a group is mounted with.
 */
import type { Hono } from "hono";
import { Type } from "@sinclair/typebox";
import type { AuditRecorder } from "../../../audit/types.js";
import type { TemplateService } from "../../../templates/template-service.js";
import type { RouteRegistry } from "../../route.js";
import type { AppEnv } from "../../types.js";

export const tag = "Templates";
export const Name = Type.String({ minLength: 1, maxLength: 256 });
export const NameParams = Type.Object({ name: Name });
export const PathField = Type.String({ maxLength: 4096 });
export const HashField = Type.String({ maxLength: 128 });

export const TemplateSchema = Type.Object({
  name: Type.String(),
  description: Type.String(),
  platform: Type.String(),
  hash: Type.String(),
  sizeBytes: Type.Integer(),
});

/** What a group of template routes is mounted with. */
export interface TemplateRouteScope {
  app: Hono<AppEnv>;
  registry: RouteRegistry;
  templates: TemplateService;
  audit: AuditRecorder;
  /** Where uploads are spooled while they stream in. */
  spoolDirectory: string;
}
