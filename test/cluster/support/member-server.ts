/**
 * A controller's gRPC server as the daemon gateway serves it, with only the cluster membership
 * service on it (what the forwarding tests call between members): the gateway's TLS over the
 * cluster CA, client certificates requested, not required.
 */
import * as grpc from "@grpc/grpc-js";
import type { AuditService } from "../../../src/audit/audit-service.js";
import { issueNodeCertificate } from "../../../src/cluster/identity/ca.js";
import { clusterMembershipService } from "../../../src/cluster/peers/cluster-grpc-service.js";
import { controllerServerName } from "../../../src/cluster/peers/cluster-proto.js";
import type { ClusterService } from "../../../src/cluster/cluster-service.js";
import { gatewayServerCredentials } from "../../../src/gateway/gateway-tls.js";
import type { Logger } from "../../../src/logs/types.js";
import { systemClock } from "../../../src/shared/clock.js";

/** Serves `cluster`'s membership service on 127.0.0.1:`port`; stop it with `forceShutdown`. */
export async function serveClusterService(cluster: ClusterService, audit: AuditService, port: number, logger: Logger): Promise<grpc.Server> {
  const material = cluster.material()!;
  const server = new grpc.Server();
  const service = clusterMembershipService({ cluster, audit, clock: systemClock, logger });
  server.addService(service.definition, service.implementation);
  const identity = issueNodeCertificate({ certPem: material.caCertPem, keyPem: material.caKeyPem }, { nodeId: controllerServerName });
  await new Promise<number>((resolve, reject) =>
    server.bindAsync(`127.0.0.1:${port}`, gatewayServerCredentials(material.caCertPem, identity), (error, bound) => (error ? reject(error) : resolve(bound))),
  );
  return server;
}
