/** The options, components and results of {@link startController} (controller.ts). */
import type { Hono } from "hono";
import type { AuditService } from "../audit/audit-service.js";
import type { AuthService } from "../auth/auth-service.js";
import type { ScryptParams } from "../auth/password.js";
import type { ClusterService } from "../cluster/cluster-service.js";
import type { ControllerConfig } from "../config/schema.js";
import type { CrashService } from "../domain/crashes/crash-service.js";
import type { GroupService } from "../domain/groups/group-service.js";
import type { InstanceService } from "../domain/instances/instance-service.js";
import type { NodeTokenService } from "../domain/node-tokens/node-token-service.js";
import type { NodeService } from "../domain/nodes/node-service.js";
import type { OverviewService } from "../domain/overview/overview-service.js";
import type { ControllerEventBus } from "../events/bus.js";
import type { BodyLimitRoute } from "../http/middleware/body-limit.js";
import type { ReadinessComponents } from "../http/readiness.js";
import type { RouteModule, RouteRegistry } from "../http/route.js";
import type { VersionInfo } from "../http/routes/system.js";
import type { AppEnv } from "../http/types.js";
import type { ControllerLogService, LogOutput } from "../logs/logger.js";
import type { MetricsService } from "../metrics/metrics.js";
import type { MetricsHistory } from "../metrics/metrics-history.js";
import type { Clock } from "../shared/clock.js";
import type { TemplateService } from "../templates/template-service.js";
import type { DaemonGateway, GatewayTuning } from "../gateway/daemon-gateway.js";
import type { ConsoleHub } from "../gateway/console-hub.js";
import type { InstanceMetricsService } from "../plugin-api/instance-metrics.js";
import type { TransferService } from "../plugin-api/transfers.js";
import type { DrainTransfers } from "../plugin-api/drain-transfers.js";
import type { MachineCredentials } from "../plugin-api/credentials.js";
import type { PlayerService } from "../plugin-api/players.js";
import type { SchedulerHost, SchedulerTuning } from "../scheduler/scheduler-host.js";
import type { BlobStore, DocumentStore, KvStore } from "../store/ports.js";
import type { BackupService } from "../backup/backup-service.js";
import type { DeploymentService } from "../deployments/deployment-service.js";
import type { ModulePlatform, ModulePlatformTuning } from "../modules/module-platform.js";
import type { EventStream, EventStreamOptions } from "./event-stream.js";
import type { ControllerStores } from "./stores.js";
import type { LogsAndSharing, LogsAndSharingTuning } from "./logs-and-sharing.js";
import type { Capabilities } from "./capabilities.js";

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

export const allComponents: ControllerComponents = { scheduler: true, daemonGateway: true, auditPruner: true };

export interface StartControllerOptions {
  /** Where log lines go; standard output by default. */
  logOut?: LogOutput;
  clock?: Clock;
  /** Source of CLOUD_ADMIN_PASSWORD, CLOUD_CONFIG and CLOUD_GIT_COMMIT; process.env by default. */
  env?: Readonly<Record<string, string | undefined>>;
  /** controller.yml this controller was started with (the bin's `--config` or CLOUD_CONFIG), where a join writes cluster.id; CLOUD_CONFIG of `env` by default, null for none. */
  configPath?: string | null;
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
