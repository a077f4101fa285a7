/** GET /api/v1/overview: node, instance, player and group counts. */
import type { Hono } from "hono";
import { OverviewSchema, type OverviewService } from "../../domain/overview/overview-service.js";
import { addRoute, type RouteRegistry } from "../route.js";
import type { AppEnv } from "../types.js";

/** Mounts the overview route. */
export function overviewRoutes(overview: OverviewService): (app: Hono<AppEnv>, registry: RouteRegistry) => void {
  return (app, registry) => {
    addRoute(
      app,
      registry,
      {
        method: "get",
        path: "/api/v1/overview",
        summary: "Counts of nodes, live instances, players and groups",
        tag: "System",
        permission: "system.view",
        response: OverviewSchema,
      },
      () => overview.get(),
    );
  };
}
