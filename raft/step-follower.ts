/**
 * How a follower handles messages: it accepts the leader's log, forwards proposals and reads to
 * it, and starts an election at once when the leader hands over leadership (TimeoutNow).
 */
import { RaftError, RaftErrorCode } from "./errors.js";
import type { Raft } from "./raft.js";
import { type Message, MessageType } from "./types.js";

/** The step function of the follower role. */
export function stepFollower(r: Raft, m: Message): void {
  switch (m.type) {
    case MessageType.Prop:
      if (r.lead === null) throw new RaftError(RaftErrorCode.NotLeader, `no leader in term ${r.term} to forward the proposal to`);
      r.checkProposalSize(m.entries);
      r.send({ ...m, to: r.lead, term: 0 });
      return;
    case MessageType.App:
      r.electionElapsed = 0;
      r.lead = m.from;
      r.handleAppendEntries(m);
      return;
    case MessageType.Heartbeat:
      r.electionElapsed = 0;
      r.lead = m.from;
      r.handleHeartbeat(m);
      return;
    case MessageType.Snap:
      r.electionElapsed = 0;
      r.lead = m.from;
      r.handleSnapshot(m);
      return;
    case MessageType.TransferLeader:
      if (r.lead === null) throw new RaftError(RaftErrorCode.NotLeader, `no leader in term ${r.term} to transfer leadership from`);
      r.send({ ...m, to: r.lead, term: 0 });
      return;
    case MessageType.TimeoutNow:
      // The leader chose us: campaign now, skipping pre-vote and the others' leases (§3.10).
      r.hup("transfer");
      return;
    case MessageType.ReadIndex:
      if (r.lead === null) throw new RaftError(RaftErrorCode.NotLeader, `no leader in term ${r.term} to forward the read to`);
      r.send({ ...m, to: r.lead, term: 0 });
      return;
    case MessageType.ReadIndexResp:
      r.readStates.push({ index: m.index, requestCtx: m.context });
      return;
    case MessageType.Unreachable:
      if (m.from === r.lead) r.leaderUnreachable();
      return;
    default:
      return;
  }
}
