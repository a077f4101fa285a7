/**
 * Joining with the node join token: the daemon's own key pair is created and stored in `dataDir`
 * before the first attempt (src/daemon/node-key.ts) and reused by every retry, so a join whose
 * answer was lost can be repeated with the same token. Transport errors rotate to the next
 * controller address after the back-off; a refused token ends the join.
 */
import { hostname as osHostname } from "node:os";
import type * as grpc from "@grpc/grpc-js";
import { status } from "@grpc/grpc-js";
import type { JoinResponse } from "../wire/daemon-proto.js";
import { backoffDelayMs, GatewayClientError, joinTimeoutMsDefault, type GatewayClientOptions } from "./gateway-client-types.js";
import { openJoinChannel } from "./gateway-channel.js";
import { certificateMatchesKey, type NodeIdentity } from "./node-identity.js";
import { loadOrCreateNodeKey } from "./node-key.js";

/** What the join loop needs from the client around it. */
export interface JoinContext {
  options: GatewayClientOptions;
  service: grpc.ServiceClientConstructor;
  random: () => number;
  /** The next controller address to try (shared with the stream's rotation). */
  nextAddress(): string;
  isStopped(): boolean;
  onAttempt(address: string): void;
}

/**
 * Joins with the node's own key (created and stored before the first attempt). An older
 * controller that ignores the public key answers a key pair of its own: that one is used.
 */
export async function joinWithToken(context: JoinContext, token: string): Promise<{ identity: NodeIdentity; keyGenerated: boolean }> {
  const { options } = context;
  const nodeKey = await loadOrCreateNodeKey(options.dataDir);
  for (let attempt = 0; ; attempt++) {
    if (context.isStopped()) throw new GatewayClientError("JOIN_REFUSED", "Stopped before joining");
    const address = context.nextAddress();
    context.onAttempt(address);
    const client = openJoinChannel(context.service, address);
    try {
      const response = await new Promise<JoinResponse>((resolve, reject) => {
        client.Join(
          {
            token,
            node_id: options.nodeId ?? "",
            hostname: options.hostname ?? osHostname(),
            daemon_version: options.daemonVersion,
            total_memory_mb: options.maxMemoryMb,
            csr_public_key_pem: nodeKey.publicKeyPem,
          },
          { deadline: Date.now() + (options.joinTimeoutMs ?? joinTimeoutMsDefault) },
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
      if (error.code === status.UNAUTHENTICATED || error.code === status.INVALID_ARGUMENT) {
        throw new GatewayClientError("JOIN_REFUSED", `Join refused by ${address}: ${error.details || error.message}`);
      }
      const delayMs = backoffDelayMs(attempt, options.reconnectDelayMinMs, options.reconnectDelayMaxMs, context.random);
      options.logger.warn(`Join via ${address} failed (${error.details || error.message}); retrying in ${delayMs} ms`);
      await new Promise((r) => setTimeout(r, delayMs));
    } finally {
      client.close();
    }
  }
}
