/**
 * The daemon side of the daemon stream. Joins once with the node join token and its own key pair
 * (src/daemon/node-key.ts: the private key is stored in `dataDir` before the first attempt and
 * reused by every retry, so a join whose answer was lost can be repeated with the same token; the
 * node id, certificate and CA are kept there afterwards), then holds one mutual-TLS stream to a controller:
 * hello first, answers pings, reports node status periodically, dispatches instance commands to
 * an injected handler. Every controller address is kept; a broken stream is re-opened on the next
 * address after an exponential back-off with jitter, bounded by `reconnectDelayMaxMs`. A hello_ack
 * with protocol_compatible false ends the client (no reconnect). Reports go out through
 * {@link GatewayClient.send}; {@link GatewayClientOptions.onSessionOpen} runs right after each
 * hello_ack, before anything else is sent on the new stream.
 */
import { createPublicKey, X509Certificate } from "node:crypto";
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { cpus, freemem, hostname as osHostname, totalmem } from "node:os";
import { join } from "node:path";
import type { PeerCertificate } from "node:tls";
import * as grpc from "@grpc/grpc-js";
import {
  DAEMON_PROTOCOL_VERSION,
  daemonGrpcMessageBytesMax,
  daemonMessage,
  loadNodeGateway,
  type CommandResult,
  type ControllerMessage,
  type ApiCredential,
  type DaemonMessage,
  type HelloAck,
  type InstanceCommand,
  type JoinRequest,
  type JoinResponse,
} from "../wire/daemon-proto.js";
import { SpanKind, SpanStatusCode, type Tracing } from "../shared/tracing.js";
import { CONTROLLER_CERTIFICATE_NAME } from "../wire/certificate-names.js";
import { loadOrCreateNodeKey, NODE_KEY_FILE, writeFileDurably } from "./node-key.js";

/** File names of the node identity inside `dataDir`. */
export const IDENTITY_FILES = { nodeId: "node-id", key: NODE_KEY_FILE, certificate: "node.crt", ca: "ca.crt" } as const;

/** The node's identity after joining. */
export interface NodeIdentity {
  nodeId: string;
  keyPem: string;
  certificatePem: string;
  caPem: string;
}

/** Handles one instance command; an expected failure is a result with ok false and a code. */
export type CommandHandler = (command: InstanceCommand & { commandId: string }) => Promise<Omit<CommandResult, "command_id">>;

/** Minimal logger the client writes to. */
export interface ClientLogger {
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
}

/** A stream the controller acknowledged. */
export interface SessionInfo {
  /** The controller address this stream dialled (`host:port`). */
  address: string;
  helloAck: HelloAck;
}

/** Options of {@link GatewayClient.send}. */
export interface SendOptions {
  /**
   * Dropped (send returns false) when the stream already buffers
   * {@link droppableBufferedMessagesMax} messages: console lines, not state reports.
   */
  droppable?: boolean;
  /**
   * Lowest priority (mirrored log records): written only while fewer than
   * {@link backgroundBufferedMessagesMax} messages wait, so reports never queue behind them.
   */
  background?: boolean;
}

/** Where the client is. */
export type ClientState = "joining" | "connecting" | "connected" | "backoff" | "stopped";

/** Stable codes of {@link GatewayClientError}. */
export type GatewayClientErrorCode = "JOIN_REFUSED" | "NO_IDENTITY" | "PROTOCOL_INCOMPATIBLE";

/** A failure the client does not retry. */
export class GatewayClientError extends Error {
  constructor(
    readonly code: GatewayClientErrorCode,
    message: string,
  ) {
    super(message);
    this.name = "GatewayClientError";
  }
}

export interface GatewayClientOptions {
  /** Every controller's gRPC address (`host:port`). */
  controllers: readonly string[];
  token?: string;
  nodeId?: string;
  hostname?: string;
  dataDir: string;
  maxMemoryMb: number;
  daemonVersion: string;
  /** Sent in hello; only tests change it. */
  protocolVersion?: number;
  statusIntervalMs: number;
  reconnectDelayMinMs: number;
  reconnectDelayMaxMs: number;
  /** How long one connection attempt may take to be acknowledged. */
  connectTimeoutMs?: number;
  /** How long one Join call may take before it is retried (15 s by default). */
  joinTimeoutMs?: number;
  commandHandler?: CommandHandler;
  /** Spans of the handled commands, continuing the controller's `traceparent`; none by default. */
  tracing?: Tracing;
  logger: ClientLogger;
  /** Uniform [0, 1); Math.random by default (jitter). */
  random?: () => number;
  /** Memory currently used by instances; host memory in use by default. */
  usedMemoryMb?: () => number;
  onStateChange?: (state: ClientState, detail: string) => void;
  /**
   * Runs synchronously right after a compatible hello_ack, before the first node status: what is
   * sent here is the first thing the controller receives on the session.
   */
  onSessionOpen?: (session: SessionInfo) => void;
  /** The controller sent a fresh API credential (`api_credential`). */
  onApiCredential?: (credential: ApiCredential) => void;
  /** Called when the client gives up for good (refused join, incompatible protocol). */
  onFatal?: (error: GatewayClientError) => void;
}

type NodeGatewayClient = grpc.Client & {
  Join(request: JoinRequest, options: grpc.CallOptions, callback: (error: grpc.ServiceError | null, response?: JoinResponse) => void): grpc.ClientUnaryCall;
  Connect(options?: grpc.CallOptions): grpc.ClientDuplexStream<DaemonMessage, ControllerMessage>;
};

const connectTimeoutMsDefault = 15_000;
const joinTimeoutMsDefault = 15_000;
/** Heartbeat intervals without any controller message after which the daemon reconnects. */
export const controllerSilenceHeartbeats = 4;
/**
 * Droppable messages are only written while fewer than this many messages wait: instance state
 * reports are never queued behind a backlog of console lines (a daemon starting hundreds of
 * servers prints thousands of lines while its spawns keep the event loop busy).
 */
export const droppableBufferedMessagesMax = 64;
/** Background messages (log records) are only written while fewer than this many messages wait. */
export const backgroundBufferedMessagesMax = 8;

/** Delay before reconnect attempt `attempt` (0-based): min·2^attempt capped at max, with ±50 % jitter. */
export function backoffDelayMs(attempt: number, minMs: number, maxMs: number, random: () => number): number {
  const base = Math.min(maxMs, minMs * 2 ** Math.min(attempt, 30));
  return Math.min(maxMs, Math.round(base * (0.5 + random())));
}

/** Reads the identity stored in `dataDir`, or null before the node joined. */
export async function readIdentity(dataDir: string): Promise<NodeIdentity | null> {
  const path = (name: string) => join(dataDir, name);
  if (!existsSync(path(IDENTITY_FILES.nodeId))) return null;
  const [nodeId, keyPem, certificatePem, caPem] = await Promise.all(
    [IDENTITY_FILES.nodeId, IDENTITY_FILES.key, IDENTITY_FILES.certificate, IDENTITY_FILES.ca].map((name) => readFile(path(name), "utf8")),
  );
  return { nodeId: nodeId!.trim(), keyPem: keyPem!, certificatePem: certificatePem!, caPem: caPem! };
}

/**
 * Stores the identity; the node id file is written last, so its presence means complete. The key
 * file is written only when the controller generated the key (`keyGenerated`): the node's own key
 * is already there.
 */
async function writeIdentity(dataDir: string, identity: NodeIdentity, keyGenerated: boolean): Promise<void> {
  if (keyGenerated) await writeFileDurably(dataDir, IDENTITY_FILES.key, identity.keyPem, 0o600);
  await writeFileDurably(dataDir, IDENTITY_FILES.certificate, identity.certificatePem, 0o644);
  await writeFileDurably(dataDir, IDENTITY_FILES.ca, identity.caPem, 0o644);
  await writeFileDurably(dataDir, IDENTITY_FILES.nodeId, `${identity.nodeId}\n`, 0o644);
}

/** True when `certificatePem` is for the public key of `keyPem`; false for anything unreadable. */
function certificateMatchesKey(certificatePem: string, keyPem: string): boolean {
  try {
    return new X509Certificate(certificatePem).publicKey.equals(createPublicKey(keyPem));
  } catch {
    // An unreadable certificate or key does not match; the caller refuses the answer.
    return false;
  }
}

/** Accepts a controller certificate by its name, whatever address it was reached on. */
function checkControllerIdentity(_host: string, certificate: PeerCertificate): Error | undefined {
  return certificate.subject?.CN === CONTROLLER_CERTIFICATE_NAME ? undefined : new Error(`Not a controller certificate: ${String(certificate.subject?.CN)}`);
}

/** The daemon's connection to the controllers. */
export class GatewayClient {
  private readonly service = loadNodeGateway();
  private readonly random: () => number;
  private identity: NodeIdentity | null = null;
  private client: NodeGatewayClient | null = null;
  private stream: grpc.ClientDuplexStream<DaemonMessage, ControllerMessage> | null = null;
  private addressIndex = 0;
  private attempt = 0;
  private stopped = false;
  private reconnectTimer: NodeJS.Timeout | null = null;
  private statusTimer: NodeJS.Timeout | null = null;
  private silenceTimer: NodeJS.Timeout | null = null;
  private lastHeardAtMs = 0;
  private connectTimer: NodeJS.Timeout | null = null;
  private stateValue: ClientState = "connecting";
  private lastCpu = cpus().map((c) => c.times);

  constructor(private readonly options: GatewayClientOptions) {
    if (options.controllers.length === 0) throw new Error("At least one controller address is required");
    this.random = options.random ?? Math.random;
  }

  /** The node id once joined. */
  get nodeId(): string | null {
    return this.identity?.nodeId ?? null;
  }

  /** The current state. */
  get state(): ClientState {
    return this.stateValue;
  }

  /**
   * Joins when `dataDir` holds no identity yet (with the token, rotating addresses on transport
   * errors), then starts connecting. Rejects with a {@link GatewayClientError} when the join is refused.
   */
  async start(): Promise<void> {
    this.identity = await readIdentity(this.options.dataDir);
    if (!this.identity) {
      if (!this.options.token) throw new GatewayClientError("NO_IDENTITY", `Not joined yet (no identity in ${this.options.dataDir}) and no token configured`);
      const joined = await this.join(this.options.token);
      await writeIdentity(this.options.dataDir, joined.identity, joined.keyGenerated);
      this.identity = joined.identity;
      this.options.logger.info(`Joined as node ${this.identity.nodeId}`);
    }
    this.connect();
  }

  /**
   * Hands a report (instance state, console line, crash report, inventory, cache status) to the
   * current stream. True when it was handed over; false when no session is open, or when a
   * `droppable` message meets a full outgoing buffer. A message handed over can still be lost
   * with a breaking connection: the inventory after the next hello_ack covers that.
   */
  send(message: DaemonMessage, options: SendOptions = {}): boolean {
    const stream = this.stream;
    if (!stream || this.stateValue !== "connected") return false;
    if (options.droppable && stream.writableLength >= droppableBufferedMessagesMax) return false;
    if (options.background && stream.writableLength >= backgroundBufferedMessagesMax) return false;
    stream.write(message);
    return true;
  }

  /** Closes the stream and stops reconnecting. */
  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.clearTimers();
    this.stream?.cancel();
    this.stream = null;
    this.client?.close();
    this.client = null;
    this.setState("stopped", "stopped");
  }

  /**
   * Joins with the node's own key (created and stored before the first attempt). An older
   * controller that ignores the public key answers a key pair of its own: that one is used.
   */
  private async join(token: string): Promise<{ identity: NodeIdentity; keyGenerated: boolean }> {
    const nodeKey = await loadOrCreateNodeKey(this.options.dataDir);
    for (let attempt = 0; ; attempt++) {
      if (this.stopped) throw new GatewayClientError("JOIN_REFUSED", "Stopped before joining");
      const address = this.nextAddress();
      this.setState("joining", address);
      // No CA is known before joining: the controller's certificate is not verified here (the
      // token authenticates the daemon; see docs/decisions/daemon-stream.md).
      const credentials = grpc.credentials.createSsl(null, null, null, { rejectUnauthorized: false, checkServerIdentity: () => undefined });
      const client = new (this.service as unknown as new (address: string, credentials: grpc.ChannelCredentials, options: object) => NodeGatewayClient)(
        address,
        credentials,
        { "grpc.ssl_target_name_override": CONTROLLER_CERTIFICATE_NAME },
      );
      try {
        const response = await new Promise<JoinResponse>((resolve, reject) => {
          client.Join(
            {
              token,
              node_id: this.options.nodeId ?? "",
              hostname: this.options.hostname ?? osHostname(),
              daemon_version: this.options.daemonVersion,
              total_memory_mb: this.options.maxMemoryMb,
              csr_public_key_pem: nodeKey.publicKeyPem,
            },
            { deadline: Date.now() + (this.options.joinTimeoutMs ?? joinTimeoutMsDefault) },
            (error, res) => (error ? reject(error) : resolve(res!)),
          );
        });
        const keyGenerated = response.private_key_pem !== "";
        const keyPem = keyGenerated ? response.private_key_pem : nodeKey.keyPem;
        if (!certificateMatchesKey(response.certificate_pem, keyPem)) {
          throw new GatewayClientError("JOIN_REFUSED", `Join via ${address} answered a certificate that does not match the node key`);
        }
        const identity = { nodeId: response.node_id, keyPem, certificatePem: response.certificate_pem, caPem: response.ca_certificate_pem };
        return { identity, keyGenerated };
      } catch (err) {
        if (err instanceof GatewayClientError) throw err;
        const error = err as grpc.ServiceError;
        if (error.code === grpc.status.UNAUTHENTICATED || error.code === grpc.status.INVALID_ARGUMENT) {
          throw new GatewayClientError("JOIN_REFUSED", `Join refused by ${address}: ${error.details || error.message}`);
        }
        const delayMs = backoffDelayMs(attempt, this.options.reconnectDelayMinMs, this.options.reconnectDelayMaxMs, this.random);
        this.options.logger.warn(`Join via ${address} failed (${error.details || error.message}); retrying in ${delayMs} ms`);
        await new Promise((r) => setTimeout(r, delayMs));
      } finally {
        client.close();
      }
    }
  }

  private nextAddress(): string {
    const address = this.options.controllers[this.addressIndex % this.options.controllers.length]!;
    this.addressIndex += 1;
    return address;
  }

  private connect(): void {
    if (this.stopped || !this.identity) return;
    const address = this.nextAddress();
    this.setState("connecting", address);
    const { caPem, keyPem, certificatePem } = this.identity;
    const credentials = grpc.credentials.createSsl(Buffer.from(caPem), Buffer.from(keyPem), Buffer.from(certificatePem), {
      checkServerIdentity: checkControllerIdentity,
    });
    this.client?.close();
    const client = new (this.service as unknown as new (address: string, credentials: grpc.ChannelCredentials, options: object) => NodeGatewayClient)(
      address,
      credentials,
      {
        "grpc.max_receive_message_length": daemonGrpcMessageBytesMax,
        "grpc.max_send_message_length": daemonGrpcMessageBytesMax,
        // The controller certificate is checked by name, whatever address reached it.
        "grpc.ssl_target_name_override": CONTROLLER_CERTIFICATE_NAME,
      },
    );
    this.client = client;
    const stream = client.Connect();
    this.stream = stream;
    let ended = false;
    const end = (why: string) => {
      if (ended) return;
      ended = true;
      if (this.stream === stream) this.stream = null;
      this.clearTimers();
      stream.removeAllListeners("data");
      // Cancelling makes the stream emit CANCELLED; the end it reports is already handled here.
      stream.on("error", () => undefined);
      stream.cancel();
      if (this.stopped) return;
      this.scheduleReconnect(`${address}: ${why}`);
    };
    this.connectTimer = setTimeout(() => end("no hello_ack in time"), this.options.connectTimeoutMs ?? connectTimeoutMsDefault);
    stream.on("data", (message: ControllerMessage) => {
      this.lastHeardAtMs = Date.now();
      this.receive(stream, message, address, end);
    });
    stream.on("error", (err: grpc.ServiceError) => end(err.details || err.message));
    stream.on("end", () => end("controller ended the stream"));
    stream.write(
      daemonMessage("hello", {
        protocol_version: this.options.protocolVersion ?? DAEMON_PROTOCOL_VERSION,
        daemon_version: this.options.daemonVersion,
        node_id: this.identity.nodeId,
        total_memory_mb: this.options.maxMemoryMb,
        used_memory_mb: this.usedMemoryMb(),
        hostname: this.options.hostname ?? osHostname(),
      }),
    );
  }

  private receive(
    stream: grpc.ClientDuplexStream<DaemonMessage, ControllerMessage>,
    message: ControllerMessage,
    address: string,
    end: (why: string) => void,
  ): void {
    switch (message.payload) {
      case "hello_ack": {
        if (this.connectTimer) clearTimeout(this.connectTimer);
        this.connectTimer = null;
        if (!message.hello_ack.protocol_compatible) {
          const error = new GatewayClientError(
            "PROTOCOL_INCOMPATIBLE",
            `Controller ${address} speaks protocol ${message.hello_ack.protocol_version}, incompatible with this daemon`,
          );
          this.options.logger.error(error.message);
          this.stop();
          this.options.onFatal?.(error);
          return;
        }
        this.attempt = 0;
        this.setState("connected", `${address} session ${message.hello_ack.session_id}`);
        this.options.onSessionOpen?.({ address, helloAck: message.hello_ack });
        this.sendStatus(stream);
        this.statusTimer = setInterval(() => this.sendStatus(stream), this.options.statusIntervalMs);
        this.watchSilence(message.hello_ack.heartbeat_interval_ms, end);
        return;
      }
      case "ping":
        stream.write(daemonMessage("pong", { sequence: message.ping.sequence, sent_at_ms: Date.now() }));
        return;
      case "pong":
      case "module_event":
        return;
      case "api_credential":
        this.options.onApiCredential?.(message.api_credential);
        return;
      case "prepare_instance":
      case "start_instance":
      case "stop_instance":
      case "force_stop_instance":
      case "stdin_instance":
      case "mark_instance_ready":
      case "list_instances":
      case "read_instance_log": {
        const type = message.payload;
        const body = (message as unknown as Record<string, { command_id: string }>)[type]!;
        const command = { type, body, commandId: body.command_id, traceparent: message.traceparent ?? "" } as unknown as InstanceCommand & {
          commandId: string;
        };
        const tracing = this.options.tracing;
        if (tracing?.enabled) {
          void tracing.inSpan(
            `handle ${type}`,
            { kind: SpanKind.SERVER, traceparent: command.traceparent, attributes: { "cloud.command": type } },
            async (span) => {
              const result = await this.dispatch(stream, command);
              if (!result.ok) {
                span.setAttribute("cloud.error_code", result.error_code);
                span.setStatus({ code: SpanStatusCode.ERROR, message: result.error_code });
              }
            },
          );
        } else void this.dispatch(stream, command);
        return;
      }
      default:
        // Additive protocol: a newer controller may send cases this daemon does not know.
        this.options.logger.warn(`Ignoring an unknown controller message (${String((message as { payload?: string }).payload)})`);
    }
  }

  private async dispatch(
    stream: grpc.ClientDuplexStream<DaemonMessage, ControllerMessage>,
    command: InstanceCommand & { commandId: string },
  ): Promise<Omit<CommandResult, "command_id">> {
    let result: Omit<CommandResult, "command_id">;
    if (!this.options.commandHandler) {
      result = { ok: false, error_code: "UNSUPPORTED", message: "This daemon has no instance runner" };
    } else {
      try {
        result = await this.options.commandHandler(command);
      } catch (err) {
        const code = (err as { code?: unknown }).code;
        result = { ok: false, error_code: typeof code === "string" ? code : "INTERNAL", message: (err as Error).message };
      }
    }
    if (this.stream === stream) stream.write(daemonMessage("command_result", { command_id: command.commandId, ...result }));
    return result;
  }

  private sendStatus(stream: grpc.ClientDuplexStream<DaemonMessage, ControllerMessage>): void {
    if (this.stream !== stream) return;
    stream.write(daemonMessage("node_status", { cpu_usage: this.cpuUsage(), used_memory_mb: this.usedMemoryMb(), total_memory_mb: this.options.maxMemoryMb }));
  }

  /**
   * A controller that pings every `heartbeatIntervalMs` and then falls silent for
   * {@link controllerSilenceHeartbeats} intervals (a half-open connection) is left for the next address.
   */
  private watchSilence(heartbeatIntervalMs: number, end: (why: string) => void): void {
    if (heartbeatIntervalMs <= 0) return;
    const silenceMs = heartbeatIntervalMs * controllerSilenceHeartbeats;
    this.silenceTimer = setInterval(() => {
      if (Date.now() - this.lastHeardAtMs > silenceMs) end(`controller silent for more than ${silenceMs} ms`);
    }, heartbeatIntervalMs);
  }

  private scheduleReconnect(why: string): void {
    const delayMs = backoffDelayMs(this.attempt, this.options.reconnectDelayMinMs, this.options.reconnectDelayMaxMs, this.random);
    this.attempt += 1;
    this.options.logger.warn(`Disconnected (${why}); reconnecting in ${delayMs} ms`);
    this.setState("backoff", why);
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = null;
      this.connect();
    }, delayMs);
  }

  private clearTimers(): void {
    for (const timer of [this.reconnectTimer, this.connectTimer]) if (timer) clearTimeout(timer);
    for (const timer of [this.statusTimer, this.silenceTimer]) if (timer) clearInterval(timer);
    this.reconnectTimer = this.connectTimer = this.statusTimer = this.silenceTimer = null;
  }

  private setState(state: ClientState, detail: string): void {
    this.stateValue = state;
    this.options.onStateChange?.(state, detail);
  }

  private usedMemoryMb(): number {
    return this.options.usedMemoryMb?.() ?? Math.round((totalmem() - freemem()) / (1024 * 1024));
  }

  /** Host CPU usage in [0, 1] since the previous call. */
  private cpuUsage(): number {
    const now = cpus().map((c) => c.times);
    let idle = 0;
    let total = 0;
    now.forEach((t, i) => {
      const before = this.lastCpu[i] ?? { user: 0, nice: 0, sys: 0, idle: 0, irq: 0 };
      const sum = t.user + t.nice + t.sys + t.idle + t.irq - (before.user + before.nice + before.sys + before.idle + before.irq);
      total += sum;
      idle += t.idle - before.idle;
    });
    this.lastCpu = now;
    return total > 0 ? Math.min(1, Math.max(0, 1 - idle / total)) : 0;
  }
}
