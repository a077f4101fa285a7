/**
 * The joining controller's side of a join. For each join address in turn: fetch the cluster CA
 * over an unverified connection and check it against the fingerprint the join token carries (a
 * wrong or intercepted controller is never sent the token), then send the token over a connection
 * verified with that CA. A refused token ends the attempt; an unreachable or unsuitable address
 * moves on to the next one.
 */
import * as grpc from "@grpc/grpc-js";
import type { Logger } from "../../logs/types.js";
import { ClusterStartupError } from "../state/cluster-errors.js";
import {
  callUnary,
  clusterGrpcMessageBytesMax,
  controllerServerName,
  fromGrpcError,
  loadClusterMembership,
  type ClusterMembershipClient,
  type JoinClusterRequest,
  type JoinClusterResponse,
} from "../peers/cluster-proto.js";
import { caFingerprint } from "../state/cluster-views.js";
import type { JoinTokenClaims } from "../identity/join-token.js";

/** A join refused by the cluster (the token): trying other addresses would not help. */
export class JoinRefusedError extends ClusterStartupError {}

function newClient(address: string, credentials: grpc.ChannelCredentials): ClusterMembershipClient {
  const Client = loadClusterMembership();
  return new Client(address, credentials, {
    "grpc.ssl_target_name_override": controllerServerName,
    "grpc.max_receive_message_length": clusterGrpcMessageBytesMax,
  }) as unknown as ClusterMembershipClient;
}

/** Joins through the first address that takes the join; see the module comment. */
export async function requestJoin(
  addresses: readonly string[],
  request: JoinClusterRequest,
  claims: JoinTokenClaims,
  callTimeoutMs: number,
  logger: Logger,
): Promise<{ response: JoinClusterResponse; address: string }> {
  const problems: string[] = [];
  for (const address of addresses) {
    const unverified = newClient(address, grpc.credentials.createSsl(null, null, null, { rejectUnauthorized: false, checkServerIdentity: () => undefined }));
    let caPem: string;
    try {
      caPem = (await callUnary(unverified.GetClusterCa.bind(unverified), {}, callTimeoutMs)).ca_certificate_pem;
    } catch (err) {
      problems.push(`${address}: ${(err as grpc.ServiceError).details || String(err)}`);
      continue;
    } finally {
      unverified.close();
    }
    if (caFingerprint(caPem) !== claims.caf) {
      problems.push(`${address}: its cluster CA is not the one the join token names`);
      continue;
    }
    const verified = newClient(
      address,
      grpc.credentials.createSsl(Buffer.from(caPem), null, null, {
        checkServerIdentity: (_host, certificate) => (certificate.subject?.CN === controllerServerName ? undefined : new Error("not a controller certificate")),
      }),
    );
    try {
      const response = await callUnary(verified.Join.bind(verified), request, callTimeoutMs);
      if (response.cluster_id !== claims.cid || response.ca_certificate_pem !== caPem) {
        problems.push(`${address}: answered for another cluster`);
        continue;
      }
      return { response, address };
    } catch (err) {
      const expected = fromGrpcError(err as grpc.ServiceError);
      if (expected?.status === 401) throw new JoinRefusedError(`The cluster refused the join token (${expected.code}): ${expected.message}`);
      problems.push(`${address}: ${expected?.message ?? ((err as grpc.ServiceError).details || String(err))}`);
      logger.warn(`Joining through ${address} failed: ${problems[problems.length - 1]}`);
    } finally {
      verified.close();
    }
  }
  throw new ClusterStartupError(`Could not join cluster ${claims.cid} through any join address: ${problems.join("; ")}`);
}
