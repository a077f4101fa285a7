/**
 * The gRPC channels the daemon opens to a controller's NodeGateway: one for Join (before the node
 * has a CA, so the controller is not verified) and one per Connect stream (mutual TLS with the
 * node's identity, the controller checked by its certificate name).
 */
import type { PeerCertificate } from "node:tls";
import * as grpc from "@grpc/grpc-js";
import { daemonGrpcMessageBytesMax, type ControllerMessage, type DaemonMessage, type JoinRequest, type JoinResponse } from "../wire/daemon-proto.js";
import { CONTROLLER_CERTIFICATE_NAME } from "../wire/certificate-names.js";
import type { NodeIdentity } from "./node-identity.js";

/** A NodeGateway client as @grpc/proto-loader builds it. */
export type NodeGatewayClient = grpc.Client & {
  Join(request: JoinRequest, options: grpc.CallOptions, callback: (error: grpc.ServiceError | null, response?: JoinResponse) => void): grpc.ClientUnaryCall;
  Connect(options?: grpc.CallOptions): grpc.ClientDuplexStream<DaemonMessage, ControllerMessage>;
};

/** One Connect stream. */
export type GatewayStream = grpc.ClientDuplexStream<DaemonMessage, ControllerMessage>;

type NodeGatewayConstructor = new (address: string, credentials: grpc.ChannelCredentials, options: object) => NodeGatewayClient;

/** Accepts a controller certificate by its name, whatever address it was reached on. */
function checkControllerIdentity(_host: string, certificate: PeerCertificate): Error | undefined {
  return certificate.subject?.CN === CONTROLLER_CERTIFICATE_NAME ? undefined : new Error(`Not a controller certificate: ${String(certificate.subject?.CN)}`);
}

/** A client for one Join call at `address`. */
export function openJoinChannel(service: grpc.ServiceClientConstructor, address: string): NodeGatewayClient {
  // No CA is known before joining: the controller's certificate is not verified here (the
  // token authenticates the daemon; see docs/decisions/daemon-stream.md).
  const credentials = grpc.credentials.createSsl(null, null, null, { rejectUnauthorized: false, checkServerIdentity: () => undefined });
  return new (service as unknown as NodeGatewayConstructor)(address, credentials, { "grpc.ssl_target_name_override": CONTROLLER_CERTIFICATE_NAME });
}

/** A mutual-TLS client for the Connect stream at `address`, authenticated with the node's identity. */
export function openStreamChannel(service: grpc.ServiceClientConstructor, address: string, identity: NodeIdentity): NodeGatewayClient {
  const { caPem, keyPem, certificatePem } = identity;
  const credentials = grpc.credentials.createSsl(Buffer.from(caPem), Buffer.from(keyPem), Buffer.from(certificatePem), {
    checkServerIdentity: checkControllerIdentity,
  });
  return new (service as unknown as NodeGatewayConstructor)(address, credentials, {
    "grpc.max_receive_message_length": daemonGrpcMessageBytesMax,
    "grpc.max_send_message_length": daemonGrpcMessageBytesMax,
    // The controller certificate is checked by name, whatever address reached it.
    "grpc.ssl_target_name_override": CONTROLLER_CERTIFICATE_NAME,
  });
}
