/**
 * The cluster service's background upkeep, run every second and on demand: stamp the cluster this
 * controller is creating, put the Raft-held CA into the gateway's CA document, keep this member's
 * record's addresses current, and (on the leader) promote learners that caught up.
 */
import { ConfChangeType } from "../../../raft/types.js";
import type { Logger } from "../../logs/types.js";
import type { Clock } from "../../shared/clock.js";
import type { AppliedCommand, UnstampedCommand } from "../state/cluster-commands.js";
import type { ClusterDocuments } from "../identity/cluster-documents.js";
import type { ClusterIdentityStore, PendingBootstrap } from "../identity/cluster-identity.js";
import type { ClusterStateMachine } from "../state/cluster-state-machine.js";
import type { AdvertisedAddresses, MembershipRequest } from "../peers/membership-types.js";
import type { RaftMember } from "./raft-member.js";

/** What the upkeep needs of the cluster service. */
export interface ClusterUpkeepDeps {
  nodeId: string;
  label: string;
  state: Pick<ClusterStateMachine, "meta" | "material" | "member">;
  /** The Raft member now (a recovery replaces it). */
  member(): RaftMember;
  identityStore: Pick<ClusterIdentityStore, "deletePendingBootstrap">;
  documents: Pick<ClusterDocuments, "syncGatewayCa">;
  clock: Clock;
  log: Logger;
  /** The addresses this controller advertises, as they are now (filled in when it announces them). */
  addresses: Readonly<AdvertisedAddresses>;
  /** The cluster being created by this controller, until its stamp is in the log. */
  pendingBootstrap: PendingBootstrap | null;
  /** True while upkeep must not run (stopping, left, recovering). */
  paused(): boolean;
  proposeAsLeader(command: UnstampedCommand): Promise<AppliedCommand>;
  commit(command: UnstampedCommand): Promise<AppliedCommand>;
  changeMembershipAsLeader(request: MembershipRequest): Promise<void>;
}

/**
 * One upkeep pass at a time ({@link run} returns at once while one runs or while paused); a pass
 * that fails is logged at debug and the next one tries again. {@link gatewayCaSynced} turns true
 * once the gateway's CA document holds the cluster CA.
 */
export class ClusterUpkeep {
  private pendingBootstrap: PendingBootstrap | null;
  private passRunning = false;
  private caSynced = false;

  constructor(private readonly deps: ClusterUpkeepDeps) {
    this.pendingBootstrap = deps.pendingBootstrap;
  }

  /** True while a pass runs. */
  get running(): boolean {
    return this.passRunning;
  }

  get gatewayCaSynced(): boolean {
    return this.caSynced;
  }

  async run(): Promise<void> {
    if (this.passRunning || this.deps.paused()) return;
    this.passRunning = true;
    try {
      await this.stampPendingBootstrap();
      await this.syncGatewayCa();
      await this.updateOwnRecord();
      await this.promoteCaughtUpLearners();
    } catch (err) {
      this.deps.log.debug("Cluster upkeep did not finish; it runs again shortly", err);
    } finally {
      this.passRunning = false;
    }
  }

  private isReady(): boolean {
    return this.deps.state.meta() !== null;
  }

  private async stampPendingBootstrap(): Promise<void> {
    const pending = this.pendingBootstrap;
    if (!pending) return;
    if (!this.isReady()) {
      if (!this.deps.member().host.isLeader()) return;
      const result = await this.deps.proposeAsLeader({
        op: "cluster.stamp",
        clusterId: pending.clusterId,
        ca: pending.ca,
        seedSecret: pending.seedSecret,
        member: { nodeId: this.deps.nodeId, label: this.deps.label, ...this.deps.addresses },
      });
      if (!result.ok) throw new Error(`the cluster stamp was refused: ${result.message}`);
      this.deps.log.info(`Cluster ${pending.clusterId} created with this controller (${this.deps.nodeId}) as its first member`);
    }
    this.pendingBootstrap = null;
    // Synchronous on purpose: one small file, once in a cluster's life, right after its first election.
    this.deps.identityStore.deletePendingBootstrap();
  }

  private async syncGatewayCa(): Promise<void> {
    if (this.caSynced) return;
    const material = this.deps.state.material();
    if (!material) return;
    const outcome = await this.deps.documents.syncGatewayCa({ certPem: material.caCertPem, keyPem: material.caKeyPem }, this.deps.clock.nowMs());
    if (outcome === "replaced") this.deps.log.warn("The cluster_ca document held another CA; it now holds the Raft-held cluster CA");
    this.caSynced = true;
  }

  private async updateOwnRecord(): Promise<void> {
    if (!this.isReady()) return;
    const record = this.deps.state.member(this.deps.nodeId);
    if (!record) return;
    const update = addressUpdate(this.deps.addresses, record);
    if (update === null) return;
    const result = await this.deps.commit({ op: "member.update", nodeId: this.deps.nodeId, ...update });
    if (!result.ok) throw new Error(result.message);
  }

  /** On the leader: a learner whose log has caught up with the commit index becomes a voter. */
  private async promoteCaughtUpLearners(): Promise<void> {
    const host = this.deps.member().host;
    if (!host.isLeader()) return;
    const status = host.status();
    for (const learner of status.config.learners) {
      const progress = status.progress?.[learner];
      if (!progress || progress.match < status.hardState.commit) continue;
      await this.deps.changeMembershipAsLeader({ changes: [{ type: ConfChangeType.AddVoter, nodeId: learner }], context: { kind: "promote" } });
      this.deps.log.info(`Member ${learner} caught up and became a voter`);
      return; // one membership change at a time
    }
  }
}

/**
 * The addresses of a member record that differ from the advertised ones, or null when none does;
 * an address not known yet (empty) is never written. Pure.
 */
export function addressUpdate(advertised: Readonly<AdvertisedAddresses>, record: Readonly<AdvertisedAddresses>): Partial<AdvertisedAddresses> | null {
  const update: Partial<AdvertisedAddresses> = {};
  for (const key of ["raftAddr", "restAddr", "grpcAddr"] as const) {
    if (advertised[key] !== "" && advertised[key] !== record[key]) update[key] = advertised[key];
  }
  return Object.keys(update).length === 0 ? null : update;
}
