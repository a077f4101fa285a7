/** `GET /metrics`: Prometheus text format 0.0.4, no authentication, outside the subnet guard; 404 when disabled. */
import { Hono } from "hono";
import { notFound } from "../../shared/errors.js";
import type { HttpMetricsService } from "../app.js";
import { addRoute, type RouteModule } from "../route.js";
import type { AppEnv } from "../types.js";

export const PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

export const metricsRoutes =
  (deps: { metrics: HttpMetricsService }): RouteModule =>
  (app, registry) => {
    const sub = new Hono<AppEnv>();
    addRoute(
      sub,
      registry,
      { method: "get", path: "/metrics", summary: "Prometheus metrics (text format 0.0.4)", tag: "system", auth: "public" },
      async ({ c }) => {
        if (!deps.metrics.enabled) throw notFound("Metrics are disabled");
        const text = await deps.metrics.render();
        return c.body(text, 200, { "content-type": deps.metrics.contentType ?? PROMETHEUS_CONTENT_TYPE });
      },
    );
    app.route("/", sub);
  };
