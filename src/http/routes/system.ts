/** `GET /api/v1/system/version` and `GET /api/v1/system/ready`, both public (probes and the CLI call them unauthenticated). */
import { Hono } from "hono";
import { Type } from "@sinclair/typebox";
import type { Logger } from "../../logs/types.js";
import { addRoute, type RouteModule } from "../route.js";
import type { AppEnv } from "../types.js";

/** Software version, commit and runtime, resolved once at startup (see `version-info.ts`). */
export interface VersionInfo {
  version: string;
  gitCommit: string;
  runtimeVersion: string;
}

/** The four readiness checks, each a real probe of its component. */
export interface ReadinessProbe {
  checks(): Promise<Record<string, boolean>>;
}

export const VersionSchema = Type.Object({
  version: Type.String(),
  gitCommit: Type.String(),
  runtimeVersion: Type.String({ description: "The Node.js version" }),
  javaVersion: Type.String({ description: "Name kept from the specification; same value as runtimeVersion" }),
});

export const ReadinessSchema = Type.Object({
  status: Type.Union([Type.Literal("READY"), Type.Literal("NOT_READY")]),
  checks: Type.Record(Type.String(), Type.Boolean()),
});

export const systemRoutes =
  (deps: { readiness: ReadinessProbe; version: VersionInfo; logger: Logger }): RouteModule =>
  (app, registry) => {
    const sub = new Hono<AppEnv>();
    addRoute(
      sub,
      registry,
      {
        method: "get",
        path: "/api/v1/system/version",
        summary: "Software version, commit and runtime version",
        tag: "system",
        auth: "public",
        response: VersionSchema,
      },
      () => ({ ...deps.version, javaVersion: deps.version.runtimeVersion }),
    );
    addRoute(
      sub,
      registry,
      {
        method: "get",
        path: "/api/v1/system/ready",
        summary: "Readiness: 200 READY when every check passes, else 503 NOT_READY",
        tag: "system",
        auth: "public",
        response: ReadinessSchema,
      },
      async ({ c }) => {
        let checks: Record<string, boolean>;
        try {
          checks = await deps.readiness.checks();
        } catch (err) {
          deps.logger.warn("Readiness probe failed", err);
          checks = {};
        }
        const ready = Object.keys(checks).length > 0 && Object.values(checks).every(Boolean);
        return c.json({ status: ready ? "READY" : "NOT_READY", checks }, ready ? 200 : 503);
      },
    );
    app.route("/", sub);
  };
