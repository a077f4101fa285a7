/**
 * One controller's Raft member: the LevelDB log under `raft.dataDir`, the gRPC transport with
 * mutual TLS (always bound on 0.0.0.0) and the node host driving the cluster state machine.
 * Membership changes are applied to the state machine as they commit, and the transport's peers
 * follow the member records (a record's `raftAddr` is where that member is dialled).
 */
import { RawNode, decodeConfChange, decodeMessage, encodeConfChange, encodeMessage } from "../../../raft/index.js";
import type { ConfState, NodeId } from "../../../raft/types.js";
import type { Logger } from "../../logs/types.js";
import type { ClusterStateMachine } from "../state/cluster-state-machine.js";
import type { NodeTls } from "../identity/cluster-identity.js";
import { GrpcTransport } from "../raft-host/grpc-transport.js";
import { LevelStorage } from "../raft-host/level-storage.js";
import { RaftNodeHost } from "../raft-host/raft-node-host.js";
import { nextTurn } from "../../shared/clock.js";

/** Timing of the Raft member; every field has a default. */
export interface RaftTuning {
  tickIntervalMs: number;
  electionTicks: number;
  heartbeatTicks: number;
  /** A proposal or read without an outcome after this long fails (503 RAFT_UNAVAILABLE). */
  commitTimeoutMs: number;
  snapshotIntervalEntries: number;
  compactionMarginEntries: number;
}

export const raftTuningDefaults: RaftTuning = {
  tickIntervalMs: 100,
  electionTicks: 10,
  heartbeatTicks: 1,
  commitTimeoutMs: 5_000,
  snapshotIntervalEntries: 1_000,
  compactionMarginEntries: 200,
};

export interface RaftMemberOptions {
  readonly nodeId: NodeId;
  readonly clusterId: string;
  readonly logDir: string;
  readonly tls: NodeTls;
  /** Port of the Raft transport; 0 picks a free one. */
  readonly port: number;
  readonly machine: ClusterStateMachine;
  /** The voters of a brand-new cluster (written into an empty log); absent when joining or restarting. */
  readonly bootstrapVoters?: readonly NodeId[];
  /** Peers to dial before the state names them (a joining member's first contacts). */
  readonly initialPeers?: Readonly<Record<NodeId, string>>;
  readonly tuning: RaftTuning;
  readonly logger: Logger;
}

/** A started Raft member; see the module comment. */
export class RaftMember {
  private readonly unsubscribe: () => void;
  private knownPeers: Set<NodeId>;
  private stopped = false;

  private constructor(
    readonly host: RaftNodeHost,
    private readonly transport: GrpcTransport,
    private readonly storage: LevelStorage,
    private readonly options: RaftMemberOptions,
    /** The port the transport is bound to. */
    readonly port: number,
  ) {
    this.knownPeers = new Set(Object.keys(options.initialPeers ?? {}));
    this.unsubscribe = options.machine.onChange(() => this.syncPeers());
  }

  /** Opens the log, binds the transport and starts the node. */
  static async start(options: RaftMemberOptions): Promise<RaftMember> {
    const storage = await LevelStorage.open(options.logDir);
    let transport: GrpcTransport | null = null;
    try {
      if (options.bootstrapVoters) {
        await storage.bootstrap({ voters: [...options.bootstrapVoters], learners: [], votersOutgoing: [], learnersNext: [], autoLeave: false });
      }
      transport = new GrpcTransport({
        clusterId: options.clusterId,
        nodeId: options.nodeId,
        listenAddress: `0.0.0.0:${options.port}`,
        peers: { ...options.initialPeers },
        tls: options.tls,
        codec: { encode: encodeMessage, decode: decodeMessage },
      });
      const { tuning, machine, logger } = options;
      const host = new RaftNodeHost({
        id: options.nodeId,
        storage,
        stateMachine: machine,
        transport,
        createRawNode: (config) => new RawNode(config),
        confChangeCodec: { encode: encodeConfChange, decode: decodeConfChange },
        tickIntervalMs: tuning.tickIntervalMs,
        electionTicks: tuning.electionTicks,
        heartbeatTicks: tuning.heartbeatTicks,
        proposalTimeoutMs: tuning.commitTimeoutMs,
        readTimeoutMs: tuning.commitTimeoutMs,
        snapshotIntervalEntries: tuning.snapshotIntervalEntries,
        compactionMarginEntries: tuning.compactionMarginEntries,
        onConfChange: (change, confState) => machine.applyMembership(change, confState),
        onFatal: (error) => {
          logger.error("The Raft member failed and stops the controller", error);
          nextTurn(() => {
            throw error;
          });
        },
      });
      const port = await transport.start();
      const member = new RaftMember(host, transport, storage, options, port);
      member.syncPeers();
      host.start();
      return member;
    } catch (err) {
      await transport?.stop();
      await storage.close();
      throw err;
    }
  }

  /** The configuration applied on this member. */
  confState(): ConfState {
    return this.host.status().config;
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.unsubscribe();
    await this.host.stop();
    await this.transport.stop();
    await this.storage.close();
  }

  /** The underlying storage, for recovery (which rewrites the log while the node is stopped). */
  get logStorage(): LevelStorage {
    return this.storage;
  }

  private syncPeers(): void {
    if (this.stopped) return;
    const { machine, nodeId, initialPeers } = this.options;
    const wanted = new Map<NodeId, string>(machine.meta() ? [] : Object.entries(initialPeers ?? {}));
    for (const member of machine.members()) if (member.raftAddr !== "") wanted.set(member.nodeId, member.raftAddr);
    wanted.delete(nodeId);
    for (const [peer, address] of wanted) this.transport.setPeer(peer, address);
    for (const peer of this.knownPeers) if (!wanted.has(peer)) this.transport.removePeer(peer);
    this.knownPeers = new Set(wanted.keys());
  }
}
