/**
 * How a leader handles messages: proposals, acknowledgements, heartbeat answers (which also
 * confirm reads), snapshot reports, leader transfer and check-quorum.
 */
import { decodeConfChange } from "./codec.js";
import { assert } from "./errors.js";
import type { Raft } from "./raft.js";
import { confirmReads, leaderReadIndex } from "./read-index.js";
import { isJoint } from "./tracker/tracker.js";
import { type Entry, EntryType, type Message, MessageType } from "./types.js";

/** The step function of the leader role. */
export function stepLeader(r: Raft, m: Message): void {
  switch (m.type) {
    case MessageType.Beat:
      r.bcastHeartbeat();
      return;
    case MessageType.CheckQuorum:
      checkQuorum(r);
      return;
    case MessageType.Prop:
      propose(r, m);
      return;
    case MessageType.ReadIndex:
      leaderReadIndex(r, m);
      return;
  }

  const pr = r.tracker.progress.get(m.from);
  if (pr === undefined) return;
  switch (m.type) {
    case MessageType.AppResp: {
      pr.recentActive = true;
      if (m.reject) {
        const hint = m.logTerm > 0 ? r.log.findConflictByTerm(m.rejectHint, m.logTerm).index : m.rejectHint;
        if (pr.maybeDecrTo(m.index, hint)) {
          if (pr.state === "replicate") pr.becomeProbe();
          r.sendAppend(m.from);
        }
        return;
      }
      const wasPaused = pr.isPaused();
      if (!pr.maybeUpdate(m.index)) return;
      if (pr.state === "probe") {
        pr.becomeReplicate();
      } else if (pr.state === "snapshot" && pr.match >= pr.pendingSnapshot) {
        pr.becomeProbe();
        pr.becomeReplicate();
      } else if (pr.state === "replicate") {
        pr.inflights.freeLE(m.index);
      }
      if (r.maybeCommit()) r.bcastAppendLater(true);
      // A follower that was paused may lack the latest commit index.
      else if (wasPaused) r.sendAppendLater(m.from);
      // Keep the pipe full, within the inflight and message size bounds.
      else r.bcastAppendLater(false);
      if (m.from === r.leadTransferee && pr.match === r.log.lastIndex()) r.sendTimeoutNow(m.from);
      return;
    }
    case MessageType.HeartbeatResp: {
      pr.recentActive = true;
      pr.probeSent = false;
      if (pr.state === "replicate" && pr.inflights.full()) pr.inflights.freeFirstOne();
      if (pr.match < r.log.lastIndex()) r.sendAppend(m.from);
      if (m.context.byteLength > 0) confirmReads(r, m);
      return;
    }
    case MessageType.SnapStatus:
      if (pr.state !== "snapshot") return;
      if (m.reject) pr.pendingSnapshot = 0;
      pr.becomeProbe();
      // Wait for a heartbeat answer before probing again, so a failed snapshot is not retried hot.
      pr.probeSent = true;
      return;
    case MessageType.Unreachable:
      if (pr.state === "replicate") pr.becomeProbe();
      return;
    case MessageType.TransferLeader:
      transferLeader(r, m);
      return;
  }
}

function checkQuorum(r: Raft): void {
  if (!r.tracker.quorumActive(r.id)) {
    // Not heard from a quorum for an election timeout: step down rather than serve stale reads.
    r.becomeFollower(r.term, null);
  }
  for (const [id, pr] of r.tracker.progress) if (id !== r.id) pr.recentActive = false;
}

function propose(r: Raft, m: Message): void {
  assert(m.entries.length > 0, "proposal without entries");
  if (!r.tracker.progress.has(r.id)) r.throwDropped("not-a-member", "this leader is no longer a member");
  if (r.leadTransferee !== null) r.throwDropped("leader-transfer-in-progress", `leadership is being transferred to ${r.leadTransferee}`);
  r.checkProposalSize(m.entries);
  const entries: Entry[] = m.entries.slice();
  for (let i = 0; i < entries.length; i++) {
    if (entries[i].type !== EntryType.ConfChange) continue;
    const cc = decodeConfChange(entries[i].data);
    const alreadyPending = r.pendingConfIndex > r.log.applied;
    const alreadyJoint = isJoint(r.tracker.config);
    const wantsLeaveJoint = cc.changes.length === 0;
    let refused: string | null = null;
    if (alreadyPending) refused = `a conf change at index ${r.pendingConfIndex} is not applied yet (applied ${r.log.applied})`;
    else if (alreadyJoint && !wantsLeaveJoint) refused = "must leave the joint configuration first";
    else if (!alreadyJoint && wantsLeaveJoint) refused = "not in a joint configuration";
    if (refused !== null) r.throwDropped("conf-change-refused", refused);
    r.pendingConfIndex = r.log.lastIndex() + i + 1;
  }
  if (!r.appendEntry(entries)) r.throwDropped("uncommitted-size-exceeded", `uncommitted log exceeds ${r.maxUncommittedEntriesSizeBytes} bytes`);
  r.bcastAppendLater(false);
}

function transferLeader(r: Raft, m: Message): void {
  const transferee = m.from;
  const pr = r.tracker.progress.get(transferee);
  if (pr === undefined || pr.isLearner) return;
  if (r.leadTransferee !== null) {
    if (r.leadTransferee === transferee) return;
    r.abortLeaderTransfer();
  }
  if (transferee === r.id) return;
  // The transfer must finish within one election timeout, counted from now.
  r.electionElapsed = 0;
  r.leadTransferee = transferee;
  if (pr.match === r.log.lastIndex()) r.sendTimeoutNow(transferee);
  else r.sendAppend(transferee);
}
