/**
 * Linearizable reads on the leader (§6.4 of the Raft thesis): a read is answered with the commit
 * index once a quorum confirmed, through a heartbeat round carrying the read's context, that
 * this node was still leader when the read arrived.
 */
import type { Raft } from "./raft.js";
import { type Message, MessageType } from "./types.js";

/** Answers a read: a read state for a local request, a response message for a forwarded one. */
export function respondToReadIndex(r: Raft, request: Message, readIndex: number): void {
  if (request.from === "" || request.from === r.id) {
    r.readStates.push({ index: readIndex, requestCtx: request.context });
    return;
  }
  r.send({ type: MessageType.ReadIndexResp, to: request.from, index: readIndex, context: request.context });
}

/** True once this leader committed an entry of its own term: its commit index is then current. */
export function committedEntryInCurrentTerm(r: Raft): boolean {
  return r.log.termOrNull(r.log.committed) === r.term;
}

/** Records a read at the commit index and asks a quorum to confirm leadership. */
function startReadIndex(r: Raft, m: Message): void {
  if (!r.readOnly.addRequest(r.log.committed, m)) return;
  r.readOnly.recvAck(r.id, m.context);
  r.bcastHeartbeat(m.context);
}

/** A read request reaching the leader. */
export function leaderReadIndex(r: Raft, m: Message): void {
  if (r.tracker.isSingleton()) {
    // The only voter is its own quorum: the commit index is safe to read at once.
    respondToReadIndex(r, m, r.log.committed);
    return;
  }
  if (!committedEntryInCurrentTerm(r)) {
    // Our commit index may lag the true one until an entry of this term commits.
    if (r.pendingReadIndexMessages.length < r.maxPendingReadRequests) r.pendingReadIndexMessages.push(m);
    return;
  }
  startReadIndex(r, m);
}

/** A heartbeat answer carrying a read context: release the reads a quorum has now confirmed. */
export function confirmReads(r: Raft, m: Message): void {
  const acks = r.readOnly.recvAck(m.from, m.context);
  if (acks === null || !r.tracker.hasQuorum(acks)) return;
  for (const status of r.readOnly.advance(m.context)) respondToReadIndex(r, status.request, status.index);
}

/** Starts the reads deferred until this leader committed an entry of its term. */
export function releasePendingReads(r: Raft): void {
  if (r.pendingReadIndexMessages.length === 0 || !committedEntryInCurrentTerm(r)) return;
  const pending = r.pendingReadIndexMessages;
  r.pendingReadIndexMessages = [];
  for (const m of pending) startReadIndex(r, m);
}
