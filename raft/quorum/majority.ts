/**
 * A simple majority configuration: a set of voters, pure functions over it.
 */
import type { NodeId } from "../types.js";
import { VoteResult } from "./vote-result.js";

/** The voters of one majority configuration. */
export type MajorityConfig = ReadonlySet<NodeId>;

/** Treated as "no constraint" by an empty configuration, so a joint config reduces to its other half. */
export const UNBOUNDED_INDEX = Number.MAX_SAFE_INTEGER;

/**
 * The largest index acknowledged by a majority of `voters`, given each voter's acknowledged index
 * (undefined counts as 0). An empty configuration commits everything.
 */
export function majorityCommittedIndex(voters: MajorityConfig, acked: (id: NodeId) => number | undefined): number {
  if (voters.size === 0) return UNBOUNDED_INDEX;
  const indexes: number[] = [];
  for (const id of voters) indexes.push(acked(id) ?? 0);
  indexes.sort((a, b) => b - a);
  return indexes[Math.floor(voters.size / 2)];
}

/**
 * Whether `votes` (true = granted, false = rejected, undefined = no answer) win, lose, or are
 * still pending in `voters`. An empty configuration wins, so a joint config reduces correctly.
 */
export function majorityVoteResult(voters: MajorityConfig, votes: (id: NodeId) => boolean | undefined): VoteResult {
  if (voters.size === 0) return VoteResult.Won;
  let granted = 0;
  let missing = 0;
  for (const id of voters) {
    const v = votes(id);
    if (v === undefined) missing++;
    else if (v) granted++;
  }
  const quorum = Math.floor(voters.size / 2) + 1;
  if (granted >= quorum) return VoteResult.Won;
  if (granted + missing >= quorum) return VoteResult.Pending;
  return VoteResult.Lost;
}
