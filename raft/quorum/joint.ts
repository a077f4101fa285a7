/**
 * A joint configuration: the incoming and outgoing majorities of a membership change (§4.3 of
 * the Raft thesis). Outside a change the outgoing half is empty and has no say.
 */
import type { NodeId } from "../types.js";
import { type MajorityConfig, majorityCommittedIndex, majorityVoteResult } from "./majority.js";
import { VoteResult } from "./vote-result.js";

/** The two halves of a (possibly) joint configuration; outside a change `outgoing` is empty. */
export interface JointConfig {
  readonly incoming: MajorityConfig;
  readonly outgoing: MajorityConfig;
}

/** Every voter of either half, once. */
export function jointVoterIds(config: JointConfig): Set<NodeId> {
  return new Set([...config.incoming, ...config.outgoing]);
}

/** The largest index acknowledged by a majority of both halves. */
export function jointCommittedIndex(config: JointConfig, acked: (id: NodeId) => number | undefined): number {
  return Math.min(majorityCommittedIndex(config.incoming, acked), majorityCommittedIndex(config.outgoing, acked));
}

/** Won only when both halves win; lost as soon as either half loses. */
export function jointVoteResult(config: JointConfig, votes: (id: NodeId) => boolean | undefined): VoteResult {
  const incoming = majorityVoteResult(config.incoming, votes);
  const outgoing = majorityVoteResult(config.outgoing, votes);
  if (incoming === outgoing) return incoming;
  if (incoming === VoteResult.Lost || outgoing === VoteResult.Lost) return VoteResult.Lost;
  return VoteResult.Pending;
}
