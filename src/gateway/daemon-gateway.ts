/**
 * The controller side of the daemon stream (ARCHITECTURE.md, "The daemon stream"): one gRPC
 * server serving `NodeGateway.Join` (server TLS, authenticated by a node join token) and
 * `NodeGateway.Connect` (mutual TLS; the node id is the client certificate's common name).
 *
 * The server requests a client certificate but does not require one at the TLS layer (a joining
 * daemon has none yet); Connect refuses a call whose peer did not present a certificate that
 * verified against the cluster CA. Per node there is one session; a new session replaces the old.
 * The controller pings every `heartbeatIntervalMs`; unanswered pings make the node stale
 * (NODE_HEARTBEAT_STALE), a pong after that resumes it, and too many end the session.
 *
 * This module coordinates: the server, the session registry and the routing of daemon messages.
 * The parts: `join-handler.ts` (Join), `connect-handshake.ts` (Connect up to the session),
 * `daemon-session.ts` (one stream, with `heartbeat-monitor.ts` and `pending-commands.ts`),
 * `node-liveness-records.ts` (node records and events), `report-intake.ts` (report subscribers).
 */
import * as grpc from "@grpc/grpc-js";
import type { ClusterCa, CertificateAndKey } from "../cluster/identity/ca.js";
import type { EventBus } from "../events/types.js";
import type { Logger } from "../logs/types.js";
import type { MetricsService } from "../metrics/metrics.js";
import type { Clock } from "../shared/clock.js";
import {
  DAEMON_PROTOCOL_VERSION,
  controllerMessage,
  daemonGrpcMessageBytesMax,
  loadNodeGateway,
  type ApiCredential,
  type CommandResult,
  type ControllerMessage,
  type DaemonMessage,
  type Hello,
  type InstanceCommand,
  type LogRecordMessage,
} from "../wire/daemon-proto.js";
import { clampLogRecord } from "../wire/log-records.js";
import { acceptConnect } from "./connect-handshake.js";
import { DaemonSession } from "./daemon-session.js";
import { GatewayError } from "./gateway-errors.js";
import { gatewayServerCredentials } from "./gateway-tls.js";
import {
  resolveGatewayTuning,
  type ConnectCall,
  type DaemonReport,
  type GatewayNodes,
  type GatewayService,
  type GatewayTuning,
  type SessionInfo,
} from "./gateway-types.js";
import { joinHandler } from "./join-handler.js";
import type { JoinService } from "./join-service.js";
import { NodeLivenessRecords } from "./node-liveness-records.js";
import { ReportIntake } from "./report-intake.js";

export { certificateRevokedMessage } from "./connect-handshake.js";
export type { DaemonReport, GatewayNodes, GatewayService, GatewayTuning, SessionInfo } from "./gateway-types.js";

/** How long `stop()` lets open calls end before the server cuts them. */
const SHUTDOWN_GRACE_MS = 500;

export interface DaemonGatewayOptions {
  /** Address to bind, e.g. `0.0.0.0`. */
  host: string;
  /** Port to bind; 0 picks a free one (see {@link DaemonGateway.start}). */
  port: number;
  ca: ClusterCa;
  /** This controller's TLS server certificate, issued by `ca`. */
  serverCertificate: CertificateAndKey;
  join: JoinService;
  nodes: GatewayNodes;
  events: EventBus;
  metrics: MetricsService;
  clock: Clock;
  logger: Logger;
  tuning?: Partial<GatewayTuning>;
  /** Issues the credential a daemon uses on the controller's template routes (sent in hello_ack). */
  issueApiCredential?: (nodeId: string) => ApiCredential;
  /** The controller's HTTP port, announced in hello_ack (read at each handshake: known once HTTP listens). */
  httpPort?: () => number;
  /** Further services served on the same port and TLS settings (the cluster membership service). */
  services?: readonly GatewayService[];
  /**
   * Receives each daemon log record (clamped again here). Log records are kept apart from the
   * reports: they are not relayed to the other controllers.
   */
  onLogRecord?: (nodeId: string, record: LogRecordMessage) => void;
}

/** The gRPC server for daemons and the registry of their sessions. */
export class DaemonGateway {
  private readonly server: grpc.Server;
  private readonly tuning: GatewayTuning;
  private readonly sessions = new Map<string, DaemonSession>();
  private readonly reports: ReportIntake;
  private readonly records: NodeLivenessRecords;
  private stopped = false;
  private boundPort: number | null = null;

  constructor(private readonly options: DaemonGatewayOptions) {
    this.tuning = resolveGatewayTuning(options.tuning);
    this.reports = new ReportIntake(options.logger);
    this.records = new NodeLivenessRecords({
      nodes: options.nodes,
      events: options.events,
      logger: options.logger,
      hasSession: (nodeId) => this.sessions.has(nodeId),
    });
    this.server = new grpc.Server({
      "grpc.max_receive_message_length": daemonGrpcMessageBytesMax,
      "grpc.max_send_message_length": daemonGrpcMessageBytesMax,
    });
    this.server.addService(loadNodeGateway().service, {
      Join: joinHandler(options.join, options.metrics, options.logger),
      Connect: (call: ConnectCall) =>
        acceptConnect(call, {
          nodes: options.nodes,
          metrics: options.metrics,
          logger: options.logger,
          helloTimeoutMs: this.tuning.helloTimeoutMs,
          isStopping: () => this.stopped,
          openSession: (nodeId, c, hello, onEnded) => this.openSession(nodeId, c, hello, onEnded),
        }),
    });
    for (const service of options.services ?? []) this.server.addService(service.definition, service.implementation);
  }

  /** Binds the server; resolves with the bound port (the real one when 0 was configured). */
  async start(): Promise<number> {
    const credentials = gatewayServerCredentials(this.options.ca.certPem, this.options.serverCertificate);
    const address = `${this.options.host.includes(":") ? `[${this.options.host}]` : this.options.host}:${this.options.port}`;
    this.boundPort = await new Promise<number>((resolve, reject) => {
      this.server.bindAsync(address, credentials, (error, port) =>
        error ? reject(new Error(`Cannot listen for daemons on ${address}: ${error.message}`, { cause: error })) : resolve(port),
      );
    });
    return this.boundPort;
  }

  /** The bound port, or null before {@link start}. */
  get port(): number | null {
    return this.boundPort;
  }

  /** Live sessions on this controller. */
  listSessions(): SessionInfo[] {
    return [...this.sessions.values()].map((s) => ({ ...s.info(), sessionEpoch: this.records.epochOf(s.id) ?? null }));
  }

  /** True when `nodeId` has a session on this controller. */
  isConnected(nodeId: string): boolean {
    return this.sessions.has(nodeId);
  }

  /** Receives daemon reports the gateway does not handle itself; returns an unsubscribe function. */
  onReport(handler: (report: DaemonReport) => void): () => void {
    return this.reports.subscribe(handler);
  }

  /**
   * Sends an instance command to a node's daemon and resolves with its result. Fails with a
   * {@link GatewayError}: NODE_NOT_CONNECTED, QUEUE_FULL, COMMAND_TIMEOUT or NODE_DISCONNECTED.
   */
  sendCommand(nodeId: string, command: InstanceCommand, timeoutMs = this.tuning.commandTimeoutMs): Promise<CommandResult> {
    if (this.stopped) return Promise.reject(new GatewayError("GATEWAY_STOPPED", "The daemon gateway is stopped"));
    const session = this.sessions.get(nodeId);
    if (!session) return Promise.reject(new GatewayError("NODE_NOT_CONNECTED", `Node ${nodeId} is not connected to this controller`));
    return session.sendCommand(command, timeoutMs);
  }

  /** Sends a message that expects no answer (e.g. a fresh API credential); false when not delivered. */
  sendToNode(nodeId: string, message: ControllerMessage): boolean {
    return this.sessions.get(nodeId)?.send(message) ?? false;
  }

  /** Ends every session and stops the server; safe to call more than once. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    for (const session of [...this.sessions.values()]) session.close("controller stopping", { status: grpc.status.UNAVAILABLE });
    // tryShutdown waits for every call to end; past the bound the rest are cut. grpc-js does not
    // call tryShutdown's callback after a forceShutdown, so the bound resolves on its own.
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        this.server.forceShutdown();
        resolve();
      }, SHUTDOWN_GRACE_MS);
      this.server.tryShutdown(() => {
        clearTimeout(timer);
        resolve();
      });
    });
    // Node record writes still queued finish before the stores close.
    await this.records.settled();
  }

  /** Opens the node's session; `onEnded` runs once the session has closed. */
  private openSession(nodeId: string, call: ConnectCall, hello: Hello, onEnded: () => void): DaemonSession {
    const session = new DaemonSession(nodeId, call, hello, this.tuning, this.options, {
      onMessage: (s, message) => this.handleMessage(s, message),
      onClosed: (s, reason, markUnreachable) => {
        onEnded();
        this.sessionClosed(s, reason, markUnreachable);
      },
    });
    const previous = this.sessions.get(nodeId);
    this.sessions.set(nodeId, session);
    previous?.close("replaced by a new session", { status: grpc.status.ABORTED });
    this.options.metrics.grpcDaemonSessionsActive.inc();
    session.send(
      controllerMessage("hello_ack", {
        protocol_version: DAEMON_PROTOCOL_VERSION,
        protocol_compatible: true,
        session_id: session.id,
        heartbeat_interval_ms: this.tuning.heartbeatIntervalMs,
        api_credential: this.options.issueApiCredential?.(nodeId) ?? null,
        http_port: this.options.httpPort?.() ?? 0,
      }),
    );
    session.startHeartbeats();
    const nowIso = this.nowIso();
    this.options.logger.info(`Node ${nodeId} connected (session ${session.id}, daemon ${hello.daemon_version || "unknown"})`);
    // Published once the record says ONLINE: a scheduler that reacts to the event places on it.
    this.records.connected(nodeId, session.id, hello, nowIso);
    return session;
  }

  private handleMessage(session: DaemonSession, message: DaemonMessage): void {
    switch (message.payload) {
      case "node_status":
        this.records.status(session.nodeId, message.node_status, this.nowIso());
        return;
      case "command_result":
        session.resolveCommand(message.command_result);
        return;
      case "hello":
        this.options.logger.warn(`Node ${session.nodeId} sent a second hello; ignored`);
        return;
      case "log_record":
        this.options.onLogRecord?.(session.nodeId, clampLogRecord(message.log_record));
        return;
      default:
        this.reports.deliver({ nodeId: session.nodeId, sessionId: session.id, message });
    }
  }

  private sessionClosed(session: DaemonSession, reason: string, markUnreachable: boolean): void {
    this.options.metrics.grpcDaemonSessionsActive.dec();
    const current = this.sessions.get(session.nodeId) === session;
    if (current) this.sessions.delete(session.nodeId);
    this.options.logger.info(`Node ${session.nodeId} disconnected (session ${session.id}): ${reason}`);
    this.records.disconnected(session.nodeId, session.id, reason, this.nowIso(), current && markUnreachable);
  }

  private nowIso(): string {
    return new Date(this.options.clock.nowMs()).toISOString();
  }
}
