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
 */
import { randomUUID } from "node:crypto";
import * as grpc from "@grpc/grpc-js";
import type { ClusterCa, CertificateAndKey } from "../cluster/ca.js";
import {
  EventTypes,
  type NodeConnectedPayload,
  type NodeDisconnectedPayload,
  type NodeHeartbeatResumedPayload,
  type NodeHeartbeatStalePayload,
  type NodeStatusPayload,
} from "../events/event-types.js";
import type { EventBus } from "../events/types.js";
import type { NodeRecord } from "../domain/nodes/node-schemas.js";
import type { NodeUpsert } from "../domain/nodes/node-service.js";
import type { Logger } from "../logs/types.js";
import type { MetricsService } from "../metrics/metrics.js";
import type { Clock } from "../shared/clock.js";
import {
  DAEMON_PROTOCOL_VERSION,
  controllerMessage,
  daemonGrpcMessageBytesMax,
  loadNodeGateway,
  payloadCase,
  unsupportedProtocolMessage,
  type ApiCredential,
  type CommandResult,
  type ControllerMessage,
  type DaemonMessage,
  type Hello,
  type InstanceCommand,
  type JoinRequest,
  type JoinResponse,
  type NodeStatusReport,
} from "../wire/daemon-proto.js";
import { GatewayError } from "./gateway-errors.js";
import type { JoinService } from "./join-service.js";

/** Controller ping period unless configured. */
export const heartbeatIntervalMsDefault = 5_000;
/** Unanswered pings after which a node is reported stale. */
export const staleAfterMissedPongsDefault = 2;
/** Unanswered pings after which the session is ended. */
export const disconnectAfterMissedPongsDefault = 6;
/** How long a new stream may take to send its hello. */
export const helloTimeoutMsDefault = 10_000;
/** Messages buffered for one session's stream; beyond this, sends fail with QUEUE_FULL. */
export const outboundQueueMessagesMaxDefault = 1_024;
/** How long {@link DaemonGateway.sendCommand} waits for the daemon's result. */
export const commandTimeoutMsDefault = 30_000;
/** Commands awaiting a result per session; beyond this, sends fail with QUEUE_FULL. */
export const pendingCommandsMaxDefault = 4_096;
/** How long `stop()` lets open calls end before the server cuts them. */
const SHUTDOWN_GRACE_MS = 500;

/** What the gateway needs from the node service. */
export interface GatewayNodes {
  upsert(id: string, update: NodeUpsert): Promise<NodeRecord>;
  get(id: string): Promise<NodeRecord>;
  isCertificateRevoked(id: string): Promise<boolean>;
  /** Calls `listener` when the certificate of `id` is revoked; returns the function that stops it. */
  onCertificateRevoked(id: string, listener: () => void): () => void;
}

/** Tunable bounds of the gateway; every field has a default. */
export interface GatewayTuning {
  heartbeatIntervalMs: number;
  staleAfterMissedPongs: number;
  disconnectAfterMissedPongs: number;
  helloTimeoutMs: number;
  outboundQueueMessagesMax: number;
  commandTimeoutMs: number;
  pendingCommandsMax: number;
}

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
}

/** A gRPC service served by the gateway's server beside NodeGateway. */
export interface GatewayService {
  definition: grpc.ServiceDefinition;
  implementation: grpc.UntypedServiceImplementation;
}

/** A daemon message the gateway does not handle itself (instance state, console, crash, log). */
export type DaemonReport = { nodeId: string; sessionId: string; message: DaemonMessage };

/** A live session, as {@link DaemonGateway.sessions} lists it. */
export interface SessionInfo {
  nodeId: string;
  sessionId: string;
  connectedAt: string;
  daemonVersion: string;
  stale: boolean;
  missedPongs: number;
}

interface PendingCommand {
  resolve(result: CommandResult): void;
  reject(error: GatewayError): void;
  timer: NodeJS.Timeout;
}

type ConnectCall = grpc.ServerDuplexStream<DaemonMessage, ControllerMessage>;

/** The gRPC server for daemons and the registry of their sessions. */
export class DaemonGateway {
  private readonly server: grpc.Server;
  private readonly tuning: GatewayTuning;
  private readonly sessions = new Map<string, Session>();
  private readonly reportHandlers = new Set<(report: DaemonReport) => void>();
  /** Per node, the tail of its record writes: connect, status and disconnect apply in order. */
  private readonly nodeWrites = new Map<string, Promise<void>>();
  private stopped = false;
  private boundPort: number | null = null;

  constructor(private readonly options: DaemonGatewayOptions) {
    this.tuning = {
      heartbeatIntervalMs: heartbeatIntervalMsDefault,
      staleAfterMissedPongs: staleAfterMissedPongsDefault,
      disconnectAfterMissedPongs: disconnectAfterMissedPongsDefault,
      helloTimeoutMs: helloTimeoutMsDefault,
      outboundQueueMessagesMax: outboundQueueMessagesMaxDefault,
      commandTimeoutMs: commandTimeoutMsDefault,
      pendingCommandsMax: pendingCommandsMaxDefault,
      ...options.tuning,
    };
    this.server = new grpc.Server({
      "grpc.max_receive_message_length": daemonGrpcMessageBytesMax,
      "grpc.max_send_message_length": daemonGrpcMessageBytesMax,
    });
    this.server.addService(loadNodeGateway().service, {
      Join: this.handleJoin.bind(this),
      Connect: this.handleConnect.bind(this),
    });
    for (const service of options.services ?? []) this.server.addService(service.definition, service.implementation);
  }

  /** Binds the server; resolves with the bound port (the real one when 0 was configured). */
  async start(): Promise<number> {
    const { ca, serverCertificate } = this.options;
    const provider = staticCertificateProvider(ca.certPem, serverCertificate);
    // Client certificates are requested and verified against the CA but not required by TLS:
    // Join has none yet. Connect checks that one was presented and verified.
    const credentials = grpc.experimental.createCertificateProviderServerCredentials(provider, provider, false);
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
    return [...this.sessions.values()].map((s) => s.info());
  }

  /** True when `nodeId` has a session on this controller. */
  isConnected(nodeId: string): boolean {
    return this.sessions.has(nodeId);
  }

  /** Receives daemon reports the gateway does not handle itself; returns an unsubscribe function. */
  onReport(handler: (report: DaemonReport) => void): () => void {
    this.reportHandlers.add(handler);
    return () => this.reportHandlers.delete(handler);
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
    await Promise.all(this.nodeWrites.values());
  }

  private handleJoin(call: grpc.ServerUnaryCall<JoinRequest, JoinResponse>, callback: grpc.sendUnaryData<JoinResponse>): void {
    this.options.metrics.grpcDaemonMessagesIn.inc({ payload_case: "join" });
    this.options.join.join(call.request).then(
      (result) => {
        if (result.ok) {
          const host = call.request.hostname || "unknown";
          const key = result.keySource === "node" ? "its own key" : "a key generated by the controller";
          if (result.retry) {
            this.options.logger.info(`Node ${result.response.node_id} repeated its join with the same token and key (an answer it did not receive); certificate issued again (host ${host})`);
          } else {
            this.options.logger.info(`Node ${result.response.node_id} joined with ${key} (host ${host})`);
          }
          callback(null, result.response);
        } else {
          this.options.logger.warn(`Refused a join from ${call.getPeer()}: ${result.rejection.message}`);
          // A malformed public key is a bad request, not a bad credential; the daemon gives up on both.
          const code = result.rejection.code === "INVALID_PUBLIC_KEY" ? grpc.status.INVALID_ARGUMENT : grpc.status.UNAUTHENTICATED;
          callback({ code, details: result.rejection.message });
        }
      },
      (err: unknown) => {
        this.options.logger.error("Join failed", err);
        callback({ code: grpc.status.INTERNAL, details: "Join failed" });
      },
    );
  }

  private handleConnect(call: ConnectCall): void {
    const certificate = call.getAuthContext()?.sslPeerCertificate;
    const commonName = certificate?.subject?.CN;
    const nodeId = typeof commonName === "string" ? commonName : Array.isArray(commonName) ? String(commonName[0]) : null;
    if (!nodeId) {
      // The refusal below is emitted as an error; without a listener it would throw in this process.
      call.on("error", () => undefined);
      call.emit("error", { code: grpc.status.UNAUTHENTICATED, details: "A client certificate issued by the cluster CA is required" });
      return;
    }
    if (this.stopped) {
      call.emit("error", { code: grpc.status.UNAVAILABLE, details: "Controller is stopping" });
      return;
    }
    // Watching starts before the revocation is read, so a revocation in between is not missed.
    let session: Session | null = null;
    const stopWatching = this.options.nodes.onCertificateRevoked(nodeId, () => {
      if (session) session.close(certificateRevokedMessage(nodeId), { status: grpc.status.UNAUTHENTICATED, markUnreachable: true });
      else refuse(grpc.status.UNAUTHENTICATED, certificateRevokedMessage(nodeId));
    });
    const helloTimer = setTimeout(() => refuse(grpc.status.DEADLINE_EXCEEDED, "No hello received in time"), this.tuning.helloTimeoutMs);
    let settled = false;
    const refuse = (code: grpc.status, details: string) => {
      if (settled) return;
      settled = true;
      clearTimeout(helloTimer);
      stopWatching();
      call.emit("error", { code, details });
    };
    const onError = () => refuse(grpc.status.CANCELLED, "stream error");
    const onEnd = () => refuse(grpc.status.CANCELLED, "stream ended before hello");
    call.on("error", onError);
    call.on("end", onEnd);
    call.once("data", (message: DaemonMessage) => {
      if (settled) return;
      this.options.metrics.grpcDaemonMessagesIn.inc({ payload_case: payloadCase(message) });
      if (message.payload !== "hello") return refuse(grpc.status.FAILED_PRECONDITION, "The first message must be hello");
      const hello = message.hello;
      if (hello.protocol_version < DAEMON_PROTOCOL_VERSION) {
        this.options.logger.warn(`Refused node ${nodeId}: ${unsupportedProtocolMessage(hello.protocol_version)}`);
        return refuse(grpc.status.FAILED_PRECONDITION, unsupportedProtocolMessage(hello.protocol_version));
      }
      // Messages after hello wait in the stream until the session listens.
      call.pause();
      this.options.nodes.isCertificateRevoked(nodeId).then(
        (revoked) => {
          if (settled) return;
          if (revoked) {
            this.options.logger.warn(`Refused node ${nodeId}: its certificate is revoked`);
            return refuse(grpc.status.UNAUTHENTICATED, certificateRevokedMessage(nodeId));
          }
          if (this.stopped) return refuse(grpc.status.UNAVAILABLE, "Controller is stopping");
          if (call.cancelled) return refuse(grpc.status.CANCELLED, "stream cancelled before hello_ack");
          settled = true;
          clearTimeout(helloTimer);
          // Only this handler's listeners: grpc-js keeps its own "error" listener, which sends the status.
          call.off("error", onError);
          call.off("end", onEnd);
          session = this.openSession(nodeId, call, hello, stopWatching);
          call.resume();
        },
        (err: unknown) => {
          this.options.logger.error(`Cannot read the certificate revocation of node ${nodeId}`, err);
          refuse(grpc.status.UNAVAILABLE, "Cannot check the node certificate; try again");
        },
      );
    });
  }

  /** Opens the node's session; `onEnded` runs once the session has closed. */
  private openSession(nodeId: string, call: ConnectCall, hello: Hello, onEnded: () => void): Session {
    const session = new Session(nodeId, call, hello, this.tuning, this.options, {
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
    // Node events go through the node's write queue, so they stay in order with the records.
    this.writeNode(nodeId, "the connection", async () => {
      try {
        await this.markConnected(nodeId, hello, nowIso);
      } finally {
        this.options.events.publish(EventTypes.NODE_CONNECTED, { nodeId, sessionId: session.id, timestamp: nowIso } satisfies NodeConnectedPayload);
      }
    });
    return session;
  }

  /**
   * UNREACHABLE or OFFLINE → ONLINE on connect, or DRAINING when a drain is pending (its
   * drainRequestedAt survived the outage); ONLINE and DRAINING are kept; a new node starts ONLINE.
   */
  private async markConnected(nodeId: string, hello: Hello, nowIso: string): Promise<void> {
    const record = await this.options.nodes.upsert(nodeId, {
      host: hello.hostname || "unknown",
      version: hello.daemon_version || null,
      totalMemoryMb: hello.total_memory_mb,
      usedMemoryMb: hello.used_memory_mb,
      connectedAt: nowIso,
      lastHeartbeatAt: nowIso,
    });
    if (record.state === "UNREACHABLE" || record.state === "OFFLINE") {
      await this.options.nodes.upsert(nodeId, { host: record.host, state: record.drainRequestedAt !== null ? "DRAINING" : "ONLINE" });
    }
  }

  private handleMessage(session: Session, message: DaemonMessage): void {
    switch (message.payload) {
      case "node_status":
        this.recordStatus(session, message.node_status);
        return;
      case "command_result":
        session.resolveCommand(message.command_result);
        return;
      case "hello":
        this.options.logger.warn(`Node ${session.nodeId} sent a second hello; ignored`);
        return;
      default:
        for (const handler of this.reportHandlers) {
          try {
            handler({ nodeId: session.nodeId, sessionId: session.id, message });
          } catch (err) {
            this.options.logger.error("A daemon report handler failed", err);
          }
        }
    }
  }

  /** Queues a write of one node's record behind the previous ones; failures are logged. */
  private writeNode(nodeId: string, what: string, write: () => Promise<void>): void {
    const previous = this.nodeWrites.get(nodeId) ?? Promise.resolve();
    const next = previous.then(write).catch((err: unknown) => this.options.logger.error(`Recording ${what} of node ${nodeId} failed`, err));
    this.nodeWrites.set(nodeId, next);
    void next.then(() => {
      if (this.nodeWrites.get(nodeId) === next) this.nodeWrites.delete(nodeId);
    });
  }

  private recordStatus(session: Session, status: NodeStatusReport): void {
    const nowIso = this.nowIso();
    this.writeNode(session.nodeId, "the status", async () => {
      const record = await this.options.nodes.get(session.nodeId);
      await this.options.nodes.upsert(session.nodeId, {
        host: record.host,
        cpuUsage: status.cpu_usage,
        usedMemoryMb: Math.round(status.used_memory_mb),
        totalMemoryMb: Math.round(status.total_memory_mb),
        lastHeartbeatAt: nowIso,
      });
    });
    this.options.events.publish(EventTypes.NODE_STATUS, {
      nodeId: session.nodeId,
      cpuUsage: status.cpu_usage,
      usedMemoryMb: status.used_memory_mb,
      totalMemoryMb: status.total_memory_mb,
      lastHeartbeatAt: nowIso,
    } satisfies NodeStatusPayload);
  }

  private sessionClosed(session: Session, reason: string, markUnreachable: boolean): void {
    this.options.metrics.grpcDaemonSessionsActive.dec();
    const current = this.sessions.get(session.nodeId) === session;
    if (current) this.sessions.delete(session.nodeId);
    const nodeId = session.nodeId;
    this.options.logger.info(`Node ${nodeId} disconnected (session ${session.id}): ${reason}`);
    const timestamp = this.nowIso();
    this.writeNode(nodeId, "the disconnection", async () => {
      try {
        if (current && markUnreachable) await this.markUnreachable(nodeId);
      } finally {
        this.options.events.publish(EventTypes.NODE_DISCONNECTED, { nodeId, reason, timestamp } satisfies NodeDisconnectedPayload);
      }
    });
  }

  /**
   * ONLINE or DRAINING → UNREACHABLE when the session ends (docs/decisions/node-states.md); a
   * pending drain is remembered through drainRequestedAt, which this write keeps.
   */
  private async markUnreachable(nodeId: string): Promise<void> {
    if (this.sessions.has(nodeId)) return;
    const record = await this.options.nodes.get(nodeId);
    if ((record.state === "ONLINE" || record.state === "DRAINING") && !this.sessions.has(nodeId)) {
      await this.options.nodes.upsert(nodeId, { host: record.host, state: "UNREACHABLE" });
    }
  }

  private nowIso(): string {
    return new Date(this.options.clock.nowMs()).toISOString();
  }
}

interface SessionCallbacks {
  onMessage(session: Session, message: DaemonMessage): void;
  onClosed(session: Session, reason: string, markUnreachable: boolean): void;
}

/** One daemon's stream: outbound sends, heartbeats and commands awaiting results. */
class Session {
  readonly id = randomUUID();
  closed = false;
  private readonly connectedAtIso: string;
  private readonly pending = new Map<string, PendingCommand>();
  private heartbeatTimer: NodeJS.Timeout | null = null;
  private pingSequence = 0;
  private missedPongs = 0;
  private stale = false;
  private lastHeartbeatAtMs: number;

  constructor(
    readonly nodeId: string,
    private readonly call: ConnectCall,
    private readonly hello: Hello,
    private readonly tuning: GatewayTuning,
    private readonly options: DaemonGatewayOptions,
    private readonly callbacks: SessionCallbacks,
  ) {
    this.lastHeartbeatAtMs = options.clock.nowMs();
    this.connectedAtIso = new Date(this.lastHeartbeatAtMs).toISOString();
    call.on("data", (message: DaemonMessage) => this.receive(message));
    call.on("end", () => this.close("daemon closed the stream", { status: grpc.status.OK, markUnreachable: true }));
    call.on("error", (err: Error) => this.close(`stream error: ${err.message}`, { markUnreachable: true }));
    call.on("cancelled", () => this.close("stream cancelled", { markUnreachable: true }));
    call.on("close", () => this.close("stream closed", { markUnreachable: true }));
  }

  info(): SessionInfo {
    return {
      nodeId: this.nodeId,
      sessionId: this.id,
      connectedAt: this.connectedAtIso,
      daemonVersion: this.hello.daemon_version,
      stale: this.stale,
      missedPongs: this.missedPongs,
    };
  }

  startHeartbeats(): void {
    this.heartbeatTimer = setInterval(() => this.heartbeat(), this.tuning.heartbeatIntervalMs);
    this.heartbeatTimer.unref();
  }

  /** Writes a message unless the outbound buffer is full; true when queued. */
  send(message: ControllerMessage): boolean {
    const kind = payloadCase(message);
    if (this.closed || this.call.writableLength >= this.tuning.outboundQueueMessagesMax) {
      this.options.metrics.grpcDaemonMessagesOut.inc({ payload_case: kind, outcome: "dropped" });
      return false;
    }
    this.call.write(message);
    this.options.metrics.grpcDaemonMessagesOut.inc({ payload_case: kind, outcome: "delivered" });
    return true;
  }

  sendCommand(command: InstanceCommand, timeoutMs: number): Promise<CommandResult> {
    if (this.pending.size >= this.tuning.pendingCommandsMax) {
      return Promise.reject(new GatewayError("QUEUE_FULL", `Too many commands awaiting results from node ${this.nodeId}`));
    }
    const commandId = randomUUID();
    return new Promise<CommandResult>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(commandId);
        reject(new GatewayError("COMMAND_TIMEOUT", `Node ${this.nodeId} did not answer command ${command.type} within ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(commandId, { resolve, reject, timer });
      const sent = this.send(controllerMessage(command.type, { ...command.body, command_id: commandId } as never));
      if (!sent) {
        clearTimeout(timer);
        this.pending.delete(commandId);
        reject(new GatewayError("QUEUE_FULL", `The outbound queue of node ${this.nodeId} is full`));
      }
    });
  }

  resolveCommand(result: CommandResult): void {
    const pending = this.pending.get(result.command_id);
    if (!pending) return;
    this.pending.delete(result.command_id);
    clearTimeout(pending.timer);
    pending.resolve(result);
  }

  close(reason: string, opts: { status?: grpc.status; markUnreachable?: boolean } = {}): void {
    if (this.closed) return;
    this.closed = true;
    if (this.heartbeatTimer) clearInterval(this.heartbeatTimer);
    for (const [id, pending] of this.pending) {
      clearTimeout(pending.timer);
      pending.reject(new GatewayError("NODE_DISCONNECTED", `Node ${this.nodeId} disconnected before answering (${reason})`));
      this.pending.delete(id);
    }
    try {
      if (opts.status !== undefined && opts.status !== grpc.status.OK) {
        this.call.emit("error", { code: opts.status, details: reason });
      } else {
        this.call.end();
      }
    } catch {
      // The stream is already gone.
    }
    this.callbacks.onClosed(this, reason, opts.markUnreachable ?? false);
  }

  private receive(message: DaemonMessage): void {
    if (this.closed) return;
    this.options.metrics.grpcDaemonMessagesIn.inc({ payload_case: payloadCase(message) });
    // Any message is a sign of life: a busy daemon whose pongs queue behind its reports is alive.
    this.heartbeatAnswered();
    switch (message.payload) {
      case "pong":
        return;
      case "ping":
        this.send(controllerMessage("pong", { sequence: message.ping.sequence, sent_at_ms: this.options.clock.nowMs() }));
        return;
      default:
        this.callbacks.onMessage(this, message);
    }
  }

  private heartbeat(): void {
    if (this.closed) return;
    if (this.missedPongs >= this.tuning.disconnectAfterMissedPongs) {
      this.close(`heartbeat timeout (${this.missedPongs} pings unanswered)`, { status: grpc.status.UNAVAILABLE, markUnreachable: true });
      return;
    }
    if (this.missedPongs >= this.tuning.staleAfterMissedPongs && !this.stale) {
      this.stale = true;
      this.options.logger.warn(`Node ${this.nodeId} heartbeat stale: ${this.missedPongs} pings unanswered`);
      this.options.events.publish(EventTypes.NODE_HEARTBEAT_STALE, {
        nodeId: this.nodeId,
        missedPongs: this.missedPongs,
        lastHeartbeatAt: new Date(this.lastHeartbeatAtMs).toISOString(),
      } satisfies NodeHeartbeatStalePayload);
    }
    this.pingSequence += 1;
    this.missedPongs += 1;
    this.send(controllerMessage("ping", { sequence: this.pingSequence, sent_at_ms: this.options.clock.nowMs() }));
  }

  private heartbeatAnswered(): void {
    this.missedPongs = 0;
    this.lastHeartbeatAtMs = this.options.clock.nowMs();
    if (!this.stale) return;
    this.stale = false;
    this.options.logger.info(`Node ${this.nodeId} heartbeat resumed`);
    this.options.events.publish(EventTypes.NODE_HEARTBEAT_RESUMED, {
      nodeId: this.nodeId,
      lastHeartbeatAt: new Date(this.lastHeartbeatAtMs).toISOString(),
    } satisfies NodeHeartbeatResumedPayload);
  }
}

/** Why a revoked node's stream is refused or ended (UNAUTHENTICATED). */
export function certificateRevokedMessage(nodeId: string): string {
  return `The certificate of node ${nodeId} has been revoked`;
}

/**
 * A certificate provider that serves fixed PEM material (the CA and this controller's certificate).
 * Listeners are called on a microtask: grpc-js registers the server's watcher only after adding
 * the listeners, so a synchronous first update would never reach the server.
 */
function staticCertificateProvider(caPem: string, identity: CertificateAndKey): grpc.experimental.CertificateProvider {
  const ca = { caCertificate: Buffer.from(caPem) };
  const id = { certificate: Buffer.from(identity.certPem), privateKey: Buffer.from(identity.keyPem) };
  return {
    addCaCertificateListener: (listener) => queueMicrotask(() => listener(ca)),
    removeCaCertificateListener: () => undefined,
    addIdentityCertificateListener: (listener) => queueMicrotask(() => listener(id)),
    removeIdentityCertificateListener: () => undefined,
  };
}
