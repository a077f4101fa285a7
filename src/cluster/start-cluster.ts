/**
 * Builds this controller's cluster service (the composition root calls {@link startClusterService}).
 *
 * - First start (no identity in `raft.dataDir`, no join token file, the database not claimed by a
 *   cluster): a fresh single-member cluster with a new cluster id, a seed secret and the cluster
 *   CA — the CA already in the `cluster_ca` document when there is one (daemons that joined before
 *   keep their certificates), a new one otherwise.
 * - Restart: the identity and the Raft log in `raft.dataDir`.
 * - Refusals (a {@link ClusterStartupError}, the controller does not start): `cluster.id` differs
 *   from the cluster this controller belongs to, or is set while this controller belongs to none;
 *   the database belongs to another cluster; this controller left its cluster.
 */
import { randomUUID } from "node:crypto";
import { isIP } from "node:net";
import { resolve } from "node:path";
import type { AuditRecorder } from "../audit/types.js";
import type { ControllerConfig } from "../config/schema.js";
import type { LogService } from "../logs/types.js";
import type { Clock } from "../shared/clock.js";
import type { DocumentStore } from "../store/ports.js";
import { createClusterCa, issueNodeCertificate } from "./ca.js";
import { ClusterDocuments } from "./cluster-documents.js";
import { ClusterStartupError } from "./cluster-errors.js";
import { ClusterIdentityStore, type MemberIdentity, type NodeTls, type PendingBootstrap } from "./cluster-identity.js";
import { ClusterService } from "./cluster-service.js";
import { ClusterStateMachine } from "./cluster-state-machine.js";
import { newSeedSecret } from "./join-token.js";
import { RaftMember, raftTuningDefaults, type RaftTuning } from "./raft-member.js";

/** How long startup waits for the cluster meta and the CA document before going on without them. */
export const clusterStartupWaitMs = 15_000;

export interface StartClusterServiceOptions {
  readonly config: ControllerConfig;
  readonly documents: DocumentStore;
  readonly audit: AuditRecorder;
  readonly clock: Clock;
  readonly logs: LogService;
  /** Called once this controller is no longer a member; the composition root stops the controller. */
  readonly onLeft: () => void;
  readonly tuning?: Partial<RaftTuning>;
}

/** See the module comment. */
export async function startClusterService(options: StartClusterServiceOptions): Promise<ClusterService> {
  const { config, clock } = options;
  const log = options.logs.logger("cloud.cluster");
  const tuning: RaftTuning = { ...raftTuningDefaults, ...options.tuning };
  const identityStore = new ClusterIdentityStore(resolve(config.raft.dataDir));
  const documents = new ClusterDocuments(options.documents);
  const pinned = config.cluster.id;
  const nodeId = identityStore.ensureNodeId();
  const storeClusterId = await documents.clusterIdOfStore();
  let identity = identityStore.readIdentity();
  let pending = identityStore.readPendingBootstrap();
  let tls: NodeTls;

  if (identity?.state === "left") {
    throw new ClusterStartupError(
      `This controller left cluster ${identity.clusterId}. To start it again, delete ${identityStore.dir} and either join a cluster with a join token or start a new cluster.`,
    );
  }
  if (identity) {
    if (pinned !== undefined && pinned !== identity.clusterId) {
      throw new ClusterStartupError(`cluster.id is ${pinned} but this controller is a member of cluster ${identity.clusterId} (${identityStore.dir}); fix cluster.id in controller.yml`);
    }
    if (storeClusterId !== null && storeClusterId !== identity.clusterId) {
      throw new ClusterStartupError(`The database belongs to cluster ${storeClusterId} but this controller is a member of cluster ${identity.clusterId}; point database.uri at that cluster's database`);
    }
    if (storeClusterId === null) await claimStore(documents, identity.clusterId, clock.nowMs());
    const stored = identityStore.readTls();
    if (!stored) throw new ClusterStartupError(`The certificates of this member are missing from ${identityStore.dir}/tls`);
    tls = stored;
  } else {
    if (identityStore.hasRaftLog()) {
      throw new ClusterStartupError(`${identityStore.logDir} holds a Raft log but ${identityStore.dir} no identity.json; delete ${identityStore.dir} to start afresh`);
    }
    if (!pending) {
      if (pinned !== undefined) {
        throw new ClusterStartupError(
          `cluster.id is ${pinned} but this controller holds no cluster state in ${identityStore.dir}; to join that cluster place a join token file, to create a new cluster remove cluster.id`,
        );
      }
      if (storeClusterId !== null) {
        throw new ClusterStartupError(`The database already belongs to cluster ${storeClusterId}; join it with a join token instead of creating a new cluster`);
      }
      const ca = (await documents.readGatewayCa()) ?? createClusterCa({ clock });
      pending = { clusterId: randomUUID(), ca, seedSecret: newSeedSecret() };
      identityStore.writePendingBootstrap(pending);
    }
    if (pinned !== undefined && pinned !== pending.clusterId) {
      throw new ClusterStartupError(`cluster.id is ${pinned} but this controller is creating cluster ${pending.clusterId}; remove cluster.id or fix it`);
    }
    await claimStore(documents, pending.clusterId, clock.nowMs());
    const issued = issueNodeCertificate(pending.ca, { nodeId, hosts: advertisedHosts(config.raft.host), clock });
    tls = { caPem: pending.ca.certPem, ...issued };
    identityStore.writeTls(tls);
    identity = { clusterId: pending.clusterId, nodeId, state: "member" } satisfies MemberIdentity;
    identityStore.writeIdentity(identity);
  }

  return runMember(options, { log, tuning, identityStore, documents, nodeId, identity, tls, pending });
}

interface MemberSetup {
  log: ReturnType<LogService["logger"]>;
  tuning: RaftTuning;
  identityStore: ClusterIdentityStore;
  documents: ClusterDocuments;
  nodeId: string;
  identity: MemberIdentity;
  tls: NodeTls;
  pending: PendingBootstrap | null;
}

async function runMember(options: StartClusterServiceOptions, setup: MemberSetup): Promise<ClusterService> {
  const { config, clock } = options;
  const { log, identity, nodeId } = setup;
  const machine = new ClusterStateMachine();
  const member = await RaftMember.start({
    nodeId,
    clusterId: identity.clusterId,
    logDir: setup.identityStore.logDir,
    tls: setup.tls,
    port: config.raft.port,
    machine,
    bootstrapVoters: setup.pending ? [nodeId] : undefined,
    tuning: setup.tuning,
    logger: log,
  });
  const service = new ClusterService({
    nodeId,
    identity,
    identityStore: setup.identityStore,
    machine,
    member,
    documents: setup.documents,
    audit: options.audit,
    clock,
    logger: log,
    tuning: setup.tuning,
    advertisedHost: config.raft.host,
    label: "",
    pendingBootstrap: setup.pending,
    onLeft: options.onLeft,
  });
  try {
    const ready = await service.start(clusterStartupWaitMs);
    const meta = machine.meta();
    if (meta && meta.clusterId !== identity.clusterId) {
      throw new ClusterStartupError(`The Raft log in ${setup.identityStore.dir} belongs to cluster ${meta.clusterId}, not ${identity.clusterId}`);
    }
    if (!ready) log.warn("The cluster meta is not known yet; cluster routes answer 409 CLUSTER_NOT_READY until it is");
    log.info(`Cluster member ${nodeId} of cluster ${identity.clusterId}: Raft on port ${member.port}, leader ${service.leaderId() ?? "unknown"}`);
    return service;
  } catch (err) {
    await service.stop();
    throw err;
  }
}

async function claimStore(documents: ClusterDocuments, clusterId: string, nowMs: number): Promise<void> {
  const owner = await documents.claimStore(clusterId, nowMs);
  if (owner !== clusterId) throw new ClusterStartupError(`The database already belongs to cluster ${owner}, not ${clusterId}`);
}

/** Names to put in a member certificate besides its id: the advertised host unless it is a wildcard. */
export function advertisedHosts(host: string): string[] {
  if (host === "0.0.0.0" || host === "::" || host === "") return [];
  return isIP(host) !== 0 || /^[A-Za-z0-9.-]+$/.test(host) ? [host] : [];
}
