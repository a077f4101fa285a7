/** Crash routes (spec document 1, "Crashes"): list with group, node and from filters; get. */
import type { Hono } from "hono";
import { Type } from "@sinclair/typebox";
import type { CrashService } from "../../domain/crashes/crash-service.js";
import { crashListMax } from "../../domain/crashes/crash-service.js";
import { CrashSchema } from "../../domain/crashes/crash-schemas.js";
import { addRoute, type RouteRegistry } from "../route.js";
import type { AppEnv } from "../types.js";

const tag = "Crashes";
const ListQuery = Type.Object({
  group: Type.Optional(Type.String({ maxLength: 256 })),
  node: Type.Optional(Type.String({ maxLength: 256 })),
  /** ISO 8601: crashes at or after this instant. */
  from: Type.Optional(Type.String({ maxLength: 64 })),
  /** The newest `limit` records (default 1,000). */
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: crashListMax })),
});

/** Mounts the crash routes. */
export function crashRoutes(crashes: CrashService): (app: Hono<AppEnv>, registry: RouteRegistry) => void {
  return (app, registry) => {
    addRoute(
      app,
      registry,
      {
        method: "get",
        path: "/api/v1/crashes",
        summary: "List crash records, newest first",
        tag,
        permission: "crashes.view",
        query: ListQuery,
        response: Type.Array(CrashSchema),
      },
      ({ query }) => crashes.list({ group: query.group, node: query.node, from: query.from || undefined, limit: query.limit }),
    );

    addRoute(
      app,
      registry,
      {
        method: "get",
        path: "/api/v1/crashes/:id",
        summary: "Get one crash record",
        tag,
        permission: "crashes.view",
        params: Type.Object({ id: Type.String({ minLength: 1, maxLength: 256 }) }),
        response: CrashSchema,
      },
      ({ params }) => crashes.get(params.id),
    );
  };
}
