/**
 * The composition root: the only place that knows every concrete service and the only one that
 * holds the whole configuration (each room gets the slices it reads). It reads as a table of
 * contents: each wing is built by its own builder in this directory (stores, backups, cluster,
 * domain, observability, daemons and coordination, scheduling, plugin API, modules, logs, HTTP),
 * in the order they must start; every wing pushes the cleanup of what it started onto one list and
 * `stop()` runs it in reverse. The HTTP tests start the same composition
 * (test/support/http-app.ts) with overrides and the background components turned off
 * ({@link ControllerComponents}); there is no second assembly.
 */
import { AuditService } from "../audit/audit-service.js";
import { startAuditPruner } from "../audit/audit-pruner.js";
import { AuthService } from "../auth/auth-service.js";
import { startClusterService } from "../cluster/start-cluster.js";
import type { ControllerConfig } from "../config/schema.js";
import { KvMutex } from "../coordination/kv-mutex.js";
import { createEventBus } from "../events/bus.js";
import { createReadinessProbe } from "../http/readiness.js";
import { resolveVersionInfo } from "../http/version-info.js";
import { createLogService } from "../logs/logger.js";
import { createMetrics } from "../metrics/metrics.js";
import { systemClock } from "../shared/clock.js";
import { createTracing } from "../shared/tracing.js";
import { buildBackups } from "./backups.js";
import { allComponents, type ControllerComponents, type RunningController, type StartControllerOptions } from "./controller-types.js";
import { buildDaemons } from "./daemons.js";
import { buildDomain, type PlayersRef } from "./domain.js";
import { startEventStream } from "./event-stream.js";
import { buildHttpApp, serveHttp } from "./http.js";
import { findRootDir, LISTENING_MESSAGE_PREFIX } from "./http-server.js";
import { EVENT_FLUSH_TIMEOUT_MS, flushWithin, runCleanups, type Cleanups } from "./lifecycle.js";
import { buildLogsAndSharing } from "./logs-and-sharing.js";
import { buildModules } from "./modules.js";
import { buildObservability } from "./observability.js";
import { buildPlugins } from "./plugins.js";
import { buildScheduling } from "./scheduling.js";
import { claimPresence } from "./presence.js";
import { openControllerStores, type ControllerStores } from "./stores.js";

export type { ControllerComponents, ControllerServices, RunningController, StartControllerOptions } from "./controller-types.js";
export { HTTP_DRAIN_TIMEOUT_MS, LISTENING_MESSAGE_PREFIX, urlForAddress } from "./http-server.js";
export { EVENT_FLUSH_TIMEOUT_MS } from "./lifecycle.js";

/** Builds and starts every component of a controller for `config`. */
export async function startController(config: ControllerConfig, opts: StartControllerOptions = {}): Promise<RunningController> {
  const clock = opts.clock ?? systemClock;
  const env = opts.env ?? process.env;
  const components: ControllerComponents = { ...allComponents, ...opts.components };
  const logs = createLogService({ level: config.logging.level, format: config.logging.format, clock }, opts.logOut);
  const log = logs.logger("cloud.controller");
  log.info(`Starting controller: profile ${config.runtime.profile}, log level ${logs.level}`);

  const metrics = createMetrics({ enabled: config.metrics.enabled, processMetrics: opts.processMetrics });
  const events = createEventBus({ logger: logs.logger("cloud.events"), clock });
  const cleanups: Cleanups = [];
  let running = true;
  let stopping: Promise<void> | null = null;
  const stopController = (): Promise<void> => {
    stopping ??= (async () => {
      running = false;
      log.info("Stopping controller");
      await runCleanups(cleanups, log);
      log.info("Controller stopped");
    })();
    return stopping;
  };

  try {
    // Stores, then auth and backups: a restore a killed controller left half done is finished before anything reads them.
    const stores: ControllerStores = await (opts.openStores ?? openControllerStores)(config, logs, clock);
    cleanups.push({ name: "stores", run: () => stores.close() });
    // Runs after the HTTP server closed and before the stores close: handlers may still write.
    cleanups.push({ name: "event bus", run: () => flushWithin(events, EVENT_FLUSH_TIMEOUT_MS, log) });
    const { documents, kv, blobs } = stores;
    // Production: refused when another live process runs under this controller id (a copied raft.dataDir).
    const presence = await claimPresence({ config, kv, clock, logs, schedules: components.scheduler, onTakenOver: () => void stopController() });
    if (presence) cleanups.push({ name: "controller presence", run: () => presence.stop() });
    // Several controllers write groups, nodes, templates, join tokens, users and roles, and
    // deployment controls: each record's read-modify-write runs under a cluster-wide lock.
    const recordLocks = new KvMutex(kv);
    const auth = new AuthService({
      documents,
      config: config.auth,
      clock,
      logger: logs.logger("cloud.auth"),
      env,
      passwordParams: opts.passwordParams,
      tokensRevoked: () => metrics.jwtRevocations.inc(),
      directoryLock: recordLocks.scoped("auth:"),
    });
    const version = opts.version ?? resolveVersionInfo({ rootDir: findRootDir(), env });
    const backups = await buildBackups({ config, documents, kv, blobs, auth, version, clock, logs });
    await auth.start();
    const audit = new AuditService({ documents, clock });

    // The cluster member, before the daemon gateway: its CA document takes the Raft-held cluster CA.
    const cluster = await startClusterService({
      ...{ cluster: config.cluster, raft: config.raft, data: config.data, http: config.http, grpc: config.grpc },
      ...{ documents, audit, clock, logs, env },
      configPath: opts.configPath,
      onLeft: () => void stopController(),
    });
    cleanups.push({ name: "cluster", run: () => cluster.stop() });
    // Stopped late (cleanups run in reverse): the spans of the last requests are exported.
    const tracing = createTracing(config.telemetry, { name: "cloud-controller", instanceId: cluster.nodeId });
    cleanups.push({ name: "tracing", run: () => tracing.shutdown() });
    backups.joinedCluster(cluster);

    // The wings, built in dependency order; the player registry is bound when the plugin API is built.
    const players: PlayersRef = { current: null };
    const wiring = { config, cluster, documents, kv, events, metrics, clock, logs, cleanups };
    const domain = buildDomain({ ...wiring, blobs, log, audit, recordLocks, players, spoolDirectory: opts.templateSpoolDirectory, links: auth.links });
    const { metricsHistory, instanceMetrics } = buildObservability({ ...wiring, controllerId: cluster.nodeId, domain, players });
    const daemons = await buildDaemons({ ...wiring, log, auth, audit, tracing, recordLocks, domain, tuning: opts.gatewayTuning, presence });
    const schedulingParts = { tracing, auth, domain, daemons, instanceMetrics, players, backups, runsNoScheduler: !components.scheduler };
    const scheduling = buildScheduling({ ...wiring, ...schedulingParts, tuning: opts.schedulerTuning });
    const { scheduler } = scheduling;
    const plugins = await buildPlugins({ ...wiring, domain, scheduler, players });
    const eventStream = await startEventStream({ kv, bus: events, metrics, clock, logger: logs.logger("cloud.events.stream"), tuning: opts.eventStreamTuning });
    const modules = buildModules({
      ...{ config, documents, kv, blobs, recordLocks, cluster, events, eventStream, audit, logs, metrics, clock },
      permissionsOf: (username) => auth.permissionsOfUser(username),
      spoolDirectory: opts.templateSpoolDirectory,
      tuning: opts.moduleTuning,
    });
    scheduling.setModuleRestart(() => modules.restartAfterRestore());
    const readiness = createReadinessProbe({
      stateStore: () => documents.ping(),
      coordinationStore: () => kv.ping(),
      scheduler: components.scheduler ? () => running && scheduler.isRunning() : () => running,
      platformModules: () => running && modules.ready(),
      ...opts.readiness,
    });
    const logsAndSharing = buildLogsAndSharing({
      ...{ config, env, logs, metrics, documents, kv, audit, clock, cluster, readiness, version },
      connectedHere: (nodeId) => daemons.gateway.isConnected(nodeId),
      ...{ nodes: domain.nodes, crashes: domain.crashes, overview: domain.overview },
      tuning: opts.logsAndSharingTuning,
      shareSettings: domain.capabilities.settings.share,
    });
    daemons.setLogsAndSharing(logsAndSharing);

    // Serving: the HTTP API, then the daemon gateway (which tells daemons the HTTP port).
    const { app, registry } = await buildHttpApp({
      ...{ config, logs, metrics, events, documents, kv, clock, tracing, auth, audit, readiness, version, cluster, domain, scheduler, daemons },
      ...{ plugins, instanceMetrics, metricsHistory, eventStream, backups: backups.backups, restores: scheduling.restores, opts },
      moreRouteModules: [...logsAndSharing.routeModules, ...domain.capabilities.routeModules, ...modules.routeModules],
    });
    const { httpUrl, port } = await serveHttp(app, logs, config, cleanups);
    // Before the server closes: stopping the stream ends the open streams, which never finish on their own.
    cleanups.push({ name: "event stream", run: () => eventStream.stop() });
    cleanups.push({ name: "log streams", run: () => logsAndSharing.stop() });
    daemons.setHttpPort(port);
    log.info(`${LISTENING_MESSAGE_PREFIX}${httpUrl}`);
    const grpcPort = components.daemonGateway ? await daemons.start(httpUrl) : 0;

    // The background parts.
    await plugins.startPlayers();
    await modules.start();
    cleanups.push({ name: "modules", run: () => modules.stop() });
    plugins.start();
    if (metrics.enabled) {
      metricsHistory.start();
      cleanups.push({ name: "metrics history", run: () => metricsHistory.stop() });
    }
    if (components.auditPruner) {
      const stopAuditPruner = startAuditPruner({
        audit,
        runUnderLease: (name, ttlMs, fn) => cluster.runUnderLease(name, ttlMs, fn),
        retentionDays: () => domain.capabilities.settings.auditRetentionDays(),
        logger: logs.logger("cloud.audit"),
        clock,
      });
      cleanups.push({ name: "audit pruner", run: stopAuditPruner });
    }
    if (components.scheduler) await scheduling.start();
    // After the scheduler started: a restore under way elsewhere pauses it at once.
    await backups.startRestores(scheduling.restores, cleanups);

    const { credentials, consoleHub, gateway } = daemons;
    const { players: playerRegistry, transfers, drainTransfers } = plugins;
    return {
      ...{ httpUrl, grpcPort, gateway, scheduler, nodeTokens: domain.nodeTokens, app, registry, config, logs, metrics, events },
      services: {
        ...{ documents, kv, blobs, auth, audit, cluster, credentials, consoleHub, eventStream, metricsHistory, instanceMetrics, logsAndSharing },
        ...{ groups: domain.groups, instances: domain.instances, crashes: domain.crashes, nodes: domain.nodes, nodeTokens: domain.nodeTokens },
        ...{ overview: domain.overview, templates: domain.templates, deployments: domain.deployments, capabilities: domain.capabilities },
        ...{ players: playerRegistry, transfers, drainTransfers, backups: backups.backups, modules: modules.platform },
      },
      stop: stopController,
    };
  } catch (err) {
    running = false;
    await runCleanups(cleanups, log);
    throw err;
  }
}
