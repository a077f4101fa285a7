/**
 * `GET /api/v1/metrics/history` (docs/decisions/metrics.md): the sampled history the dashboard
 * charts from, with permission `system.view` (the overview's). 404 when `metrics.enabled` is false,
 * like /metrics: nothing is collected then.
 */
import type { Hono } from "hono";
import { Type } from "@sinclair/typebox";
import { parseIsoMs } from "../../domain/shared/time.js";
import { BASE_SERIES, pointsPerSeriesMax, seriesPerQueryMax, type HistoryAnswer, type HistoryQuery } from "../../metrics/metrics-history.js";
import type { Clock } from "../../shared/clock.js";
import { notFound, validationError } from "../../shared/errors.js";
import { addRoute, type RouteRegistry } from "../route.js";
import type { AppEnv } from "../types.js";

/** Range of a query that names no `from`. */
export const DEFAULT_HISTORY_RANGE_MS = 60 * 60 * 1000;
const SERIES_NAME = /^[A-Za-z0-9._:-]{1,200}$/;

const HistoryQuerySchema = Type.Object({
  /** Comma-separated series names; the base series when absent. */
  series: Type.Optional(Type.String({ maxLength: 10_000 })),
  /** ISO 8601; one hour before `to` when absent. */
  from: Type.Optional(Type.String({ maxLength: 64 })),
  /** ISO 8601, exclusive; now when absent. */
  to: Type.Optional(Type.String({ maxLength: 64 })),
  /** Seconds per point; at least the collection interval, and the range holds at most 1,000 points. */
  step: Type.Optional(Type.Integer({ minimum: 1, maximum: 31 * 24 * 3600 })),
});

const HistorySchema = Type.Object({
  from: Type.String({ format: "date-time" }),
  to: Type.String({ format: "date-time" }),
  stepSeconds: Type.Number(),
  truncated: Type.Boolean(),
  series: Type.Array(Type.Object({ name: Type.String(), points: Type.Array(Type.Tuple([Type.Number(), Type.Number()])) })),
});

/** What the route needs of the history. */
export interface HistoryReader {
  readonly intervalMs: number;
  query(query: HistoryQuery): Promise<HistoryAnswer>;
}

export function metricsHistoryRoutes(deps: { history: HistoryReader; enabled: boolean; clock: Clock }): (app: Hono<AppEnv>, registry: RouteRegistry) => void {
  return (app, registry) => {
    addRoute(
      app,
      registry,
      {
        method: "get",
        path: "/api/v1/metrics/history",
        summary:
          "Sampled history for charts: series nodes, instances, players, players:<group>, scheduler.tickMs, http.latencyMs, http.requests, tps:<instance>; each point [epoch ms, mean of the step]",
        tag: "System",
        permission: "system.view",
        query: HistoryQuerySchema,
        response: HistorySchema,
      },
      async ({ query }) => {
        if (!deps.enabled) throw notFound("Metrics are disabled");
        const series = query.series === undefined ? [...BASE_SERIES] : [...new Set(query.series.split(",").map((name) => name.trim()))];
        if (series.length === 0 || series.length > seriesPerQueryMax) throw validationError(`series: between 1 and ${seriesPerQueryMax} names`);
        const bad = series.find((name) => !SERIES_NAME.test(name));
        if (bad !== undefined) throw validationError(`series: ${JSON.stringify(bad)} is not a series name`);
        const toMs = query.to ? parseIsoMs(query.to, "to") : deps.clock.nowMs();
        const fromMs = query.from ? parseIsoMs(query.from, "from") : toMs - DEFAULT_HISTORY_RANGE_MS;
        if (fromMs >= toMs) throw validationError("from: must be before to");
        const rangeMs = toMs - fromMs;
        const minimumStepMs = Math.max(deps.history.intervalMs, Math.ceil(rangeMs / pointsPerSeriesMax / 1000) * 1000);
        const stepMs = query.step === undefined ? minimumStepMs : query.step * 1000;
        if (stepMs < deps.history.intervalMs) throw validationError(`step: at least the collection interval (${deps.history.intervalMs / 1000} s)`);
        if (rangeMs / stepMs > pointsPerSeriesMax)
          throw validationError(`step: the range holds at most ${pointsPerSeriesMax} points; use ${minimumStepMs / 1000} s or more`);
        return deps.history.query({ series, fromMs, toMs, stepMs });
      },
    );
  };
}
