/**
 * Writes to the cluster state go through the Raft leader: proposed here when this controller
 * leads, otherwise handed to the leader over the {@link LeaderLink}, and retried while nothing was
 * applied, within a bound (503 RAFT_UNAVAILABLE beyond).
 */
import { sleep, systemClock, type Clock } from "../../shared/clock.js";
import { conflict } from "../../shared/errors.js";
import {
  encodeCommand,
  encodeMembershipContext,
  type AppliedCommand,
  type ClusterCommand,
  type MembershipContext,
  type UnstampedCommand,
} from "../state/cluster-commands.js";
import { raftUnavailable } from "../state/cluster-errors.js";
import { RaftHostError } from "../raft-host/host-errors.js";
import type { LeaderLink, MembershipRequest } from "../peers/membership-types.js";
import type { RaftMember, RaftTuning } from "./raft-member.js";

/** Raft progress is polled on the system clock the Raft host ticks on; the injected clock only stamps commands (tests hold it still). */
const pollRaft = (ms: number) => sleep(systemClock, ms, { unref: true });

/** What the writes need of the cluster service. */
export interface LeaderWritesDeps {
  /** The Raft member now (a recovery replaces it). */
  member(): RaftMember;
  /** The link towards the leader, once set; without one a controller that does not lead cannot write. */
  leaderLink(): LeaderLink | null;
  /** Why writes are refused for good now ("this controller is stopping", "… left the cluster"), or null. */
  closedReason(): string | null;
  /** True once the service is stopping: waiting for an index to apply ends early. */
  isStopped(): boolean;
  clock: Clock;
  tuning: Pick<RaftTuning, "commitTimeoutMs" | "tickIntervalMs">;
}

/**
 * The write paths of the cluster service. {@link commit} and {@link changeMembership} reach the
 * leader wherever it is; the `…OnLeader` variants serve writes another member relayed and refuse
 * with 409 NOT_LEADER when this controller does not lead. A proposal is stamped with the leader's
 * clock. Retries happen only while the outcome is known to be "nothing applied" (no leader yet, a
 * refused or dropped proposal); an unknown outcome is 503 RAFT_UNAVAILABLE at once.
 */
export class LeaderWrites {
  constructor(private readonly deps: LeaderWritesDeps) {}

  /** Applies `command` through the leader and waits (bounded) until this controller applied it. */
  async commit<T>(command: UnstampedCommand, timeoutMs = this.deps.tuning.commitTimeoutMs): Promise<AppliedCommand<T>> {
    const result = await this.onLeader(
      timeoutMs,
      () => this.proposeAsLeader(command),
      (leaderId, link) => link.propose(leaderId, command),
    );
    await this.waitApplied(result.index);
    return result as AppliedCommand<T>;
  }

  /** Proposes `command` on this controller, which must lead: the leader's clock stamps it. */
  async proposeAsLeader(command: UnstampedCommand): Promise<AppliedCommand> {
    const stamped = { ...command, atMs: this.deps.clock.nowMs() } as ClusterCommand;
    return (await this.deps.member().host.propose(encodeCommand(stamped))) as AppliedCommand;
  }

  /** Commits a membership change through the leader. */
  async changeMembership(request: MembershipRequest, timeoutMs = this.deps.tuning.commitTimeoutMs): Promise<void> {
    await this.onLeader(
      timeoutMs,
      () => this.changeMembershipAsLeader(request),
      (leaderId, link) => link.changeMembership(leaderId, request),
    );
  }

  /** Proposes a membership change on this controller, which must lead. */
  async changeMembershipAsLeader(request: MembershipRequest): Promise<void> {
    const context = { ...request.context, atMs: this.deps.clock.nowMs() } as MembershipContext;
    await this.deps.member().host.proposeConfChange({ changes: request.changes, context: encodeMembershipContext(context) });
  }

  /** Applies `command` on this controller, which must lead; 409 NOT_LEADER otherwise. */
  commitOnLeader(command: UnstampedCommand): Promise<AppliedCommand> {
    return this.onLeader(this.deps.tuning.commitTimeoutMs, () => this.proposeAsLeader(command), null);
  }

  /** Commits a membership change on this controller, which must lead; 409 NOT_LEADER otherwise. */
  async changeMembershipOnLeader(request: MembershipRequest): Promise<void> {
    await this.onLeader(this.deps.tuning.commitTimeoutMs, () => this.changeMembershipAsLeader(request), null);
  }

  /** Waits (bounded by the commit timeout) until this controller applied `index`, so a read after a write sees it. */
  async waitApplied(index: number): Promise<void> {
    const started = systemClock.nowMs();
    const host = this.deps.member().host;
    while (host.applied() < index && !this.deps.isStopped() && systemClock.nowMs() - started < this.deps.tuning.commitTimeoutMs) {
      await pollRaft(this.deps.tuning.tickIntervalMs / 4);
    }
  }

  /**
   * Runs `asLeader` when this controller leads, else `viaLink` towards the leader; retries while
   * nothing was applied (no leader yet, a refused or dropped proposal) until `timeoutMs` passed.
   */
  private async onLeader<T>(timeoutMs: number, asLeader: () => Promise<T>, viaLink: ((leaderId: string, link: LeaderLink) => Promise<T>) | null): Promise<T> {
    const started = systemClock.nowMs();
    let lastProblem = "no leader is known";
    for (;;) {
      const closed = this.deps.closedReason();
      if (closed !== null) throw raftUnavailable(closed);
      const host = this.deps.member().host;
      const leaderId = host.leaderId();
      const link = this.deps.leaderLink();
      if (host.isLeader()) {
        try {
          return await asLeader();
        } catch (err) {
          if (!(err instanceof RaftHostError)) throw err;
          if (!err.outcomeKnown) throw raftUnavailable(err.message);
          lastProblem = err.message;
        }
      } else if (viaLink === null) {
        throw conflict(`This controller does not lead; the leader is ${leaderId ?? "not known"}`, "NOT_LEADER");
      } else if (leaderId !== null && link) {
        try {
          return await viaLink(leaderId, link);
        } catch (err) {
          if (!(err instanceof RaftHostError)) throw err;
          if (!err.outcomeKnown) throw raftUnavailable(err.message);
          lastProblem = err.message;
        }
      } else if (leaderId !== null) {
        lastProblem = `the leader is ${leaderId}, which this controller cannot reach`;
      }
      if (systemClock.nowMs() - started >= timeoutMs) throw raftUnavailable(lastProblem);
      await pollRaft(this.deps.tuning.tickIntervalMs);
    }
  }
}
