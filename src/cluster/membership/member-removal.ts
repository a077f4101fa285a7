/**
 * Members leaving the cluster: another member ejected, this controller leaving on its own, and
 * recovery after the quorum is lost (this controller stays as the only member).
 */
import { ConfChangeType } from "../../../raft/types.js";
import type { Logger } from "../../logs/types.js";
import { sleep, systemClock, type Clock } from "../../shared/clock.js";
import { conflict, notFound } from "../../shared/errors.js";
import { raftUnavailable } from "../state/cluster-errors.js";
import type { Ejection, LeaveResponse } from "../state/cluster-schemas.js";
import type { ClusterStateMachine } from "../state/cluster-state-machine.js";
import type { MemberClients } from "../peers/member-clients.js";
import type { MembershipRequest } from "../peers/membership-types.js";
import type { RaftMember } from "./raft-member.js";
import { probeMembers, rewriteLogAsSoleMember } from "./recovery.js";

/** Raft progress is polled on the system clock the Raft host ticks on; the injected clock only stamps commands (tests hold it still). */
const pollRaft = (ms: number) => sleep(systemClock, ms, { unref: true });

/** What a recovery answers. */
export interface RecoveryResult {
  clusterId: string;
  nodeId: string;
  ejected: string[];
  memberCount: number;
}

/** What removals need of the cluster service. */
export interface MemberRemovalDeps {
  nodeId: string;
  clusterId(): string;
  state: Pick<ClusterStateMachine, "member" | "members" | "snapshotAsSoleMember">;
  /** The Raft member now (a recovery replaces it). */
  member(): RaftMember;
  /** Starts the Raft member again on `port` from its rewritten log; {@link member} answers it from then on. */
  restartMember(port: number): Promise<void>;
  /** True when `nodeId` is a voter, a learner or has a member record. */
  isMemberId(nodeId: string): boolean;
  /** Commits a membership change through the leader. */
  changeMembership(request: MembershipRequest): Promise<void>;
  /** Records that this controller is no longer a member (and shuts it down afterwards). */
  markLeft(): void;
  clients: MemberClients;
  /** Where this controller's Raft log is (a recovery rewrites it). */
  logDir: string;
  clock: Clock;
  commitTimeoutMs: number;
  log: Logger;
}

/**
 * Eject, leave and recover, with their refusals as the spec's errors (MEMBER_NOT_FOUND,
 * CANNOT_EJECT_SELF, LAST_MEMBER, RECOVERY_INCOMPLETE, MEMBERS_REACHABLE, RECOVERY_RUNNING). One
 * recovery at a time; {@link recovering} is true while one runs. Callers check that the cluster
 * meta is stamped first.
 */
export class MemberRemoval {
  private recoveryRunning = false;

  constructor(private readonly deps: MemberRemovalDeps) {}

  /** True while a recovery runs (the Raft member may be stopped and restarted meanwhile). */
  get recovering(): boolean {
    return this.recoveryRunning;
  }

  /** Removes another member from the Raft group (it is meant to be gone for good). */
  async eject(nodeId: string, reason: string, by: string): Promise<Ejection> {
    if (!this.deps.state.member(nodeId)) throw notFound(`Member not found: ${nodeId}`, "MEMBER_NOT_FOUND");
    if (nodeId === this.deps.nodeId) throw conflict("A controller cannot eject itself; use POST /api/v1/cluster/leave", "CANNOT_EJECT_SELF");
    await this.deps.changeMembership({ changes: [{ type: ConfChangeType.RemoveNode, nodeId }], context: { kind: "eject", reason, by } });
    this.deps.log.info(`Member ${nodeId} ejected by ${by}${reason ? `: ${reason}` : ""}`);
    return { nodeId, clusterId: this.deps.clusterId(), reason };
  }

  /**
   * Leaves the cluster: a leader first hands leadership to the most caught-up other voter; the
   * removal is then committed and this controller marked as left.
   */
  async leave(by: string): Promise<LeaveResponse> {
    const nodeId = this.deps.nodeId;
    const member = this.deps.member();
    const otherVoters = member.confState().voters.filter((id) => id !== nodeId);
    if (otherVoters.length === 0) {
      throw conflict("This controller is the only voting member; a cluster cannot lose its last member", "LAST_MEMBER");
    }
    const host = member.host;
    if (host.isLeader()) {
      const transferee = mostCaughtUpVoter(otherVoters, host.status().progress ?? {});
      this.deps.log.info(`Leaving the cluster: handing leadership to ${transferee}`);
      if (!(await host.transferLeadership(transferee))) throw raftUnavailable(`leadership could not be handed to ${transferee}`);
    }
    await this.deps.changeMembership({ changes: [{ type: ConfChangeType.RemoveNode, nodeId }], context: { kind: "leave", reason: "", by } });
    this.deps.markLeft();
    return { nodeId, clusterId: this.deps.clusterId() };
  }

  /**
   * Recovery after the quorum is lost: this controller becomes the only member, the named members
   * are removed. Every other member must be named, and none of them may answer (on its gRPC or its
   * Raft port). The log is rewritten as a snapshot of the applied state with this controller as
   * the only voter; entries not applied here are dropped.
   */
  async recover(eject: readonly string[], reason: string, by: string, probeTimeoutMs: number): Promise<RecoveryResult> {
    const { state, nodeId } = this.deps;
    const named = [...new Set(eject)];
    for (const id of named) {
      if (id === nodeId) throw conflict("A controller cannot eject itself", "CANNOT_EJECT_SELF");
      if (!this.deps.isMemberId(id)) throw notFound(`Member not found: ${id}`, "MEMBER_NOT_FOUND");
    }
    const others = state
      .members()
      .map((m) => m.nodeId)
      .filter((id) => id !== nodeId);
    const unnamed = others.filter((id) => !named.includes(id));
    if (unnamed.length > 0) {
      throw conflict(
        `Recovery leaves this controller as the only member: name every other member too (${unnamed.join(", ")}); survivors rejoin with join tokens`,
        "RECOVERY_INCOMPLETE",
      );
    }
    if (this.recoveryRunning) throw conflict("A recovery is already running", "RECOVERY_RUNNING");
    this.recoveryRunning = true;
    try {
      const reachable = await probeMembers(
        named.map((id) => state.member(id) ?? { nodeId: id, raftAddr: "", grpcAddr: "" }),
        this.deps.clients,
        probeTimeoutMs,
      );
      if (reachable.length > 0) {
        throw conflict(
          `These members still answer; eject them with DELETE /api/v1/cluster/members/{nodeId} instead: ${reachable.join(", ")}`,
          "MEMBERS_REACHABLE",
        );
      }
      const member = this.deps.member();
      const host = member.host;
      const waitStarted = systemClock.nowMs();
      while (host.applied() < host.status().hardState.commit && systemClock.nowMs() - waitStarted < this.deps.commitTimeoutMs) await pollRaft(10);
      const applied = host.applied();
      const data = state.snapshotAsSoleMember(nodeId, named, { reason, by, atMs: this.deps.clock.nowMs() });
      const port = member.port;
      this.deps.log.warn(`Recovering cluster ${this.deps.clusterId()} as its only member; ejecting ${named.join(", ")}${reason ? `: ${reason}` : ""}`);
      await member.stop();
      await rewriteLogAsSoleMember(this.deps.logDir, nodeId, applied, data);
      await this.deps.restartMember(port);
      this.deps.member().host.campaign();
      return { clusterId: this.deps.clusterId(), nodeId, ejected: named, memberCount: state.members().length };
    } finally {
      this.recoveryRunning = false;
    }
  }
}

/** The voter whose log matches the leader's furthest (the first named on a tie). Pure. */
export function mostCaughtUpVoter(voters: readonly string[], progress: Readonly<Record<string, { match: number } | undefined>>): string {
  return [...voters].sort((a, b) => (progress[b]?.match ?? 0) - (progress[a]?.match ?? 0))[0]!;
}
