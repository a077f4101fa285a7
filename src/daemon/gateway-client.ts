/**
 * The daemon side of the daemon stream. Joins once with the node join token and its own key pair
 * (src/daemon/gateway-join.ts; the identity is kept in `dataDir` afterwards, src/daemon/node-identity.ts),
 * then holds one mutual-TLS stream to a controller: hello first, answers pings, reports node status
 * periodically, dispatches instance commands to an injected handler (src/daemon/controller-commands.ts).
 * Every controller address is kept; a broken stream is re-opened on the next address after an
 * exponential back-off with jitter, bounded by `reconnectDelayMaxMs`. A hello_ack with
 * protocol_compatible false ends the client (no reconnect). Reports go out through
 * {@link GatewayClient.send}; {@link GatewayClientOptions.onSessionOpen} runs right after each
 * hello_ack, before anything else is sent on the new stream. Shapes and tuning live in
 * src/daemon/gateway-client-types.ts, re-exported here.
 */
import { hostname as osHostname } from "node:os";
import type * as grpc from "@grpc/grpc-js";
import { DAEMON_PROTOCOL_VERSION, daemonMessage, loadNodeGateway, type ControllerMessage, type DaemonMessage } from "../wire/daemon-proto.js";
import { handleInstanceCommand } from "./controller-commands.js";
import { openStreamChannel, type GatewayStream, type NodeGatewayClient } from "./gateway-channel.js";
import {
  backgroundBufferedMessagesMax,
  backoffDelayMs,
  connectTimeoutMsDefault,
  controllerSilenceHeartbeats,
  droppableBufferedMessagesMax,
  GatewayClientError,
  type ClientState,
  type GatewayClientOptions,
  type SendOptions,
} from "./gateway-client-types.js";
import { joinWithToken } from "./gateway-join.js";
import { HostCpuSampler, hostUsedMemoryMb } from "./host-usage.js";
import { readIdentity, writeIdentity, type NodeIdentity } from "./node-identity.js";

export {
  backgroundBufferedMessagesMax,
  backoffDelayMs,
  controllerSilenceHeartbeats,
  droppableBufferedMessagesMax,
  GatewayClientError,
  type ClientLogger,
  type ClientState,
  type CommandHandler,
  type GatewayClientErrorCode,
  type GatewayClientOptions,
  type SendOptions,
  type SessionInfo,
} from "./gateway-client-types.js";
export { IDENTITY_FILES, readIdentity, type NodeIdentity } from "./node-identity.js";

/** The daemon's connection to the controllers. */
export class GatewayClient {
  private readonly service = loadNodeGateway();
  private readonly random: () => number;
  private identity: NodeIdentity | null = null;
  private client: NodeGatewayClient | null = null;
  private stream: GatewayStream | null = null;
  private addressIndex = 0;
  private attempt = 0;
  private stopped = false;
  /** Set by {@link announceShutdown}: every later status report says so. */
  private shuttingDown = false;
  private reconnectTimer: NodeJS.Timeout | null = null;
  private statusTimer: NodeJS.Timeout | null = null;
  private silenceTimer: NodeJS.Timeout | null = null;
  private lastHeardAtMs = 0;
  private connectTimer: NodeJS.Timeout | null = null;
  private stateValue: ClientState = "connecting";
  private readonly cpu = new HostCpuSampler();

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
      const joined = await joinWithToken(
        {
          options: this.options,
          service: this.service,
          random: this.random,
          nextAddress: () => this.nextAddress(),
          isStopped: () => this.stopped,
          onAttempt: (address) => this.setState("joining", address),
        },
        this.options.token,
      );
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

  /**
   * Tells the controller at once that a graceful shutdown begins, so it places nothing new here
   * while the instances stop (their ends would otherwise be replaced on this very node).
   */
  announceShutdown(): void {
    this.shuttingDown = true;
    if (this.stream) this.sendStatus(this.stream);
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

  private nextAddress(): string {
    const address = this.options.controllers[this.addressIndex % this.options.controllers.length]!;
    this.addressIndex += 1;
    return address;
  }

  private connect(): void {
    if (this.stopped || !this.identity) return;
    const address = this.nextAddress();
    this.setState("connecting", address);
    this.client?.close();
    const client = openStreamChannel(this.service, address, this.identity);
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

  private receive(stream: GatewayStream, message: ControllerMessage, address: string, end: (why: string) => void): void {
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
        handleInstanceCommand(message, message.payload, this.options.commandHandler, this.options.tracing, (commandId, result) => {
          if (this.stream === stream) stream.write(daemonMessage("command_result", { command_id: commandId, ...result }));
        });
        return;
      }
      default:
        // Additive protocol: a newer controller may send cases this daemon does not know.
        this.options.logger.warn(`Ignoring an unknown controller message (${String((message as { payload?: string }).payload)})`);
    }
  }

  private sendStatus(stream: GatewayStream): void {
    if (this.stream !== stream) return;
    stream.write(
      daemonMessage("node_status", {
        cpu_usage: this.cpu.sample(),
        used_memory_mb: this.usedMemoryMb(),
        total_memory_mb: this.options.maxMemoryMb,
        shutting_down: this.shuttingDown,
      }),
    );
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
    return this.options.usedMemoryMb?.() ?? hostUsedMemoryMb();
  }
}
