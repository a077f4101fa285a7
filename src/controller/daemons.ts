/**
 * The daemon wing: machine credentials (instances' workload tokens, daemons' template-fetch
 * credentials), the console hub and its tickets, the daemon gateway (gRPC, which also serves the
 * cluster's membership service) and the coordination of scheduling across controllers
 * (coordination.ts). `start` binds the gateway's port, announces this controller to the cluster and
 * starts the credential refresh.
 */
import type { AuditService } from "../audit/audit-service.js";
import type { AuthService } from "../auth/auth-service.js";
import { clusterMembershipService } from "../cluster/peers/cluster-grpc-service.js";
import type { ClusterService } from "../cluster/cluster-service.js";
import type { ControllerConfig } from "../config/schema.js";
import { DocumentFencingHighWater } from "../coordination/fencing-high-water.js";
import type { KvMutex } from "../coordination/kv-mutex.js";
import { Tickets } from "../coordination/tickets.js";
import type { ControllerEventBus } from "../events/bus.js";
import { ConsoleHub } from "../gateway/console-hub.js";
import { createDaemonGateway } from "../gateway/create-gateway.js";
import { startCredentialRefresh } from "../gateway/credential-refresh.js";
import type { DaemonGateway, GatewayTuning } from "../gateway/daemon-gateway.js";
import type { ConsoleTicket } from "../http/routes/instance-control.js";
import type { ControllerLogService } from "../logs/logger.js";
import type { Logger } from "../logs/types.js";
import type { MetricsService } from "../metrics/metrics.js";
import { MachineCredentials, nodeCredentialTtlMs } from "../plugin-api/credentials.js";
import type { Clock } from "../shared/clock.js";
import type { Tracing } from "../shared/tracing.js";
import type { DocumentStore, KvStore } from "../store/ports.js";
import type { ScopePresence } from "../scheduler/lease-scopes.js";
import { buildCoordination, type SchedulingCoordination } from "./coordination.js";
import type { Domain } from "./domain.js";
import type { Cleanups } from "./lifecycle.js";
import type { LogsAndSharing } from "./logs-and-sharing.js";

export interface DaemonsOptions {
  config: ControllerConfig;
  cluster: ClusterService;
  documents: DocumentStore;
  kv: KvStore;
  events: ControllerEventBus;
  metrics: MetricsService;
  clock: Clock;
  logs: ControllerLogService;
  log: Logger;
  auth: AuthService;
  audit: AuditService;
  tracing: Tracing;
  recordLocks: KvMutex;
  domain: Pick<Domain, "instances" | "nodes" | "nodeTokens">;
  tuning?: Partial<GatewayTuning>;
  cleanups: Cleanups;
  /** This controller's presence entry (production): the live controllers for the fair share of groups. */
  presence?: ScopePresence | null;
}

export interface Daemons {
  credentials: MachineCredentials;
  consoleHub: ConsoleHub;
  consoleTickets: Tickets<ConsoleTicket>;
  gateway: DaemonGateway;
  fencingHighWater: DocumentFencingHighWater;
  coordination: SchedulingCoordination;
  /** Binds the log mirror once it exists: the gateway hands it the daemons' log records. */
  setLogsAndSharing(logsAndSharing: LogsAndSharing): void;
  /** Binds the HTTP API's port once it is bound (the gateway tells daemons where to reach it). */
  setHttpPort(port: number): void;
  /** Binds the gRPC port, announces this controller's addresses and starts the credential refresh; returns the port. */
  start(httpUrl: string): Promise<number>;
}

/** Builds the credentials, the gateway (not yet listening) and the coordination. */
export async function buildDaemons(options: DaemonsOptions): Promise<Daemons> {
  const { config, cluster, documents, kv, events, metrics, clock, logs, log, audit, cleanups } = options;
  const { nodes, nodeTokens, instances } = options.domain;
  // Machine credentials: instances' workload tokens and daemons' template-fetch credentials.
  const credentials = await MachineCredentials.open({ documents, clock, instances, nodes, lock: options.recordLocks.scoped("workload-family:") });
  options.auth.verifyWorkloadToken = (token) => credentials.principalOf(token);
  const consoleHub = new ConsoleHub();
  const consoleTickets = new Tickets<ConsoleTicket>({ kv, clock });

  let httpPort = 0;
  // Bound once readiness exists; the gateway hands it the daemons' log records.
  let logsAndSharing: LogsAndSharing | null = null;
  const issueApiCredential = (nodeId: string) => {
    const issued = credentials.issueNodeCredential(nodeId);
    return { token: issued.token, expires_at_ms: issued.expiresAtMs };
  };
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
    tuning: options.tuning,
    issueApiCredential,
    httpPort: () => httpPort,
    services: [clusterMembershipService({ cluster, audit, clock, logger: logs.logger("cloud.cluster"), tracing: options.tracing })],
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
    presence: options.presence,
  });

  return {
    credentials,
    consoleHub,
    consoleTickets,
    gateway,
    fencingHighWater,
    coordination,
    setLogsAndSharing: (built) => {
      logsAndSharing = built;
    },
    setHttpPort: (port) => {
      httpPort = port;
    },
    start: async (httpUrl) => {
      const grpcPort = await gateway.start();
      cluster.announce({ httpPort: Number(new URL(httpUrl).port), grpcPort });
      log.info(`Daemon gateway (gRPC) listening on port ${grpcPort}`);
      // A connected daemon gets a fresh template credential every half of its lifetime.
      const stopRefresh = startCredentialRefresh({ gateway, issue: issueApiCredential, intervalMs: nodeCredentialTtlMs / 2, clock });
      cleanups.push({ name: "credential refresh", run: stopRefresh });
      return grpcPort;
    },
  };
}
