/**
 * How a (pre-)candidate handles messages: it counts votes, and yields to a leader of its term.
 */
import { RaftError, RaftErrorCode } from "./errors.js";
import { VoteResult } from "./quorum/vote-result.js";
import type { Raft } from "./raft.js";
import { type Message, MessageType, StateRole } from "./types.js";

/** The step function of the pre-candidate and candidate roles. */
export function stepCandidate(r: Raft, m: Message): void {
  const myVoteResponse = r.role === StateRole.PreCandidate ? MessageType.PreVoteResp : MessageType.VoteResp;
  switch (m.type) {
    case MessageType.Prop:
    case MessageType.ReadIndex:
      throw new RaftError(RaftErrorCode.NotLeader, `no leader to forward to (${r.role} in term ${r.term})`);
    case MessageType.App:
      r.becomeFollower(m.term, m.from);
      r.handleAppendEntries(m);
      return;
    case MessageType.Heartbeat:
      r.becomeFollower(m.term, m.from);
      r.handleHeartbeat(m);
      return;
    case MessageType.Snap:
      r.becomeFollower(m.term, m.from);
      r.handleSnapshot(m);
      return;
    case myVoteResponse: {
      const result = r.poll(m.from, !m.reject);
      if (result === VoteResult.Won) {
        if (r.role === StateRole.PreCandidate) {
          r.campaign("election");
        } else {
          r.becomeLeader();
          r.bcastAppend();
        }
      } else if (result === VoteResult.Lost) {
        // A rejected pre-vote carrying a higher term already made us follow it in `step`.
        r.becomeFollower(r.term, null);
      }
      return;
    }
    default:
      return;
  }
}
