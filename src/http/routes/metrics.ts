/** `GET /metrics`: Prometheus text format 0.0.4, no authentication, outside the subnet guard; 404 when disabled. */
import { Hono } from "hono";
import { notFound } from "../../shared/errors.js";
import { addRoute, type RouteModule } from "../route.js";
import type { AppEnv } from "../types.js";

export const PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

/** What `/metrics` needs of the metrics service. */
export interface MetricsExposition {
  /** False when `metrics.enabled` is false: /metrics answers 404. */
  readonly enabled: boolean;
  /** Prometheus text exposition (format 0.0.4). */
  render(): Promise<string>;
  /** Content type of {@link render}'s output; defaults to `text/plain; version=0.0.4; charset=utf-8`. */
  readonly contentType?: string;
}

export const metricsRoutes =
  (deps: { metrics: MetricsExposition }): RouteModule =>
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
