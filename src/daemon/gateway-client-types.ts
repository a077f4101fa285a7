/**
 * The shapes of the daemon's gateway client (src/daemon/gateway-client.ts) and its tuning: options,
 * states, the error it does not retry, send options with their buffer limits, and the back-off.
 */
import type { ApiCredential, CommandResult, HelloAck, InstanceCommand } from "../wire/daemon-proto.js";
import type { Tracing } from "../shared/tracing.js";

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

export const connectTimeoutMsDefault = 15_000;
export const joinTimeoutMsDefault = 15_000;
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
