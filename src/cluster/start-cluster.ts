/**
 * Builds this controller's cluster service (the composition root calls {@link startClusterService}).
 *
 * - Join: a pending join token file (`<data.dir>/cluster-join.token`) and no membership yet: the
 *   controller joins through the token's join addresses (and `raft.joinAddrs`), receives its
 *   certificate and the cluster material, becomes a learner, waits until the leader promoted it to
 *   voter, then writes the cluster id into controller.yml and deletes the token file. Any failure
 *   leaves the file; a restart continues or retries the join.
 * - First start (no identity in `raft.dataDir`, no token file, the database not claimed by a
 *   cluster): a fresh single-member cluster with a new cluster id, a seed secret and the cluster
 *   CA — the CA already in the `cluster_ca` document when there is one (daemons that joined before
 *   keep their certificates), a new one otherwise.
 * - Restart: the identity and the Raft log in `raft.dataDir`.
 * - Refusals (a {@link ClusterStartupError}, the controller does not start): `cluster.id` differs
 *   from the cluster this controller belongs to (or joins), or is set while it belongs to none;
 *   the database belongs to another cluster; this controller left its cluster.
 */
import { randomUUID } from "node:crypto";
import { existsSync, readFileSync, rmSync } from "node:fs";
import { createServer, isIP } from "node:net";
import { hostname } from "node:os";
import { join, resolve } from "node:path";
import type { AuditRecorder } from "../audit/types.js";
import { resolveConfigPath } from "../config/load.js";
import type { ControllerConfig } from "../config/schema.js";
import type { LogService, Logger } from "../logs/types.js";
import { systemClock, sleep, type Clock } from "../shared/clock.js";
import type { DocumentStore } from "../store/ports.js";
import { createClusterCa, issueNodeCertificate } from "./identity/ca.js";
import { ClusterDocuments } from "./identity/cluster-documents.js";
import { ClusterStartupError } from "./state/cluster-errors.js";
import { ClusterIdentityStore, type MemberIdentity, type NodeTls, type PendingBootstrap } from "./identity/cluster-identity.js";
import { ClusterService } from "./cluster-service.js";
import { ClusterStateMachine } from "./state/cluster-state-machine.js";
import { writeClusterIdToConfig } from "./identity/controller-yml.js";
import { requestJoin } from "./membership/join-client.js";
import { newSeedSecret, readJoinTokenClaims } from "./identity/join-token.js";
import { GrpcLeaderLink, MemberClients } from "./peers/member-clients.js";
import { RaftMember, raftTuningDefaults, type RaftTuning } from "./membership/raft-member.js";

/** How long startup waits for the cluster meta and the CA document before going on without them. */
export const clusterStartupWaitMs = 15_000;
/** The pending join token file, in `data.dir`. */
export const JOIN_TOKEN_FILE_NAME = "cluster-join.token";
/** How long a joining controller waits to be promoted from learner to voter. */
export const joinPromotionWaitMs = 60_000;
/** Bound of one join call to one join address. */
export const joinCallTimeoutMs = 15_000;

export interface StartClusterServiceOptions {
  /** controller.yml `cluster`: the pinned cluster id, if any. */
  readonly cluster: ControllerConfig["cluster"];
  /** controller.yml `raft`: the advertised host, the transport port, the member's directory, join addresses. */
  readonly raft: ControllerConfig["raft"];
  /** controller.yml `data`: its directory holds the pending join token file. */
  readonly data: ControllerConfig["data"];
  /** The configured HTTP and gRPC ports, sent to the cluster in a join request (unknown yet when 0). */
  readonly http: Pick<ControllerConfig["http"], "port">;
  readonly grpc: ControllerConfig["grpc"];
  readonly documents: DocumentStore;
  readonly audit: AuditRecorder;
  readonly clock: Clock;
  readonly logs: LogService;
  /** Called once this controller is no longer a member; the composition root stops the controller. */
  readonly onLeft: () => void;
  /** Where CLOUD_CONFIG is read, to find controller.yml after a join when `configPath` is not given. */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** controller.yml, written after a join (the bin passes its `--config` or CLOUD_CONFIG); by default CLOUD_CONFIG of `env`, null for none. */
  readonly configPath?: string | null;
  readonly tuning?: Partial<RaftTuning>;
}

/** Path of the pending join token file in the data directory `data.dir`. */
export function joinTokenFilePath(data: ControllerConfig["data"]): string {
  return join(resolve(data.dir), JOIN_TOKEN_FILE_NAME);
}

interface MemberSetup {
  log: Logger;
  tuning: RaftTuning;
  identityStore: ClusterIdentityStore;
  documents: ClusterDocuments;
  nodeId: string;
  identity: MemberIdentity;
  tls: NodeTls;
  pending: PendingBootstrap | null;
  raftPort: number;
  initialRaftPeers: Record<string, string>;
  initialGrpcPeers: Record<string, string>;
}

/** See the module comment. */
export async function startClusterService(options: StartClusterServiceOptions): Promise<ClusterService> {
  const { raft, clock } = options;
  const log = options.logs.logger("cloud.cluster");
  const tuning: RaftTuning = { ...raftTuningDefaults, ...options.tuning };
  const identityStore = new ClusterIdentityStore(resolve(raft.dataDir));
  const documents = new ClusterDocuments(options.documents);
  const pinned = options.cluster.id;
  const nodeId = identityStore.ensureNodeId();
  const storeClusterId = await documents.clusterIdOfStore();
  const tokenPath = joinTokenFilePath(options.data);
  const token = existsSync(tokenPath) ? readFileSync(tokenPath, "utf8").trim() : null;
  let identity = identityStore.readIdentity();
  let pending = identityStore.readPendingBootstrap();
  let tls: NodeTls;
  let raftPort = raft.port;
  const initialRaftPeers: Record<string, string> = {};
  const initialGrpcPeers: Record<string, string> = {};

  if (identity?.state === "left") {
    throw new ClusterStartupError(
      `This controller left cluster ${identity.clusterId}. To start it again, delete ${identityStore.dir} and either join a cluster with a join token or start a new cluster.`,
    );
  }

  if (token !== null) {
    const claims = readJoinTokenClaims(token);
    if (!claims) throw new ClusterStartupError(`${tokenPath} does not hold a cluster join token`);
    if (identity && identity.clusterId !== claims.cid) {
      throw new ClusterStartupError(
        `This controller is a member of cluster ${identity.clusterId} but ${tokenPath} holds a join token of cluster ${claims.cid}; delete the token file, or delete ${identityStore.dir} to join the other cluster`,
      );
    }
    if (pinned !== undefined && pinned !== claims.cid) {
      throw new ClusterStartupError(`cluster.id is ${pinned} but the join token in ${tokenPath} is for cluster ${claims.cid}`);
    }
    if (storeClusterId !== null && storeClusterId !== claims.cid) {
      throw new ClusterStartupError(`The database belongs to cluster ${storeClusterId} but the join token in ${tokenPath} is for cluster ${claims.cid}`);
    }
    if (!identity) {
      if (identityStore.hasRaftLog()) {
        throw new ClusterStartupError(`${identityStore.logDir} holds a Raft log of an earlier membership; delete ${identityStore.dir} to join`);
      }
      if (raftPort === 0) raftPort = await freePort();
      const host = raft.host;
      const addresses = [...new Set([...claims.addrs, ...raft.joinAddrs])];
      log.info(`Joining cluster ${claims.cid} through ${addresses.join(", ")}`);
      const { response, address } = await requestJoin(
        addresses,
        {
          token,
          node_id: nodeId,
          label: hostname(),
          raft_addr: `${host}:${raftPort}`,
          rest_addr: options.http.port !== 0 ? `${host}:${options.http.port}` : "",
          grpc_addr: options.grpc.port !== 0 ? `${host}:${options.grpc.port}` : "",
          hosts: advertisedHosts(host),
        },
        claims,
        joinCallTimeoutMs,
        log,
      );
      log.info(`Join granted by ${address}: member ${nodeId} of cluster ${response.cluster_id}, learner first`);
      tls = { caPem: response.ca_certificate_pem, certPem: response.certificate_pem, keyPem: response.private_key_pem };
      identityStore.writeTls(tls);
      identity = { clusterId: response.cluster_id, nodeId, state: "joining" };
      identityStore.writeIdentity(identity);
      await claimStore(documents, response.cluster_id, clock.nowMs());
      await documents.syncGatewayCa({ certPem: response.ca_certificate_pem, keyPem: response.ca_private_key_pem }, clock.nowMs());
      for (const peer of response.members) {
        if (peer.raft_addr) initialRaftPeers[peer.node_id] = peer.raft_addr;
        if (peer.grpc_addr) initialGrpcPeers[peer.node_id] = peer.grpc_addr;
      }
    }
  }

  if (identity) {
    if (pinned !== undefined && pinned !== identity.clusterId) {
      throw new ClusterStartupError(
        `cluster.id is ${pinned} but this controller is a member of cluster ${identity.clusterId} (${identityStore.dir}); fix cluster.id in controller.yml`,
      );
    }
    if (storeClusterId !== null && storeClusterId !== identity.clusterId) {
      throw new ClusterStartupError(
        `The database belongs to cluster ${storeClusterId} but this controller is a member of cluster ${identity.clusterId}; point database.uri at that cluster's database`,
      );
    }
    if (storeClusterId === null) await claimStore(documents, identity.clusterId, clock.nowMs());
    const stored = identityStore.readTls();
    if (!stored) throw new ClusterStartupError(`The certificates of this member are missing from ${identityStore.dir}/tls`);
    tls = stored;
  } else {
    if (identityStore.hasRaftLog()) {
      throw new ClusterStartupError(
        `${identityStore.logDir} holds a Raft log but ${identityStore.dir} no identity.json; delete ${identityStore.dir} to start afresh`,
      );
    }
    if (!pending) {
      if (pinned !== undefined) {
        throw new ClusterStartupError(
          `cluster.id is ${pinned} but this controller holds no cluster state in ${identityStore.dir}; to join that cluster place a join token in ${tokenPath}, to create a new cluster remove cluster.id`,
        );
      }
      if (storeClusterId !== null) {
        throw new ClusterStartupError(
          `The database already belongs to cluster ${storeClusterId}; join it with a join token (${tokenPath}) instead of creating a new cluster`,
        );
      }
      const ca = (await documents.readGatewayCa()) ?? createClusterCa({ clock });
      pending = { clusterId: randomUUID(), ca, seedSecret: newSeedSecret() };
      identityStore.writePendingBootstrap(pending);
    }
    if (pinned !== undefined && pinned !== pending.clusterId) {
      throw new ClusterStartupError(`cluster.id is ${pinned} but this controller is creating cluster ${pending.clusterId}; remove cluster.id or fix it`);
    }
    await claimStore(documents, pending.clusterId, clock.nowMs());
    const issued = issueNodeCertificate(pending.ca, { nodeId, hosts: advertisedHosts(raft.host), clock });
    tls = { caPem: pending.ca.certPem, ...issued };
    identityStore.writeTls(tls);
    identity = { clusterId: pending.clusterId, nodeId, state: "member" } satisfies MemberIdentity;
    identityStore.writeIdentity(identity);
  }

  const service = await runMember(options, {
    log,
    tuning,
    identityStore,
    documents,
    nodeId,
    identity,
    tls,
    pending: identity.state === "member" ? pending : null,
    raftPort,
    initialRaftPeers,
    initialGrpcPeers,
  });
  if (token !== null || identity.state === "joining") {
    await completeJoin(options, service, identityStore, identity, token !== null ? tokenPath : null, log);
  }
  return service;
}

async function runMember(options: StartClusterServiceOptions, setup: MemberSetup): Promise<ClusterService> {
  const { raft, clock } = options;
  const { log, identity, nodeId } = setup;
  const machine = new ClusterStateMachine();
  const startMember = (port: number, bootstrap: boolean) =>
    RaftMember.start({
      nodeId,
      clusterId: identity.clusterId,
      logDir: setup.identityStore.logDir,
      tls: setup.tls,
      port,
      machine,
      bootstrapVoters: bootstrap ? [nodeId] : undefined,
      initialPeers: setup.initialRaftPeers,
      tuning: setup.tuning,
      logger: log,
    });
  const member = await startMember(setup.raftPort, setup.pending !== null);
  const clients = new MemberClients(setup.tls);
  const service = new ClusterService({
    nodeId,
    identity,
    identityStore: setup.identityStore,
    machine,
    member,
    restartMember: (port) => startMember(port, false),
    clients,
    documents: setup.documents,
    audit: options.audit,
    clock,
    logger: log,
    tuning: setup.tuning,
    advertisedHost: raft.host,
    label: hostname(),
    pendingBootstrap: setup.pending,
    onLeft: options.onLeft,
  });
  service.setLeaderLink(new GrpcLeaderLink(clients, (id) => service.grpcAddressOf(id) ?? setup.initialGrpcPeers[id] ?? null, setup.tuning.commitTimeoutMs));
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

/**
 * The end of a join: wait until this controller is a voter, record it, write the cluster id into
 * controller.yml and delete the token file. A failure keeps the file for the next start.
 */
async function completeJoin(
  options: StartClusterServiceOptions,
  service: ClusterService,
  identityStore: ClusterIdentityStore,
  identity: MemberIdentity,
  tokenPath: string | null,
  log: Logger,
): Promise<void> {
  // Promotion is Raft progress: polled on the system clock the Raft host ticks on.
  const started = systemClock.nowMs();
  while (!service.configuration().voters.includes(identity.nodeId)) {
    if (systemClock.nowMs() - started > joinPromotionWaitMs) {
      await service.stop();
      throw new ClusterStartupError(
        `Joined cluster ${identity.clusterId} as a learner but was not promoted to voter within ${joinPromotionWaitMs / 1000} s; a restart continues the join`,
      );
    }
    await sleep(systemClock, 50);
  }
  if (identity.state !== "member") {
    identityStore.writeIdentity({ ...identity, state: "member" });
    log.info(`This controller is a voting member of cluster ${identity.clusterId}`);
  }
  if (tokenPath === null) return;
  const configPath = options.configPath !== undefined ? options.configPath : configPathOf(options.env ?? {});
  if (configPath) {
    try {
      writeClusterIdToConfig(configPath, identity.clusterId);
      log.info(`cluster.id ${identity.clusterId} written to ${configPath}`);
    } catch (err) {
      log.error(`Could not write cluster.id into ${configPath}; ${tokenPath} stays and the next start tries again`, err);
      return;
    }
  } else {
    log.warn(`No configuration file: set cluster.id ${identity.clusterId} in controller.yml by hand`);
  }
  rmSync(tokenPath, { force: true });
}

function configPathOf(env: Readonly<Record<string, string | undefined>>): string | null {
  return resolveConfigPath([], env) ?? null;
}

async function claimStore(documents: ClusterDocuments, clusterId: string, nowMs: number): Promise<void> {
  const owner = await documents.claimStore(clusterId, nowMs);
  if (owner !== clusterId) throw new ClusterStartupError(`The database already belongs to cluster ${owner}, not ${clusterId}`);
}

/** A port the kernel just handed out (free unless another process takes it first). */
function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolvePort(port));
    });
  });
}

/** Names to put in a member certificate besides its id: the advertised host unless it is a wildcard. */
export function advertisedHosts(host: string): string[] {
  if (host === "0.0.0.0" || host === "::" || host === "") return [];
  return isIP(host) !== 0 || /^[A-Za-z0-9.-]+$/.test(host) ? [host] : [];
}
