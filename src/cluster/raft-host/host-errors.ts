/**
 * Expected failures of the Raft node host, with stable codes. `outcomeKnown` tells a client
 * whether it may treat the request as not having happened (true), or whether it may still be
 * applied later (false: retrying a non-idempotent write could apply it twice).
 */
import type { NodeId } from "../../../raft/types.js";

export const HostErrorCode = {
  /** This node is not the leader; `leaderId` names the leader when known. Nothing was proposed. */
  NotLeader: "NOT_LEADER",
  /** The proposal never reached the log, or its log slot was taken by another entry. Not applied. */
  ProposalDropped: "PROPOSAL_DROPPED",
  /** This node stopped being leader after it proposed: the entry may or may not be applied. */
  LeadershipLost: "LEADERSHIP_LOST",
  /** No outcome within the deadline: the entry may or may not be applied. */
  Timeout: "TIMEOUT",
  /** The host was stopped with the request outstanding. */
  Stopped: "STOPPED",
} as const;
export type HostErrorCode = (typeof HostErrorCode)[keyof typeof HostErrorCode];

const outcomeKnownByCode: Record<HostErrorCode, boolean> = {
  NOT_LEADER: true,
  PROPOSAL_DROPPED: true,
  LEADERSHIP_LOST: false,
  TIMEOUT: false,
  STOPPED: false,
};

export class RaftHostError extends Error {
  readonly outcomeKnown: boolean;
  constructor(
    readonly code: HostErrorCode,
    message: string,
    readonly leaderId: NodeId | null = null,
  ) {
    super(message);
    this.name = "RaftHostError";
    this.outcomeKnown = outcomeKnownByCode[code];
  }
}

export const notLeader = (leaderId: NodeId | null) =>
  new RaftHostError(HostErrorCode.NotLeader, leaderId ? `not the leader; the leader is ${leaderId}` : "not the leader; no leader known", leaderId);
