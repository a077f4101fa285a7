/**
 * The composition root: the only place that knows every concrete service and the only one that
 * holds the whole configuration (each room gets the slices it reads). It builds logging, metrics,
 * the event bus, the stores, auth, audit and the domain services with explicit dependencies, mounts
 * them on the HTTP app and serves it; `stop()` tears everything down in reverse. The HTTP tests
 * start the same composition (test/support/http-app.ts) with overrides and the background
 * components turned off ({@link ControllerComponents}); there is no second assembly.
 */
import type { AddressInfo } from "node:net";
import { existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { serve, type ServerType } from "@hono/node-server";
import type { Hono } from "hono";
import { AuditService } from "../audit/audit-service.js";
import { AuthService } from "../auth/auth-service.js";
import type { ScryptParams } from "../auth/password.js";
import type { ControllerConfig } from "../config/schema.js";
import { CrashService } from "../domain/crashes/crash-service.js";
import { GroupService } from "../domain/groups/group-service.js";
import { InstanceService } from "../domain/instances/instance-service.js";
import { NodeTokenService } from "../domain/node-tokens/node-token-service.js";
import { NodeService } from "../domain/nodes/node-service.js";
import { OverviewService } from "../domain/overview/overview-service.js";
import { createEventBus, type ControllerEventBus } from "../events/bus.js";
import { createHttpApp } from "../http/app.js";
import type { BodyLimitRoute } from "../http/middleware/body-limit.js";
import { createReadinessProbe, type ReadinessComponents } from "../http/readiness.js";
import type { RouteModule, RouteRegistry } from "../http/route.js";
import type { VersionInfo } from "../http/routes/system.js";
import type { AppEnv } from "../http/types.js";
import { adminTokenRoutes } from "../http/routes/admin-tokens.js";
import { crashRoutes } from "../http/routes/crashes.js";
import { groupRoutes } from "../http/routes/groups.js";
import { nodeRoutes } from "../http/routes/nodes.js";
import { overviewRoutes } from "../http/routes/overview.js";
import { serviceRoutes } from "../http/routes/services.js";
import { templateRoutes } from "../http/routes/templates.js";
import { resolveVersionInfo } from "../http/version-info.js";
import { createLogService, type ControllerLogService, type LogOutput } from "../logs/logger.js";
import type { Logger } from "../logs/types.js";
import { createMetrics, type MetricsService } from "../metrics/metrics.js";
import { MetricsHistory } from "../metrics/metrics-history.js";
import { metricsHistoryRoutes } from "../http/routes/metrics-history.js";
import { systemClock, type Clock } from "../shared/clock.js";
import { createTracing } from "../shared/tracing.js";
import { tracedDaemonLink } from "../scheduler/traced-commands.js";
import { TemplateService } from "../templates/template-service.js";
import { createDaemonGateway } from "../gateway/create-gateway.js";
import type { DaemonGateway, GatewayTuning } from "../gateway/daemon-gateway.js";
import { ConsoleHub } from "../gateway/console-hub.js";
import { controllerMessage } from "../wire/daemon-proto.js";
import { Tickets } from "../coordination/tickets.js";
import { FINISHED_STATES } from "../domain/instances/instance-schemas.js";
import { groupSchedulingRoutes } from "../http/routes/group-scheduling.js";
import { instanceControlRoutes, type ConsoleTicket } from "../http/routes/instance-control.js";
import { instanceLogRoutes } from "../http/routes/instance-logs.js";
import { pluginRoutes } from "../http/routes/plugin.js";
import { pluginNetworkRoutes } from "../http/routes/plugin-network.js";
import { pluginAdminRoutes } from "../http/routes/plugin-admin.js";
import { GroupAggregatesPublisher } from "../plugin-api/group-aggregates.js";
import { InstanceMetricsService } from "../plugin-api/instance-metrics.js";
import { PluginDeliveries } from "../plugin-api/plugin-deliveries.js";
import { openPluginStream } from "../plugin-api/plugin-stream.js";
import { SequenceGuard } from "../plugin-api/sequence-guard.js";
import { TransferService } from "../plugin-api/transfers.js";
import { DrainTransfers } from "../plugin-api/drain-transfers.js";
import { KvMutex } from "../coordination/kv-mutex.js";
import { MachineCredentials, nodeCredentialTtlMs } from "../plugin-api/credentials.js";
import { PlayerService } from "../plugin-api/players.js";
import { SchedulerHost, type SchedulerTuning } from "../scheduler/scheduler-host.js";
import { InstanceRemoval } from "../scheduler/instance-removal.js";
import { startAuditPruner } from "../audit/audit-pruner.js";
import { buildCoordination } from "./coordination.js";
import { clusterMembershipService } from "../cluster/cluster-grpc-service.js";
import type { ClusterService } from "../cluster/cluster-service.js";
import { startClusterService } from "../cluster/start-cluster.js";
import type { BlobStore, DocumentStore, KvStore } from "../store/ports.js";
import { clusterRoutes } from "../http/routes/cluster.js";
import { eventRoutes } from "../http/routes/events.js";
import { startEventStream, type EventStream, type EventStreamOptions } from "./event-stream.js";
import { openControllerStores, type ControllerStores } from "./stores.js";
import { BackupService } from "../backup/backup-service.js";
import { clusterBundleKeySource, type BundleKeySource } from "../backup/bundle-auth.js";
import { backupRoutes } from "../http/routes/backups.js";
import { RestoreCoordination, RESTORE_POLL_INTERVAL_MS } from "../backup/restore-coordination.js";
import { ClusterIdentityStore } from "../cluster/cluster-identity.js";
import { stopUnrecordedInstances } from "../backup/unrecorded-instances.js";
import { groupResource, leaseTokenKey } from "../coordination/keys.js";
import { DocumentFencingHighWater } from "../coordination/fencing-high-water.js";
import { LOCAL_SCOPE_TOKEN } from "../scheduler/scopes.js";
import { uriScheme } from "../store/open.js";
import { openDeploymentCollections } from "../deployments/deployment-store.js";
import { RevisionStore } from "../deployments/revision-store.js";
import { DeploymentService } from "../deployments/deployment-service.js";
import { DeploymentReconciler } from "../deployments/deployment-reconciler.js";
import { IntentExecutor } from "../deployments/intent-executor.js";
import { deploymentRoutes } from "../http/routes/deployments.js";
import { EventTypes } from "../events/event-types.js";
import { isoFromMs } from "../domain/shared/time.js";
import { ApiError } from "../shared/errors.js";
import { buildLogsAndSharing, type LogsAndSharing, type LogsAndSharingTuning } from "./logs-and-sharing.js";
import { buildCapabilities, type Capabilities } from "./capabilities.js";
import { buildModules } from "./modules.js";
import type { ModulePlatform, ModulePlatformTuning } from "../modules/module-platform.js";
import { loadDashboardAssets } from "../http/dashboard-assets.js";
import { playerRoutes } from "../http/routes/players.js";
import { TransferTargets } from "../plugin-api/transfer-targets.js";

/** A part of `stop()` that takes this long is named in the log. */
const SLOW_CLEANUP_MS = 2_000;
/** How long `stop()` lets open HTTP connections finish before closing them. */
export const HTTP_DRAIN_TIMEOUT_MS = 5_000;

/** How long `stop()` waits for queued events and running async handlers before closing the stores. */
export const EVENT_FLUSH_TIMEOUT_MS = 2_000;

/** Prefix of the startup line that announces the HTTP URL; test helpers parse it. */
export const LISTENING_MESSAGE_PREFIX = "Controller HTTP API listening on ";

/**
 * The parts of a controller that run besides the HTTP API and the cluster member; each is on unless
 * turned off. Turned off, a part is still built and wired (the routes call the same objects), it
 * is only not started. The HTTP tests turn all of them off.
 */
export interface ControllerComponents {
  /**
   * The scheduler host and the coordination it runs on (leases, daemon relay, event bridge). Off,
   * no group is scheduled, and the readiness check `scheduler` reports whether this controller is
   * running.
   */
  scheduler: boolean;
  /**
   * The daemon gateway's gRPC listener on `grpc.port`, the refresh of connected daemons' template
   * credentials, and the announcement of this controller's HTTP and gRPC addresses to the cluster.
   * Off, no port is bound, no daemon can connect and `grpcPort` is 0.
   */
  daemonGateway: boolean;
  /** The audit pruner (`scheduler.auditRetentionDays`, under the cluster's `audit-pruner` lease). */
  auditPruner: boolean;
}

const allComponents: ControllerComponents = { scheduler: true, daemonGateway: true, auditPruner: true };

export interface StartControllerOptions {
  /** Where log lines go; standard output by default. */
  logOut?: LogOutput;
  clock?: Clock;
  /** Source of CLOUD_ADMIN_PASSWORD, CLOUD_CONFIG and CLOUD_GIT_COMMIT; process.env by default. */
  env?: Readonly<Record<string, string | undefined>>;
  /** Opens the stores; {@link openControllerStores} (the store factory) by default. */
  openStores?: (config: ControllerConfig, logs: ControllerLogService, clock: Clock) => Promise<ControllerStores>;
  /** Bounds of the event stream (keep-alive, stall, client cap, ...); tests shorten them. */
  eventStreamTuning?: EventStreamOptions["tuning"];
  /** Daemon gateway bounds (heartbeat interval, ...); tests shorten them. */
  gatewayTuning?: Partial<GatewayTuning>;
  /** Scheduler timings (instance timeouts, node grace period, ...); tests shorten them. */
  schedulerTuning?: Partial<SchedulerTuning>;
  /** Which background parts run; all of them by default. */
  components?: Partial<ControllerComponents>;
  /** scrypt cost of the password hashes written; the auth service's (production) cost by default. */
  passwordParams?: ScryptParams;
  /** Replaces individual readiness checks. */
  readiness?: Partial<ReadinessComponents>;
  /** Route modules mounted after the controller's own (before the OpenAPI document is built). */
  extraRouteModules?: readonly RouteModule[];
  /** Routes whose bodies stream with their own limit; the template uploads and imports and the backup upload by default. */
  bodyLimitRoutes?: readonly BodyLimitRoute[];
  /** Where template uploads are spooled; the system temporary directory by default. */
  templateSpoolDirectory?: string;
  /** The record of `GET /api/v1/system/version`; read from package.json and the build or git by default. */
  version?: VersionInfo;
  /** Node process metrics (CPU, memory, event loop) in `/metrics`; on by default. */
  processMetrics?: boolean;
  /** Bounds of the daemon log mirror and the log streams, and the paste upload; tests change them. */
  logsAndSharingTuning?: LogsAndSharingTuning;
  /** Intervals and timeouts of the platform modules (sync, leak polls, quotas, hooks); tests shorten them. */
  moduleTuning?: Partial<ModulePlatformTuning>;
  /** The built dashboard served under `/ui/`; `dist/dashboard` of the install by default. */
  dashboardDir?: string;
}

/** The services of a running controller, built once by {@link startController}. */
export interface ControllerServices {
  documents: DocumentStore;
  kv: KvStore;
  blobs: BlobStore;
  auth: AuthService;
  audit: AuditService;
  /** This controller's cluster membership (the Raft member on `raft.port`). */
  cluster: ClusterService;
  groups: GroupService;
  instances: InstanceService;
  crashes: CrashService;
  nodes: NodeService;
  nodeTokens: NodeTokenService;
  overview: OverviewService;
  templates: TemplateService;
  /** Workload tokens of instances and template credentials of daemons. */
  credentials: MachineCredentials;
  players: PlayerService;
  /** Player transfers queued to the instances holding the players. */
  transfers: TransferService;
  /** Moves the players of instances draining on this controller to RUNNING instances of their group. */
  drainTransfers: DrainTransfers;
  /** The latest metrics the plugins reported. */
  instanceMetrics: InstanceMetricsService;
  consoleHub: ConsoleHub;
  /** The cluster-wide event journal, the SSE hub and their tickets. */
  eventStream: EventStream;
  /** The sampled metrics history (`GET /api/v1/metrics/history`); plugins' TPS reports go to `reportTps`. */
  metricsHistory: MetricsHistory;
  /** Backups in `<data.dir>/backups` and restores. */
  backups: BackupService;
  /** Deployments of groups (revisions, rollouts) as the routes drive them. */
  deployments: DeploymentService;
  /** The daemon log mirror's buffers, the log streams, diagnostics and sharing. */
  logsAndSharing: LogsAndSharing;
  /** Global maintenance, player admission and the other operator capabilities (capabilities.ts). */
  capabilities: Capabilities;
  /** Platform modules: installed bundles, their workers, registries. */
  modules: ModulePlatform;
}

/** A running controller. */
export interface RunningController {
  /** Base URL of the HTTP API, e.g. `http://127.0.0.1:8080` (the real port when 0 was configured). */
  httpUrl: string;
  /** The port the daemon gateway (gRPC) listens on (the real port when 0 was configured; 0 when the gateway is off). */
  grpcPort: number;
  /** The daemon gateway: sessions and commands to daemons. */
  gateway: DaemonGateway;
  /** The scheduler: actors of the groups, instances and nodes this controller owns. */
  scheduler: SchedulerHost;
  /** Node join tokens (the development start creates one for its local daemon). */
  nodeTokens: NodeTokenService;
  services: ControllerServices;
  /** The HTTP app being served, and the registry of every route mounted on it. */
  app: Hono<AppEnv>;
  registry: RouteRegistry;
  config: ControllerConfig;
  logs: ControllerLogService;
  metrics: MetricsService;
  events: ControllerEventBus;
  /** Stops serving and closes every component; safe to call more than once. */
  stop(): Promise<void>;
}

/** The repository (or install) root: the nearest ancestor holding package.json. */
function findRootDir(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let depth = 0; depth < 6; depth++) {
    if (existsSync(join(dir, "package.json"))) return dir;
    dir = dirname(dir);
  }
  return process.cwd();
}

/** The URL clients use for a bound address: wildcard binds are reached on loopback. */
export function urlForAddress(address: AddressInfo): string {
  const host = address.address === "0.0.0.0" ? "127.0.0.1" : address.address === "::" ? "::1" : address.address;
  return `http://${host.includes(":") ? `[${host}]` : host}:${address.port}`;
}

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
  const cleanups: { name: string; run(): Promise<void> | void }[] = [];
  let running = true;

  const runCleanups = async () => {
    for (const cleanup of cleanups.reverse()) {
      const startedMs = performance.now();
      try {
        await cleanup.run();
      } catch (err) {
        log.warn(`Stopping ${cleanup.name} failed`, err);
      }
      const tookMs = Math.round(performance.now() - startedMs);
      if (tookMs >= SLOW_CLEANUP_MS) log.warn(`Stopping ${cleanup.name} took ${tookMs} ms`);
    }
    cleanups.length = 0;
  };

  let stopping: Promise<void> | null = null;
  const stopController = (): Promise<void> => {
    stopping ??= (async () => {
      running = false;
      log.info("Stopping controller");
      await runCleanups();
      log.info("Controller stopped");
    })();
    return stopping;
  };

  try {
    const stores: ControllerStores = await (opts.openStores ?? openControllerStores)(config, logs, clock);
    cleanups.push({ name: "stores", run: () => stores.close() });
    // Runs after the HTTP server closed and before the stores close: handlers may still write.
    cleanups.push({ name: "event bus", run: () => flushWithin(events, EVENT_FLUSH_TIMEOUT_MS, log) });
    const { documents, kv, blobs } = stores;
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
    let memberId = "";
    let restoreCoordination: RestoreCoordination | null = null;
    const startupRestoreCoordination = () =>
      new RestoreCoordination({
        kv,
        controllerId: new ClusterIdentityStore(resolve(config.raft.dataDir)).ensureNodeId(),
        clock,
        logger: logs.logger("cloud.backup"),
        hooks: { pause: async () => undefined, resume: async () => undefined, reloadAuth: () => undefined },
        quietTimeoutMs: restoreQuietTimeoutMs(config),
      });
    let stopStrays: (() => Promise<unknown>) | null = null;
    // Bound once the cluster service exists (below): bundles are authenticated with its key.
    let bundleKey: BundleKeySource = () => null;
    const backups = new BackupService({
      documents,
      kv,
      blobs,
      directory: join(resolve(config.data.dir), "backups"),
      retentionCount: config.backup.retentionCount,
      origin: {
        nodeId: () => memberId,
        softwareVersion: version.version,
        profile: config.runtime.profile,
        documentStore: documentStoreKind(config.database.uri),
      },
      bundleKey: () => bundleKey(),
      clock,
      logger: logs.logger("cloud.backup"),
      onRestored: () => auth.invalidate(),
      // Bound once the scheduler exists (below). Before it, only a restore interrupted by a kill is
      // finished (at start): the other controllers pause for it; this one schedules nothing yet.
      maintenance: {
        run: (id, work, o) => {
          if (restoreCoordination) return restoreCoordination.run(id, work, o);
          if (o?.finishing) return startupRestoreCoordination().run(id, work, o);
          // Requests are served a moment before the scheduler can be paused for a restore.
          return Promise.reject(new ApiError(503, "NOT_READY", "The controller is still starting; try the restore again in a moment"));
        },
      },
      afterDatastores: async () => {
        await stopStrays?.();
      },
    });
    // Before anything reads the stores: a restore a killed controller left half done is finished first.
    await backups.start();
    await auth.start();
    const audit = new AuditService({ documents, clock });
    // Before the daemon gateway: its CA document takes the Raft-held cluster CA.
    const cluster = await startClusterService({
      cluster: config.cluster,
      raft: config.raft,
      data: config.data,
      http: config.http,
      grpc: config.grpc,
      documents,
      audit,
      clock,
      logs,
      env,
      onLeft: () => void stopController(),
    });
    cleanups.push({ name: "cluster", run: () => cluster.stop() });
    // Stopped late (cleanups run in reverse): the spans of the last requests are exported.
    const tracing = createTracing(config.telemetry, { name: "cloud-controller", instanceId: cluster.nodeId });
    cleanups.push({ name: "tracing", run: () => tracing.shutdown() });
    memberId = cluster.nodeId;
    bundleKey = clusterBundleKeySource(cluster);

    const instances = new InstanceService(documents, clock);
    const crashes = new CrashService(documents, clock);
    const groups = new GroupService(documents, events, clock, instances, recordLocks.scoped("group:"));
    const nodes = new NodeService(documents, events, clock, instances, undefined, recordLocks.scoped("node:"));
    const nodeTokens = new NodeTokenService(documents, clock, recordLocks.scoped("node-token:"));
    // The player registry lives in the key-value store; its counts feed the overview.
    let players: PlayerService | null = null;
    const overview = new OverviewService(groups, instances, nodes, { onlineCount: () => (players ? players.onlineCount() : Promise.resolve(0)) });
    // A template write (an import of a large archive) may hold the lock a while: others wait up to a minute.
    const templates = new TemplateService({
      documents,
      blobs,
      events,
      clock,
      spoolDirectory: opts.templateSpoolDirectory,
      writeLock: recordLocks.scoped("template:", { waitMs: 60_000 }),
    });
    const capabilities = buildCapabilities({ config, cluster, documents, blobs, events, clock, logs, audit, recordLocks, groups, instances });
    cleanups.push({ name: "capabilities", run: () => capabilities.stop() });
    const deploymentCollections = openDeploymentCollections(documents);
    const templateHash = async (name: string) => {
      try {
        return (await templates.get(name)).hash;
      } catch (err) {
        if (err instanceof ApiError && err.status === 404) return null;
        throw err;
      }
    };
    const revisions = new RevisionStore(
      deploymentCollections,
      templateHash,
      () => isoFromMs(clock.nowMs()),
      (platform, version) => capabilities.catalog.freeze(platform, version),
    );
    const deployments = new DeploymentService({
      collections: deploymentCollections,
      revisions,
      groups,
      instances,
      templateHash,
      events,
      clock,
      controlLock: recordLocks,
    });
    const forgetDeployments = events.subscribe(EventTypes.GROUP_DELETED, (e) =>
      deployments
        .forgetGroup(String(e.data.groupName))
        .catch((err: unknown) => log.warn(`Removing the deployments of group ${String(e.data.groupName)} failed`, err)),
    );
    cleanups.push({ name: "deployment records", run: () => forgetDeployments.unsubscribe() });

    metrics.setGaugeSources({
      groupsTotal: () => groups.count(),
      nodesTotal: async () => (await nodes.list()).filter((n) => n.state === "ONLINE" || n.state === "DRAINING").length,
      instancesTotal: async () => (await instances.list({ state: "RUNNING" })).length,
      playersTotal: () => (players ? players.onlineCount() : 0),
      crashesTotal: () => crashes.count(),
      workflowsNodeDrains: () => nodes.drainsWaiting(),
    });
    const metricsHistory = new MetricsHistory({
      documents,
      clock,
      logger: logs.logger("cloud.metrics"),
      controllerId: cluster.nodeId,
      metrics,
      sources: {
        nodes: async () => (await nodes.list()).filter((n) => n.state === "ONLINE" || n.state === "DRAINING").length,
        instances: async () => (await instances.findDocs()).filter((doc) => !FINISHED_STATES.has(doc.state)),
      },
      intervalMs: config.metrics.collectionIntervalSeconds * 1000,
      retentionMs: config.metrics.retentionHours * 3600 * 1000,
    });

    // Machine credentials: instances' workload tokens and daemons' template-fetch credentials.
    const isLiveInstance = async (id: string) => {
      const doc = await instances.getDoc(id);
      return doc !== null && !FINISHED_STATES.has(doc.state);
    };
    const credentials = await MachineCredentials.open({ documents, clock, instances, nodes, lock: recordLocks.scoped("workload-family:") });
    auth.verifyWorkloadToken = (token) => credentials.principalOf(token);
    const consoleHub = new ConsoleHub();
    const consoleTickets = new Tickets<ConsoleTicket>({ kv, clock });

    let httpPort = 0;
    // Built once readiness exists (below); the gateway hands it the daemons' log records.
    let logsAndSharing: LogsAndSharing | null = null;
    // The daemon gateway binds the HTTP host on config.grpc.port; it stops before the stores close.
    const gateway = await createDaemonGateway({
      host: config.http.host,
      port: config.grpc.port,
      documents,
      nodes,
      nodeTokens,
      events,
      metrics,
      clock,
      logger: logs.logger("cloud.gateway"),
      tuning: opts.gatewayTuning,
      issueApiCredential: (nodeId) => {
        const issued = credentials.issueNodeCredential(nodeId);
        return { token: issued.token, expires_at_ms: issued.expiresAtMs };
      },
      httpPort: () => httpPort,
      services: [clusterMembershipService({ cluster, audit, clock, logger: logs.logger("cloud.cluster"), tracing })],
      onLogRecord: (nodeId, record) => logsAndSharing?.onLogRecord(nodeId, record),
    });
    cleanups.push({ name: "daemon gateway", run: () => gateway.stop() });

    const fencingHighWater = new DocumentFencingHighWater(documents);
    const coordination = buildCoordination({
      config,
      controllerId: cluster.nodeId,
      cluster,
      kv,
      fencingHighWater,
      gateway,
      events,
      metrics,
      clock,
      logger: logs.logger("cloud.coordination"),
    });
    const instanceMetrics = new InstanceMetricsService(kv, events, clock, (id, tps) => metricsHistory.reportTps(id, tps));
    // The highest of the group's lease tokens (counter or durable mark: no token above it was ever issued); the development profile's constant token without one.
    const groupTokenCeiling = async (group: string) =>
      Math.max(Number(await kv.get(leaseTokenKey(groupResource(group)))) || 0, await fencingHighWater.highest(groupResource(group))) || LOCAL_SCOPE_TOKEN;
    const scheduler = new SchedulerHost({
      groups,
      instances,
      nodes,
      crashes,
      events,
      daemons: tracedDaemonLink(coordination.daemons, tracing),
      credentials,
      scopes: coordination.scopes,
      // The cluster-shared values in force, read at every crash (live-settings.ts).
      crashLoop: capabilities.settings.crashLoop,
      clock,
      logger: logs.logger("cloud.scheduler"),
      metrics,
      kv,
      sessionHeld: (nodeId) => coordination.sessionHeld(nodeId),
      strayFencingToken: groupTokenCeiling,
      revisions,
      buildCheck: (build) => capabilities.mirror.check(build),
      tuning: {
        evaluationIntervalMs: config.scheduler.evaluationIntervalSeconds * 1000,
        startingPerNodeMax: config.scheduler.maxStartingPerNode,
        reconcileIntervalMs: config.scheduler.reconcileIntervalSeconds * 1000,
        ...opts.schedulerTuning,
      },
      playerCounts: async (ids) => {
        const registry = players;
        if (!registry) return new Map();
        const counts = await Promise.all(ids.map(async (id) => [id, await registry.knownCountOn(id)] as const));
        return new Map(counts.filter((entry): entry is readonly [string, number] => entry[1] !== null));
      },
      loadSamples: async (ids) =>
        (await Promise.all(ids.map((id) => instanceMetrics.latest(id)))).flatMap((s) =>
          s ? [{ instanceId: s.instanceId, tps1m: s.tps1m, msptAvg: s.msptAvg, reportedAtMs: Date.parse(s.reportedAt) }] : [],
        ),
    });
    scheduler.setConsole(consoleHub);
    capabilities.settings.onStartingPerNodeMax((value) => scheduler.setStartingPerNodeMax(value));
    const daemonLink = coordination.daemons;
    stopStrays = () =>
      stopUnrecordedInstances({
        nodes: async () => (await nodes.list()).filter((node) => node.state !== "OFFLINE").map((node) => node.id),
        listInstances: async (nodeId) => {
          const result = await daemonLink.sendCommand(nodeId, { type: "list_instances", body: {} }).catch(() => null);
          return result?.ok ? (result.instances ?? []) : null;
        },
        liveRecords: async () => new Map((await instances.findDocs()).filter((doc) => !FINISHED_STATES.has(doc.state)).map((doc) => [doc.id, doc.node])),
        fencingToken: groupTokenCeiling,
        forceStop: async (nodeId, group, instanceId, fencingToken) => {
          const result = await daemonLink
            .sendCommand(nodeId, { type: "force_stop_instance", body: { group, fencing_token: fencingToken, instance_id: instanceId } })
            .catch(() => null);
          return result !== null && (result.ok || result.error_code === "UNKNOWN_INSTANCE");
        },
        logger: logs.logger("cloud.backup"),
      });
    // Bound once the modules exist (below): after a restore every module restarts over the restored records.
    const moduleRestart = { run: async () => undefined as void };
    const coordinatedRestores = new RestoreCoordination({
      kv,
      controllerId: cluster.nodeId,
      clock,
      logger: logs.logger("cloud.backup"),
      hooks: {
        pause: () => scheduler.pauseScheduling(),
        resume: async () => {
          await scheduler.resumeScheduling();
          await moduleRestart.run();
        },
        reloadAuth: () => auth.invalidate(),
      },
      quietTimeoutMs: restoreQuietTimeoutMs(config),
    });
    metrics.setGaugeSources({
      schedulerLastTickLagMillis: () => scheduler.lastTickLagMs(),
      workflowsStartRetries: () => scheduler.waitingWorkflows().startRetries,
      workflowsHealingActions: () => scheduler.waitingWorkflows().healingActions,
    });
    const aggregates = new GroupAggregatesPublisher(instances, events, clock, logs.logger("cloud.players"));
    scheduler.onPlayerCountWritten((_id, group) => aggregates.groupChanged(group));
    players = new PlayerService(
      kv,
      events,
      clock,
      // The group's owner writes the count to the record and marks the aggregates (onPlayerCountWritten below).
      (id, count) => scheduler.playerCountChanged(id, count),
      logs.logger("cloud.players"),
    );
    const playerRegistry = players;
    const deliveries = new PluginDeliveries(kv, logs.logger("cloud.plugin"));
    await deliveries.start();
    cleanups.push({ name: "plugin deliveries", run: () => deliveries.stop() });
    const transfers = new TransferService({
      kv,
      players,
      deliveries,
      instances: { isLive: isLiveInstance },
      events,
      clock,
      logger: logs.logger("cloud.transfers"),
    });
    const drainTransfers = new DrainTransfers({
      events,
      players,
      transfers,
      instances,
      groups,
      logger: logs.logger("cloud.transfers"),
      // A leave through another controller emptied an instance draining here: the actor hears it.
      emptied: (id) => scheduler.playerCountChanged(id, 0),
      clock,
    });
    const sequences = new SequenceGuard(kv);
    metrics.setGaugeSources({ workflowsPendingTransfers: () => transfers.pendingCount() });

    const eventStream = await startEventStream({ kv, bus: events, metrics, clock, logger: logs.logger("cloud.events.stream"), tuning: opts.eventStreamTuning });
    const modules = buildModules({
      config,
      documents,
      kv,
      blobs,
      recordLocks,
      cluster,
      events,
      eventStream,
      audit,
      logs,
      metrics,
      clock,
      permissionsOf: (username) => auth.permissionsOfUser(username),
      spoolDirectory: opts.templateSpoolDirectory,
      tuning: opts.moduleTuning,
    });
    moduleRestart.run = () => modules.restartAfterRestore();

    const readiness = createReadinessProbe({
      stateStore: () => documents.ping(),
      coordinationStore: () => kv.ping(),
      scheduler: components.scheduler ? () => running && scheduler.isRunning() : () => running,
      platformModules: () => running && modules.ready(),
      ...opts.readiness,
    });

    logsAndSharing = buildLogsAndSharing({
      config,
      env,
      logs,
      metrics,
      documents,
      kv,
      audit,
      clock,
      cluster,
      connectedHere: (nodeId) => gateway.isConnected(nodeId),
      nodes,
      crashes,
      overview,
      readiness,
      version,
      tuning: opts.logsAndSharingTuning,
      shareSettings: capabilities.settings.share,
    });

    const { app, registry } = createHttpApp({
      http: config.http,
      rateLimit: config.rateLimit,
      logs,
      metrics,
      events,
      documents,
      kv,
      auth,
      audit,
      readiness,
      version,
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
          admission: capabilities.admission,
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
            open: (id) => openPluginStream({ deliveries, transfers, players: playerRegistry, logger: logs.logger("cloud.plugin") }, id),
          },
        }),
        backupRoutes(backups, audit),
        metricsHistoryRoutes({ history: metricsHistory, enabled: metrics.enabled, clock }),
        ...logsAndSharing.routeModules,
        ...capabilities.routeModules,
        ...modules.routeModules,
        ...(opts.extraRouteModules ?? []),
      ],
      clock,
      bodyLimitRoutes: opts.bodyLimitRoutes,
      tracing,
      traceUiTemplate: config.telemetry.traceUiTemplate,
      restoreInProgress: () => coordinatedRestores.current(),
      dashboard: await loadDashboardAssets(opts.dashboardDir ?? join(findRootDir(), "dist", "dashboard")),
    });

    // Requests log under the logical thread name "http" (see docs/decisions/platform.md).
    const serveRequest: FetchHandler = (request, bindings) => logs.withThread("http", () => app.fetch(request, bindings));
    const server = await listen(serveRequest, config.http.host, config.http.port);
    cleanups.push({ name: "HTTP server", run: () => closeServer(server, HTTP_DRAIN_TIMEOUT_MS) });
    // Before the server closes: stopping the stream ends the open streams, which never finish on their own.
    cleanups.push({ name: "event stream", run: () => eventStream.stop() });
    const builtLogs = logsAndSharing;
    cleanups.push({ name: "log streams", run: () => builtLogs.stop() });
    const address = server.address() as AddressInfo;
    httpPort = address.port;
    const httpUrl = urlForAddress(address);
    log.info(`${LISTENING_MESSAGE_PREFIX}${httpUrl}`);
    let grpcPort = 0;
    if (components.daemonGateway) {
      grpcPort = await gateway.start();
      cluster.announce({ httpPort: Number(new URL(httpUrl).port), grpcPort });
      log.info(`Daemon gateway (gRPC) listening on port ${grpcPort}`);

      // A connected daemon gets a fresh template credential every half of its lifetime.
      const credentialTimer = setInterval(() => {
        for (const session of gateway.listSessions()) {
          const issued = credentials.issueNodeCredential(session.nodeId);
          gateway.sendToNode(session.nodeId, controllerMessage("api_credential", { token: issued.token, expires_at_ms: issued.expiresAtMs }));
        }
      }, nodeCredentialTtlMs / 2);
      credentialTimer.unref();
      cleanups.push({ name: "credential refresh", run: () => clearInterval(credentialTimer) });
    }

    await players.start();
    cleanups.push({ name: "players", run: () => playerRegistry.stop() });
    await modules.start();
    cleanups.push({ name: "modules", run: () => modules.stop() });
    transfers.start();
    cleanups.push({ name: "transfers", run: () => transfers.stop() });
    drainTransfers.start();
    scheduler.onDrainingAdopted((instanceId, group) => drainTransfers.adopt(instanceId, group));
    cleanups.push({ name: "drain transfers", run: () => drainTransfers.stop() });
    aggregates.start();
    cleanups.push({ name: "group aggregates", run: () => aggregates.stop() });
    if (metrics.enabled) {
      metricsHistory.start();
      cleanups.push({ name: "metrics history", run: () => metricsHistory.stop() });
    }
    if (components.auditPruner) {
      const stopAuditPruner = startAuditPruner({
        audit,
        runUnderLease: (name, ttlMs, fn) => cluster.runUnderLease(name, ttlMs, fn),
        retentionDays: () => capabilities.settings.auditRetentionDays(),
        logger: logs.logger("cloud.audit"),
        clock,
      });
      cleanups.push({ name: "audit pruner", run: stopAuditPruner });
    }
    if (components.scheduler) {
      await coordination.start();
      cleanups.push({ name: "coordination", run: () => coordination.stop() });
      await scheduler.start();
      // Stops first: no actor reacts to the sessions the gateway then closes.
      cleanups.push({ name: "scheduler", run: () => scheduler.stop() });
      // Deployments: the reconciler steps rollouts under its singleton lease; every controller
      // carries out the steps of the groups it schedules (docs/decisions/deployments.md).
      const deploymentIntervalMs = config.deployments.reconcileIntervalSeconds * 1000;
      const intents = new IntentExecutor({
        collections: deploymentCollections,
        instances,
        lifecycle: scheduler,
        isOwned: (group) => scheduler.isOwned(group),
        clock,
        logger: logs.logger("cloud.deployments"),
        intervalMs: deploymentIntervalMs,
      });
      const reconciler = new DeploymentReconciler({
        collections: deploymentCollections,
        revisions,
        groups,
        instances,
        crashes,
        events,
        clock,
        logger: logs.logger("cloud.deployments"),
        runUnderLease: (name, ttlMs, fn) => cluster.runUnderLease(name, ttlMs, fn),
        intervalMs: deploymentIntervalMs,
        leaseTtlMs: config.deployments.leaseTtlSeconds * 1000,
        metricsReportedAtMs: async (ids) => {
          const reported = new Map<string, number>();
          for (const id of ids) {
            const snapshot = await instanceMetrics.latest(id);
            if (snapshot) reported.set(id, Date.parse(snapshot.reportedAt));
          }
          return reported;
        },
      });
      intents.start();
      reconciler.start();
      cleanups.push({ name: "deployment reconciler", run: () => Promise.all([reconciler.stop(), intents.stop()]).then(() => undefined) });
    }
    // After the scheduler started: a restore under way elsewhere pauses it at once.
    await coordinatedRestores.start();
    restoreCoordination = coordinatedRestores;
    cleanups.push({ name: "restore coordination", run: () => coordinatedRestores.stop() });

    return {
      httpUrl,
      grpcPort,
      gateway,
      scheduler,
      nodeTokens,
      services: {
        documents,
        kv,
        blobs,
        auth,
        audit,
        cluster,
        groups,
        instances,
        crashes,
        nodes,
        nodeTokens,
        overview,
        templates,
        credentials,
        players,
        transfers,
        drainTransfers,
        instanceMetrics,
        consoleHub,
        eventStream,
        metricsHistory,
        backups,
        deployments,
        logsAndSharing: builtLogs,
        capabilities,
        modules: modules.platform,
      },
      app,
      registry,
      config,
      logs,
      metrics,
      events,
      stop: stopController,
    };
  } catch (err) {
    running = false;
    await runCleanups();
    throw err;
  }
}

type FetchHandler = Parameters<typeof serve>[0]["fetch"];

/** Slack on top of a lease TTL and two polls before a restore gives up waiting for the scopes to be released. */
const RESTORE_QUIET_MARGIN_MS = 10_000;

/** How long a restore waits for every scope lease to be released: a dead controller's expire within one lease TTL; the others release theirs within a poll. */
function restoreQuietTimeoutMs(config: ControllerConfig): number {
  return 2 * config.scheduler.evaluationIntervalSeconds * 1000 + 2 * RESTORE_POLL_INTERVAL_MS + RESTORE_QUIET_MARGIN_MS;
}

/** The document store a `database.uri` selects, as backup manifests name it. */
function documentStoreKind(uri: string | undefined): string {
  const scheme = uri ? uriScheme(uri) : undefined;
  if (scheme === "postgres" || scheme === "postgresql") return "postgres";
  if (scheme === "mongodb" || scheme === "mongodb+srv") return "mongodb";
  return "embedded";
}

/** Serves `fetch` on host:port and resolves once listening; rejects on a bind error. */
function listen(fetch: FetchHandler, hostname: string, port: number): Promise<ServerType> {
  return new Promise((resolvePromise, reject) => {
    const server = serve({ fetch, hostname, port });
    const onError = (err: Error) => reject(new Error(`Cannot listen on ${hostname}:${port}: ${err.message}`, { cause: err }));
    server.once("error", onError);
    server.once("listening", () => {
      server.off("error", onError);
      resolvePromise(server);
    });
  });
}

/** Stops accepting connections, lets in-flight requests finish, then closes what is left. */
function closeServer(server: ServerType, drainTimeoutMs: number): Promise<void> {
  return new Promise((resolvePromise) => {
    const timer = setTimeout(() => {
      if ("closeAllConnections" in server) server.closeAllConnections();
    }, drainTimeoutMs);
    server.close(() => {
      clearTimeout(timer);
      resolvePromise();
    });
    if ("closeIdleConnections" in server) server.closeIdleConnections();
  });
}

/** Waits for the bus to drain, at most `timeoutMs`; a handler that never settles must not block shutdown. */
async function flushWithin(events: ControllerEventBus, timeoutMs: number, log: Logger): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<boolean>((resolveTimeout) => {
    timer = setTimeout(() => resolveTimeout(true), timeoutMs);
  });
  const drained = events.flush().then(() => false);
  if (await Promise.race([drained, timedOut])) log.warn(`Event handlers still running after ${timeoutMs} ms; closing anyway`);
  clearTimeout(timer);
}
