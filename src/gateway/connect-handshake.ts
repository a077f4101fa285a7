/**
 * The opening of a daemon's `Connect` stream, up to the session: the node id from the client
 * certificate, the hello (first message, in time, a supported protocol) and the certificate's
 * revocation. A revocation while the stream is open ends it, before or after the session opens.
 */
import type { PeerCertificate } from "node:tls";
import * as grpc from "@grpc/grpc-js";
import type { Logger } from "../logs/types.js";
import type { MetricsService } from "../metrics/metrics.js";
import { DAEMON_PROTOCOL_VERSION, payloadCase, unsupportedProtocolMessage, type DaemonMessage, type Hello } from "../wire/daemon-proto.js";
import type { DaemonSession } from "./daemon-session.js";
import type { ConnectCall, GatewayNodes } from "./gateway-types.js";
import { systemClock, type Clock } from "../shared/clock.js";

/** Why a revoked node's stream is refused or ended (UNAUTHENTICATED). */
export function certificateRevokedMessage(nodeId: string): string {
  return `The certificate of node ${nodeId} has been revoked`;
}

/**
 * The node id a client certificate names: its subject's common name (the first one when the
 * subject repeats it), or null without a verified certificate or a common name.
 */
export function nodeIdOfPeerCertificate(certificate: Partial<PeerCertificate> | null | undefined): string | null {
  const commonName: unknown = certificate?.subject?.CN;
  if (typeof commonName === "string") return commonName;
  if (Array.isArray(commonName)) return String(commonName[0]);
  return null;
}

/** What the handshake needs of the gateway. */
export interface ConnectHandshakeDeps {
  /** Times the hello deadline; the system clock by default. */
  clock?: Clock;
  nodes: GatewayNodes;
  metrics: MetricsService;
  logger: Logger;
  helloTimeoutMs: number;
  /** True once the gateway is stopping: new streams are refused with UNAVAILABLE. */
  isStopping(): boolean;
  /** Registers the node's session; `onEnded` must run once the session has closed. */
  openSession(nodeId: string, call: ConnectCall, hello: Hello, onEnded: () => void): DaemonSession;
}

/**
 * Takes a new `Connect` call through its handshake and opens the node's session, or ends the call
 * with the status that says why not: UNAUTHENTICATED (no certificate, or a revoked one),
 * DEADLINE_EXCEEDED (no hello within `helloTimeoutMs`), FAILED_PRECONDITION (a first message that
 * is not hello, an older protocol), UNAVAILABLE (stopping, or the revocation cannot be read) or
 * CANCELLED (the stream ended first). Messages after the hello wait until the session listens.
 */
export function acceptConnect(call: ConnectCall, deps: ConnectHandshakeDeps): void {
  const nodeId = nodeIdOfPeerCertificate(call.getAuthContext()?.sslPeerCertificate);
  if (!nodeId) {
    // The refusal below is emitted as an error; without a listener it would throw in this process.
    call.on("error", () => undefined);
    call.emit("error", { code: grpc.status.UNAUTHENTICATED, details: "A client certificate issued by the cluster CA is required" });
    return;
  }
  if (deps.isStopping()) {
    call.emit("error", { code: grpc.status.UNAVAILABLE, details: "Controller is stopping" });
    return;
  }
  // Watching starts before the revocation is read, so a revocation in between is not missed.
  let session: DaemonSession | null = null;
  const stopWatching = deps.nodes.onCertificateRevoked(nodeId, () => {
    if (session) session.close(certificateRevokedMessage(nodeId), { status: grpc.status.UNAUTHENTICATED, markUnreachable: true });
    else refuse(grpc.status.UNAUTHENTICATED, certificateRevokedMessage(nodeId));
  });
  const helloTimer = (deps.clock ?? systemClock).setTimeout(() => refuse(grpc.status.DEADLINE_EXCEEDED, "No hello received in time"), deps.helloTimeoutMs);
  let settled = false;
  const refuse = (code: grpc.status, details: string) => {
    if (settled) return;
    settled = true;
    helloTimer.cancel();
    stopWatching();
    call.emit("error", { code, details });
  };
  const onError = () => refuse(grpc.status.CANCELLED, "stream error");
  const onEnd = () => refuse(grpc.status.CANCELLED, "stream ended before hello");
  call.on("error", onError);
  call.on("end", onEnd);
  call.once("data", (message: DaemonMessage) => {
    if (settled) return;
    deps.metrics.grpcDaemonMessagesIn.inc({ payload_case: payloadCase(message) });
    if (message.payload !== "hello") return refuse(grpc.status.FAILED_PRECONDITION, "The first message must be hello");
    const hello = message.hello;
    if (hello.protocol_version < DAEMON_PROTOCOL_VERSION) {
      deps.logger.warn(`Refused node ${nodeId}: ${unsupportedProtocolMessage(hello.protocol_version)}`);
      return refuse(grpc.status.FAILED_PRECONDITION, unsupportedProtocolMessage(hello.protocol_version));
    }
    // Messages after hello wait in the stream until the session listens.
    call.pause();
    deps.nodes.isCertificateRevoked(nodeId).then(
      (revoked) => {
        if (settled) return;
        if (revoked) {
          deps.logger.warn(`Refused node ${nodeId}: its certificate is revoked`);
          return refuse(grpc.status.UNAUTHENTICATED, certificateRevokedMessage(nodeId));
        }
        if (deps.isStopping()) return refuse(grpc.status.UNAVAILABLE, "Controller is stopping");
        if (call.cancelled) return refuse(grpc.status.CANCELLED, "stream cancelled before hello_ack");
        settled = true;
        helloTimer.cancel();
        // Only this handler's listeners: grpc-js keeps its own "error" listener, which sends the status.
        call.off("error", onError);
        call.off("end", onEnd);
        session = deps.openSession(nodeId, call, hello, stopWatching);
        call.resume();
      },
      (err: unknown) => {
        deps.logger.error(`Cannot read the certificate revocation of node ${nodeId}`, err);
        refuse(grpc.status.UNAVAILABLE, "Cannot check the node certificate; try again");
      },
    );
  });
}
