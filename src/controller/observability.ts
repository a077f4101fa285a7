/**
 * The observability wing: the gauges over the domain, the sampled metrics history
 * (`GET /api/v1/metrics/history`) and the latest metrics the plugins reported, whose TPS feeds the
 * history.
 */
import type { ControllerConfig } from "../config/schema.js";
import { FINISHED_STATES } from "../domain/instances/instance-schemas.js";
import type { ControllerLogService } from "../logs/logger.js";
import type { MetricsService } from "../metrics/metrics.js";
import { MetricsHistory } from "../metrics/metrics-history.js";
import { InstanceMetricsService } from "../plugin-api/instance-metrics.js";
import type { Clock } from "../shared/clock.js";
import type { DocumentStore, KvStore } from "../store/ports.js";
import type { ControllerEventBus } from "../events/bus.js";
import type { Domain, PlayersRef } from "./domain.js";

export interface ObservabilityOptions {
  config: ControllerConfig;
  controllerId: string;
  documents: DocumentStore;
  kv: KvStore;
  events: ControllerEventBus;
  metrics: MetricsService;
  clock: Clock;
  logs: ControllerLogService;
  domain: Pick<Domain, "groups" | "nodes" | "instances" | "crashes">;
  players: PlayersRef;
}

export interface Observability {
  metricsHistory: MetricsHistory;
  instanceMetrics: InstanceMetricsService;
}

/** Sets the domain's gauge sources and builds the metrics history and the plugins' metrics. */
export function buildObservability(options: ObservabilityOptions): Observability {
  const { config, documents, metrics, clock, logs, players } = options;
  const { groups, nodes, instances, crashes } = options.domain;
  metrics.setGaugeSources({
    groupsTotal: () => groups.count(),
    nodesTotal: async () => (await nodes.list()).filter((n) => n.state === "ONLINE" || n.state === "DRAINING").length,
    instancesTotal: async () => (await instances.list({ state: "RUNNING" })).length,
    playersTotal: () => (players.current ? players.current.onlineCount() : 0),
    crashesTotal: () => crashes.count(),
    workflowsNodeDrains: () => nodes.drainsWaiting(),
  });
  const metricsHistory = new MetricsHistory({
    documents,
    clock,
    logger: logs.logger("cloud.metrics"),
    controllerId: options.controllerId,
    metrics,
    sources: {
      nodes: async () => (await nodes.list()).filter((n) => n.state === "ONLINE" || n.state === "DRAINING").length,
      instances: async () => (await instances.findDocs()).filter((doc) => !FINISHED_STATES.has(doc.state)),
    },
    intervalMs: config.metrics.collectionIntervalSeconds * 1000,
    retentionMs: config.metrics.retentionHours * 3600 * 1000,
  });
  const instanceMetrics = new InstanceMetricsService(options.kv, options.events, clock, (id, tps) => metricsHistory.reportTps(id, tps));
  return { metricsHistory, instanceMetrics };
}
