/**
 * The logs, diagnostics and sharing part of the composition: the per-node buffers of the daemon
 * log mirror, the log streams and their tickets, the redacted diagnostics bundle with every secret
 * the controller knows, the share service (with its records of what was shared), and their route
 * modules. Built by `startController`,
 * which hands the gateway {@link LogsAndSharing.onLogRecord}.
 *
 * On the production profile a node's log is read where its daemon's stream is held: the
 * node-session registry names the holder, and the cluster's `ReadNodeLogs` call (served here from
 * the per-node buffers) reads its records (`src/logs/node-log-access.ts`).
 */
import { KvMutex } from "../coordination/kv-mutex.js";
import type { AuditRecorder } from "../audit/types.js";
import { loadOrCreateSigningSecret } from "../auth/signing-key.js";
import type { ClusterService } from "../cluster/cluster-service.js";
import { fromDaemonRecord } from "../cluster/peers/node-logs.js";
import type { ControllerConfig } from "../config/schema.js";
import { NodeSessionRegistry } from "../coordination/session-registry.js";
import { Tickets } from "../coordination/tickets.js";
import { DiagnosticsService } from "../diagnostics/diagnostics-service.js";
import type { CrashService } from "../domain/crashes/crash-service.js";
import type { NodeService } from "../domain/nodes/node-service.js";
import type { OverviewService } from "../domain/overview/overview-service.js";
import type { RouteModule } from "../http/route.js";
import { diagnosticsRoutes } from "../http/routes/diagnostics.js";
import { logRoutes, type LogStreamTicket, type NodeLogAccess } from "../http/routes/logs.js";
import { shareRoutes } from "../http/routes/shares.js";
import type { ReadinessProbe, VersionInfo } from "../http/routes/system.js";
import type { ControllerLogService } from "../logs/logger.js";
import { LogStreamHub, type LogStreamHubOptions } from "../logs/log-stream.js";
import { ClusterNodeLogs, type NodeLogHolders } from "../logs/node-log-access.js";
import { NodeLogBuffers, type NodeLogBounds } from "../logs/node-log-buffers.js";
import type { MetricsService } from "../metrics/metrics.js";
import { createShareMetrics } from "../metrics/share-metrics.js";
import { ShareService, type PasteRemover, type PasteUploader } from "../share/share-service.js";
import type { Clock } from "../shared/clock.js";
import type { DocumentStore, KvStore } from "../store/ports.js";
import type { LogRecordMessage } from "../wire/daemon-proto.js";

/** Bounds and seams tests and benchmarks change. */
export interface LogsAndSharingTuning {
  nodeLogBounds?: Partial<NodeLogBounds>;
  logStream?: LogStreamHubOptions;
  /** Replaces the PrivateBin upload (tests of failures that a real service cannot be made to give). */
  upload?: PasteUploader;
  /** Replaces the PrivateBin delete. */
  remove?: PasteRemover;
  /** How often a node's log tail on a controller without its stream asks the holder (500 ms). */
  nodeLogPollIntervalMs?: number;
}

export interface LogsAndSharingOptions {
  config: ControllerConfig;
  env: Readonly<Record<string, string | undefined>>;
  logs: ControllerLogService;
  metrics: MetricsService;
  documents: DocumentStore;
  kv: KvStore;
  /** Share creations and revokes are audited. */
  audit: AuditRecorder;
  clock: Clock;
  cluster: ClusterService;
  /** Whether this controller's daemon gateway holds a node's stream now. */
  connectedHere(nodeId: string): boolean;
  nodes: Pick<NodeService, "get">;
  crashes: Pick<CrashService, "get">;
  overview: Pick<OverviewService, "get">;
  readiness: ReadinessProbe;
  version: VersionInfo;
  tuning?: LogsAndSharingTuning;
  /** The share switches in force, read at every share (the cluster-shared config changes them); `config.share` by default. */
  shareSettings?: ControllerConfig["share"];
}

/** The built part. */
export interface LogsAndSharing {
  nodeLogs: NodeLogBuffers;
  hub: LogStreamHub;
  share: ShareService;
  diagnostics: DiagnosticsService;
  /** Hand to the daemon gateway: every mirrored record of a daemon this controller holds. */
  onLogRecord(nodeId: string, record: LogRecordMessage): void;
  routeModules: RouteModule[];
  /** Ends the open log streams and the log reads between controllers. */
  stop(): void;
}

/** Builds the logs, diagnostics and sharing services and their routes. */
export function buildLogsAndSharing(options: LogsAndSharingOptions): LogsAndSharing {
  const { config, env, logs, kv, clock, cluster, tuning } = options;
  const nodeLogs = new NodeLogBuffers(tuning?.nodeLogBounds);
  const hub = new LogStreamHub({ clock, ...tuning?.logStream });
  const tickets = new Tickets<LogStreamTicket>({ kv, clock });
  const share = new ShareService({
    config: options.shareSettings ?? config.share,
    metrics: createShareMetrics(options.metrics),
    clock,
    logger: logs.logger("cloud.share"),
    documents: options.documents,
    upload: tuning?.upload,
    remove: tuning?.remove,
    // A second revoke of one share through another controller waits, then finds it revoked (409), without a second delete upstream.
    revokeLock: new KvMutex(kv).scoped("share:"),
  });

  const knownSecrets = async (): Promise<string[]> => {
    const secrets = [config.auth.adminPassword, env.CLOUD_ADMIN_PASSWORD ?? ""];
    secrets.push(Buffer.from(await loadOrCreateSigningSecret(options.documents, clock)).toString("base64url"));
    const seed = cluster.seed();
    if (seed) secrets.push(seed.secret);
    const material = cluster.material();
    if (material) secrets.push(material.caKeyPem);
    return secrets.filter((s) => s !== "");
  };

  const diagnostics = new DiagnosticsService({
    readiness: async () => {
      const checks = await options.readiness.checks();
      const ready = Object.keys(checks).length > 0 && Object.values(checks).every(Boolean);
      return { status: ready ? "READY" : "NOT_READY", checks };
    },
    overview: () => options.overview.get(),
    settings: () => ({
      version: options.version.version,
      gitCommit: options.version.gitCommit,
      runtimeVersion: options.version.runtimeVersion,
      profile: config.runtime.profile,
      controllerId: cluster.nodeId,
      logLevel: logs.level,
      logFormat: logs.format,
      platform: `${process.platform}/${process.arch}`,
      pid: process.pid,
      uptimeSeconds: Math.round(process.uptime()),
      memory: process.memoryUsage(),
      daemonLogMirror: { nodes: nodeLogs.nodeCount, chars: nodeLogs.totalChars() },
    }),
    config: () => config,
    kv,
    clusterLeases: () => cluster.leases(),
    logs,
    knownSecrets,
    clock,
  });

  // Several controllers (production): a node's records are on the controller holding its stream,
  // which the others ask over the cluster's gRPC. One controller (development): all are here.
  let holders: NodeLogHolders | null = null;
  let closeLink = (): void => undefined;
  if (config.runtime.profile === "production") {
    const registry = new NodeSessionRegistry({ kv });
    const link = cluster.memberLogLink();
    const stopServing = link.serve((nodeId, query) => nodeLogs.read(nodeId, query));
    closeLink = () => {
      stopServing();
      link.close();
    };
    holders = {
      selfId: cluster.nodeId,
      connectedHere: options.connectedHere,
      holderOf: async (nodeId) => (await registry.lookup(nodeId))?.controllerId ?? null,
      readRemote: (controllerId, nodeId, query) => link.read(controllerId, nodeId, query),
    };
  }
  const nodeLogAccess: NodeLogAccess = new ClusterNodeLogs({ local: nodeLogs, holders, clock, pollIntervalMs: tuning?.nodeLogPollIntervalMs });

  return {
    nodeLogs,
    hub,
    share,
    diagnostics,
    onLogRecord: (nodeId, record) => nodeLogs.append(nodeId, fromDaemonRecord(record), record.dropped_before),
    routeModules: [
      logRoutes({ logs, nodeLogs: nodeLogAccess, requireNode: (id) => options.nodes.get(id), hub, tickets, share, diagnostics, audit: options.audit }),
      diagnosticsRoutes({ diagnostics, share, crashes: options.crashes, audit: options.audit }),
      shareRoutes({ share, audit: options.audit }),
    ],
    stop: () => {
      hub.stop();
      closeLink();
    },
  };
}
