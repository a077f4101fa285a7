/**
 * The HTTP wing: every route module mounted on one app (the controller's own, then the logs,
 * capabilities, modules and the caller's extra ones), served on `http.host:http.port`. Requests log
 * under the logical thread name "http" (docs/decisions/platform.md).
 */
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import type { Hono } from "hono";
import type { AuditService } from "../audit/audit-service.js";
import type { AuthService } from "../auth/auth-service.js";
import type { BackupService } from "../backup/backup-service.js";
import type { RestoreCoordination } from "../backup/restore-coordination.js";
import type { ClusterService } from "../cluster/cluster-service.js";
import type { ControllerConfig } from "../config/schema.js";
import type { ControllerEventBus } from "../events/bus.js";
import { createHttpApp } from "../http/app.js";
import { loadDashboardAssets } from "../http/dashboard-assets.js";
import type { ReadinessProbe } from "../http/routes/system.js";
import type { RouteModule, RouteRegistry } from "../http/route.js";
import { adminTokenRoutes } from "../http/routes/admin-tokens.js";
import { backupRoutes } from "../http/routes/backups.js";
import { clusterRoutes } from "../http/routes/cluster.js";
import { crashRoutes } from "../http/routes/crashes.js";
import { deploymentRoutes } from "../http/routes/deployments.js";
import { eventRoutes } from "../http/routes/events.js";
import { groupSchedulingRoutes } from "../http/routes/group-scheduling.js";
import { groupRoutes } from "../http/routes/groups.js";
import { instanceControlRoutes } from "../http/routes/instance-control.js";
import { instanceLogRoutes } from "../http/routes/instance-logs.js";
import { metricsHistoryRoutes } from "../http/routes/metrics-history.js";
import { nodeRoutes } from "../http/routes/nodes.js";
import { overviewRoutes } from "../http/routes/overview.js";
import { playerRoutes } from "../http/routes/players.js";
import { pluginAdminRoutes } from "../http/routes/plugin-admin.js";
import { pluginNetworkRoutes } from "../http/routes/plugin-network.js";
import { pluginRoutes } from "../http/routes/plugin.js";
import { serviceRoutes } from "../http/routes/services.js";
import type { VersionInfo } from "../http/routes/system.js";
import { templateRoutes } from "../http/routes/templates.js";
import type { AppEnv } from "../http/types.js";
import type { ControllerLogService } from "../logs/logger.js";
import type { MetricsService } from "../metrics/metrics.js";
import type { MetricsHistory } from "../metrics/metrics-history.js";
import type { InstanceMetricsService } from "../plugin-api/instance-metrics.js";
import { openPluginStream } from "../plugin-api/plugin-stream.js";
import { TransferTargets } from "../plugin-api/transfer-targets.js";
import { InstanceRemoval } from "../scheduler/instance-removal.js";
import type { SchedulerHost } from "../scheduler/scheduler-host.js";
import type { Clock } from "../shared/clock.js";
import type { Tracing } from "../shared/tracing.js";
import type { DocumentStore, KvStore } from "../store/ports.js";
import type { StartControllerOptions } from "./controller-types.js";
import type { Daemons } from "./daemons.js";
import type { Domain } from "./domain.js";
import type { EventStream } from "./event-stream.js";
import { closeServer, findRootDir, HTTP_DRAIN_TIMEOUT_MS, listen, urlForAddress, type FetchHandler } from "./http-server.js";
import type { Cleanups } from "./lifecycle.js";
import type { Plugins } from "./plugins.js";

export interface HttpOptions {
  config: ControllerConfig;
  logs: ControllerLogService;
  metrics: MetricsService;
  events: ControllerEventBus;
  documents: DocumentStore;
  kv: KvStore;
  clock: Clock;
  tracing: Tracing;
  auth: AuthService;
  audit: AuditService;
  readiness: ReadinessProbe;
  version: VersionInfo;
  cluster: ClusterService;
  domain: Domain;
  scheduler: SchedulerHost;
  daemons: Pick<Daemons, "coordination" | "consoleHub" | "consoleTickets" | "credentials">;
  plugins: Plugins;
  instanceMetrics: InstanceMetricsService;
  metricsHistory: MetricsHistory;
  eventStream: EventStream;
  backups: BackupService;
  restores: RestoreCoordination;
  /** The logs, capabilities and modules' route modules, mounted after the controller's own. */
  moreRouteModules: readonly RouteModule[];
  opts: Pick<StartControllerOptions, "extraRouteModules" | "bodyLimitRoutes" | "templateSpoolDirectory" | "dashboardDir">;
}

/** Builds the HTTP app with every route module. */
export async function buildHttpApp(options: HttpOptions): Promise<{ app: Hono<AppEnv>; registry: RouteRegistry }> {
  const { config, logs, metrics, events, documents, kv, clock, auth, audit, cluster, scheduler, instanceMetrics, eventStream, opts } = options;
  const { groups, instances, crashes, nodes, nodeTokens, overview, templates, deployments } = options.domain;
  const { coordination, consoleHub, consoleTickets, credentials } = options.daemons;
  const { players, transfers, sequences, deliveries } = options.plugins;
  return createHttpApp({
    http: config.http,
    rateLimit: config.rateLimit,
    logs,
    metrics,
    events,
    documents,
    kv,
    auth,
    audit,
    readiness: options.readiness,
    version: options.version,
    routeModules: [
      groupRoutes(groups, audit),
      groupSchedulingRoutes(groups, scheduler, audit),
      deploymentRoutes(deployments, audit),
      serviceRoutes(instances, { removal: new InstanceRemoval({ instances, groups }), audit }),
      instanceControlRoutes({ instances, operations: scheduler, console: consoleHub, tickets: consoleTickets, audit, metrics }),
      instanceLogRoutes({ instances, daemons: coordination.daemons, console: consoleHub, tickets: consoleTickets, events, metrics, clock }),
      crashRoutes(crashes),
      nodeRoutes(nodes, audit),
      adminTokenRoutes(nodeTokens, audit),
      overviewRoutes(overview),
      templateRoutes(templates, audit, { spoolDirectory: opts.templateSpoolDirectory }),
      clusterRoutes(cluster, audit),
      pluginRoutes({
        instances,
        groups,
        players,
        credentials,
        operations: scheduler,
        sequences,
        events,
        metrics: instanceMetrics,
        eventTickets: eventStream.tickets,
        admission: options.domain.capabilities.admission,
      }),
      pluginNetworkRoutes({ instances, groups, players, transfers, sequences }),
      pluginAdminRoutes({ credentials, instances, groups, metrics: instanceMetrics, audit, clock }),
      playerRoutes({ players, targets: new TransferTargets({ instances, groups, players }), transfers, audit }),
      eventRoutes({
        hub: eventStream.hub,
        tickets: eventStream.tickets,
        permissionsOf: (username) => auth.permissionsOfUser(username),
        clock,
        logger: logs.logger("cloud.events.stream"),
        plugin: {
          hub: eventStream.pluginHub,
          open: (id) => openPluginStream({ deliveries, transfers, players, logger: logs.logger("cloud.plugin") }, id),
        },
      }),
      backupRoutes(options.backups, audit),
      metricsHistoryRoutes({ history: options.metricsHistory, enabled: metrics.enabled, clock }),
      ...options.moreRouteModules,
      ...(opts.extraRouteModules ?? []),
    ],
    clock,
    bodyLimitRoutes: opts.bodyLimitRoutes,
    tracing: options.tracing,
    traceUiTemplate: config.telemetry.traceUiTemplate,
    restoreInProgress: () => options.restores.current(),
    dashboard: await loadDashboardAssets(opts.dashboardDir ?? join(findRootDir(), "dist", "dashboard")),
  });
}

/** Serves `app` on `http.host:http.port`; the server's draining close joins `cleanups`. */
export async function serveHttp(
  app: Hono<AppEnv>,
  logs: ControllerLogService,
  config: ControllerConfig,
  cleanups: Cleanups,
): Promise<{ httpUrl: string; port: number }> {
  const serveRequest: FetchHandler = (request, bindings) => logs.withThread("http", () => app.fetch(request, bindings));
  const server = await listen(serveRequest, config.http.host, config.http.port);
  cleanups.push({ name: "HTTP server", run: () => closeServer(server, HTTP_DRAIN_TIMEOUT_MS) });
  const address = server.address() as AddressInfo;
  return { httpUrl: urlForAddress(address), port: address.port };
}
