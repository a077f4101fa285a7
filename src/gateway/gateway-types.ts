/**
 * The shapes the daemon gateway's parts share: what it needs of the node service, its tunable
 * bounds with their defaults, the services served beside NodeGateway, the daemon reports it hands
 * on and the session view it lists. Kept apart so the gateway, its sessions and its handshake
 * import these instead of each other.
 */
import type * as grpc from "@grpc/grpc-js";
import type { NodeRecord } from "../domain/nodes/node-schemas.js";
import type { NodeUpsert } from "../domain/nodes/node-service.js";
import type { ControllerMessage, DaemonMessage } from "../wire/daemon-proto.js";

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
/** How long `DaemonGateway.sendCommand` waits for the daemon's result. */
export const commandTimeoutMsDefault = 30_000;
/** Commands awaiting a result per session; beyond this, sends fail with QUEUE_FULL. */
export const pendingCommandsMaxDefault = 4_096;

/** What the gateway needs from the node service. */
export interface GatewayNodes {
  upsert(id: string, update: NodeUpsert): Promise<NodeRecord>;
  /** A session opened: the hello's figures, the next session epoch, UNREACHABLE/OFFLINE → ONLINE (or DRAINING). */
  openSession(id: string, update: NodeUpsert): Promise<{ record: NodeRecord; sessionEpoch: number }>;
  /** The session `sessionEpoch` ended: true when it was the newest (then, with `markUnreachable`, the node is UNREACHABLE). */
  endSession(id: string, sessionEpoch: number, markUnreachable: boolean): Promise<boolean>;
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

/**
 * The gateway's bounds: the defaults above, each replaced by the configured value where one is
 * given. Pure; the gateway reads its bounds only through the result.
 */
export function resolveGatewayTuning(configured: Partial<GatewayTuning> = {}): GatewayTuning {
  return {
    heartbeatIntervalMs: heartbeatIntervalMsDefault,
    staleAfterMissedPongs: staleAfterMissedPongsDefault,
    disconnectAfterMissedPongs: disconnectAfterMissedPongsDefault,
    helloTimeoutMs: helloTimeoutMsDefault,
    outboundQueueMessagesMax: outboundQueueMessagesMaxDefault,
    commandTimeoutMs: commandTimeoutMsDefault,
    pendingCommandsMax: pendingCommandsMaxDefault,
    ...configured,
  };
}

/** A gRPC service served by the gateway's server beside NodeGateway. */
export interface GatewayService {
  definition: grpc.ServiceDefinition;
  implementation: grpc.UntypedServiceImplementation;
}

/** Declared in wire/: the rooms below the gateway that route reports import it from there. */
export type { DaemonReport } from "../wire/daemon-proto.js";

/** A live session, as `DaemonGateway.listSessions` lists it. */
export interface SessionInfo {
  nodeId: string;
  sessionId: string;
  connectedAt: string;
  daemonVersion: string;
  stale: boolean;
  missedPongs: number;
  /** The node's session epoch of this session (null until its opening was recorded). */
  sessionEpoch?: number | null;
}

/** A daemon's `Connect` call as the server sees it. */
export type ConnectCall = grpc.ServerDuplexStream<DaemonMessage, ControllerMessage>;
