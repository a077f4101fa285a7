/**
 * The leader's (and candidate's) view of the cluster: the active configuration, a
 * {@link Progress} per member, and the votes of the current election.
 */
import { type JointConfig, jointCommittedIndex, jointVoteResult, jointVoterIds } from "../quorum/joint.js";
import { VoteResult } from "../quorum/vote-result.js";
import type { ConfState, NodeId } from "../types.js";
import { sortedIds } from "../util.js";
import type { Progress } from "./progress.js";

/** A membership configuration as plain, immutable values. */
export interface TrackerConfig {
  readonly voters: JointConfig;
  /** Learners that are not voters in either half. */
  readonly learners: ReadonlySet<NodeId>;
  /** Outgoing voters that become learners when the joint configuration is left. */
  readonly learnersNext: ReadonlySet<NodeId>;
  readonly autoLeave: boolean;
}

/** A configuration without members. */
export const EMPTY_TRACKER_CONFIG: TrackerConfig = {
  voters: { incoming: new Set(), outgoing: new Set() },
  learners: new Set(),
  learnersNext: new Set(),
  autoLeave: false,
};

/** Progress per member. */
export type ProgressMap = ReadonlyMap<NodeId, Progress>;

/** True while a joint configuration (two halves) is in effect. */
export function isJoint(config: TrackerConfig): boolean {
  return config.voters.outgoing.size > 0;
}

/** The configuration as the plain, sorted {@link ConfState} stored in snapshots. */
export function configToConfState(config: TrackerConfig): ConfState {
  return {
    voters: sortedIds(config.voters.incoming),
    learners: sortedIds(config.learners),
    votersOutgoing: sortedIds(config.voters.outgoing),
    learnersNext: sortedIds(config.learnersNext),
    autoLeave: config.autoLeave,
  };
}

/** The configuration, per-member progress and election votes, with the quorum questions over them. */
export class ProgressTracker {
  config: TrackerConfig = EMPTY_TRACKER_CONFIG;
  progress: ProgressMap = new Map();
  private votes = new Map<NodeId, boolean>();

  constructor(readonly inflightMsgsMax: number) {}

  confState(): ConfState {
    return configToConfState(this.config);
  }

  isSingleton(): boolean {
    return this.config.voters.incoming.size === 1 && this.config.voters.outgoing.size === 0;
  }

  /** The largest index a quorum of voters has acknowledged (learners never count). */
  committed(): number {
    return jointCommittedIndex(this.config.voters, (id) => this.progress.get(id)?.match);
  }

  /** Every member (voters, then learners) in a deterministic order. */
  ids(): NodeId[] {
    return sortedIds(this.progress.keys());
  }

  voterIds(): NodeId[] {
    return sortedIds(jointVoterIds(this.config.voters));
  }

  isVoter(id: NodeId): boolean {
    return this.config.voters.incoming.has(id) || this.config.voters.outgoing.has(id);
  }

  /** Whether a quorum of voters was heard from recently (check-quorum). */
  quorumActive(selfId: NodeId): boolean {
    return (
      jointVoteResult(this.config.voters, (id) => {
        const pr = this.progress.get(id);
        if (pr === undefined) return undefined;
        return id === selfId || pr.recentActive;
      }) === VoteResult.Won
    );
  }

  resetVotes(): void {
    this.votes = new Map();
  }

  /** Records the first vote of `id` in this election; later ones are ignored. */
  recordVote(id: NodeId, granted: boolean): void {
    if (!this.votes.has(id)) this.votes.set(id, granted);
  }

  tallyVotes(): { granted: number; rejected: number; result: VoteResult } {
    let granted = 0;
    let rejected = 0;
    for (const id of jointVoterIds(this.config.voters)) {
      const v = this.votes.get(id);
      if (v === true) granted++;
      else if (v === false) rejected++;
    }
    return { granted, rejected, result: jointVoteResult(this.config.voters, (id) => this.votes.get(id)) };
  }

  /** Whether a set of acknowledgements (e.g. for a read) forms a quorum. */
  hasQuorum(acks: ReadonlySet<NodeId>): boolean {
    return jointVoteResult(this.config.voters, (id) => (acks.has(id) ? true : undefined)) === VoteResult.Won;
  }
}
