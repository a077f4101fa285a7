/**
 * Builds the daemon gateway from the controller's services: loads (or creates) the cluster CA,
 * issues this controller's server certificate and wires joining to the node token service.
 */
import { hashToken, NODE_TOKENS_COLLECTION, type NodeTokenService } from "../domain/node-tokens/node-token-service.js";
import type { EventBus } from "../events/types.js";
import type { Logger } from "../logs/types.js";
import type { MetricsService } from "../metrics/metrics.js";
import type { Clock } from "../shared/clock.js";
import type { Doc, DocumentStore } from "../store/ports.js";
import { issueControllerCertificate, loadOrCreateClusterCa } from "./cluster-ca-store.js";
import { DaemonGateway, type DaemonGatewayOptions, type GatewayNodes, type GatewayTuning } from "./daemon-gateway.js";
import { JoinService } from "./join-service.js";

export interface CreateDaemonGatewayOptions {
  host: string;
  port: number;
  documents: DocumentStore;
  nodes: GatewayNodes;
  nodeTokens: Pick<NodeTokenService, "consume">;
  events: EventBus;
  metrics: MetricsService;
  clock: Clock;
  logger: Logger;
  tuning?: Partial<GatewayTuning>;
  issueApiCredential?: DaemonGatewayOptions["issueApiCredential"];
  httpPort?: DaemonGatewayOptions["httpPort"];
  services?: DaemonGatewayOptions["services"];
  onLogRecord?: DaemonGatewayOptions["onLogRecord"];
}

/** A gateway ready to {@link DaemonGateway.start}. */
export async function createDaemonGateway(options: CreateDaemonGatewayOptions): Promise<DaemonGateway> {
  const ca = await loadOrCreateClusterCa(options.documents, options.clock);
  const serverCertificate = issueControllerCertificate(ca, [], options.clock);
  const tokenRecords = options.documents.collection<Doc & { hash: string; nodeId: string | null }>(NODE_TOKENS_COLLECTION);
  const join = new JoinService({
    tokens: options.nodeTokens,
    ca,
    clock: options.clock,
    // Read-only look-up of the node id a token is bound to, so a daemon need not repeat it.
    boundNodeIdOf: async (token) => (await tokenRecords.find({ hash: hashToken(token) }, { limit: 1 }))[0]?.nodeId ?? null,
  });
  return new DaemonGateway({
    host: options.host,
    port: options.port,
    ca,
    serverCertificate,
    join,
    nodes: options.nodes,
    events: options.events,
    metrics: options.metrics,
    clock: options.clock,
    logger: options.logger,
    tuning: options.tuning,
    issueApiCredential: options.issueApiCredential,
    httpPort: options.httpPort,
    services: options.services,
    onLogRecord: options.onLogRecord,
  });
}
