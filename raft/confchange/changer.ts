/**
 * Membership changes as pure functions: each takes the current configuration and progress map
 * and returns new ones (never mutating its inputs), or throws `INVALID_CONF_CHANGE`.
 *
 * Changes of more than one voter go through a joint configuration (§4.3 of the Raft thesis):
 * `enterJoint` makes the old voters the outgoing half and applies the changes to the incoming
 * half; `leaveJoint` drops the outgoing half. A single voter change may be `simple`.
 */
import { RaftError, RaftErrorCode, assert } from "../errors.js";
import { Progress } from "../tracker/progress.js";
import { type ProgressMap, type TrackerConfig, isJoint } from "../tracker/tracker.js";
import { ConfChangeType, type ConfChangeSingle, type NodeId } from "../types.js";

/** What a membership change starts from. */
export interface ChangeInput {
  readonly config: TrackerConfig;
  readonly progress: ProgressMap;
  /** The leader's last index, where new members start probing. */
  readonly lastIndex: number;
  readonly inflightMsgsMax: number;
}

/** The configuration and progress map a membership change produces. */
export interface ChangeResult {
  readonly config: TrackerConfig;
  readonly progress: ProgressMap;
}

interface Draft {
  incoming: Set<NodeId>;
  outgoing: Set<NodeId>;
  learners: Set<NodeId>;
  learnersNext: Set<NodeId>;
  autoLeave: boolean;
  progress: Map<NodeId, Progress>;
}

function invalid(message: string): RaftError {
  return new RaftError(RaftErrorCode.InvalidConfChange, message);
}

function draftOf(input: ChangeInput): Draft {
  const progress = new Map<NodeId, Progress>();
  for (const [id, pr] of input.progress) progress.set(id, pr);
  return {
    incoming: new Set(input.config.voters.incoming),
    outgoing: new Set(input.config.voters.outgoing),
    learners: new Set(input.config.learners),
    learnersNext: new Set(input.config.learnersNext),
    autoLeave: input.config.autoLeave,
    progress,
  };
}

function resultOf(draft: Draft): ChangeResult {
  const result: ChangeResult = {
    config: {
      voters: { incoming: draft.incoming, outgoing: draft.outgoing },
      learners: draft.learners,
      learnersNext: draft.learnersNext,
      autoLeave: draft.autoLeave,
    },
    progress: draft.progress,
  };
  checkInvariants(result);
  return result;
}

/** Broken invariants here mean a bug in this module, so they assert. */
function checkInvariants(result: ChangeResult): void {
  const { config, progress } = result;
  const all = [...config.voters.incoming, ...config.voters.outgoing, ...config.learners, ...config.learnersNext];
  for (const id of all) assert(progress.has(id), () => `no progress for member ${id}`);
  for (const id of config.learnersNext) {
    assert(config.voters.outgoing.has(id), () => `${id} is in learnersNext but not an outgoing voter`);
    assert(!progress.get(id)!.isLearner, () => `${id} is in learnersNext but already marked learner`);
  }
  for (const id of config.learners) {
    assert(!config.voters.incoming.has(id) && !config.voters.outgoing.has(id), () => `${id} is both learner and voter`);
    assert(progress.get(id)!.isLearner, () => `learner ${id} is not marked learner`);
  }
  if (!isJoint(config)) {
    assert(config.learnersNext.size === 0, "learnersNext outside a joint configuration");
    assert(!config.autoLeave, "autoLeave outside a joint configuration");
  }
}

function initProgress(draft: Draft, input: ChangeInput, id: NodeId, isLearner: boolean): void {
  // New members start probing at the leader's last index; recentActive so that check-quorum
  // does not depose the leader before the newcomer had a chance to answer.
  draft.progress.set(id, new Progress({ match: 0, next: Math.max(input.lastIndex, 1), isLearner, inflightMsgsMax: input.inflightMsgsMax, recentActive: true }));
  if (isLearner) draft.learners.add(id);
  else draft.incoming.add(id);
}

function withLearnerFlag(draft: Draft, id: NodeId, isLearner: boolean): void {
  const pr = draft.progress.get(id)!;
  if (pr.isLearner === isLearner) return;
  const copy = pr.clone();
  copy.isLearner = isLearner;
  draft.progress.set(id, copy);
}

function makeVoter(draft: Draft, input: ChangeInput, id: NodeId): void {
  if (!draft.progress.has(id)) {
    initProgress(draft, input, id, false);
    return;
  }
  withLearnerFlag(draft, id, false);
  draft.learners.delete(id);
  draft.learnersNext.delete(id);
  draft.incoming.add(id);
}

function makeLearner(draft: Draft, input: ChangeInput, id: NodeId): void {
  const pr = draft.progress.get(id);
  if (pr === undefined) {
    initProgress(draft, input, id, true);
    return;
  }
  if (pr.isLearner) return;
  remove(draft, id);
  draft.progress.set(id, pr);
  if (draft.outgoing.has(id)) {
    // Still needed as a voter of the outgoing half: becomes a learner when the joint config is left.
    draft.learnersNext.add(id);
  } else {
    withLearnerFlag(draft, id, true);
    draft.learners.add(id);
  }
}

function remove(draft: Draft, id: NodeId): void {
  if (!draft.progress.has(id)) return;
  draft.incoming.delete(id);
  draft.learners.delete(id);
  draft.learnersNext.delete(id);
  if (!draft.outgoing.has(id)) draft.progress.delete(id);
}

function applyChanges(draft: Draft, input: ChangeInput, changes: readonly ConfChangeSingle[]): void {
  for (const change of changes) {
    if (change.nodeId === "") continue;
    switch (change.type) {
      case ConfChangeType.AddVoter:
        makeVoter(draft, input, change.nodeId);
        break;
      case ConfChangeType.AddLearner:
        makeLearner(draft, input, change.nodeId);
        break;
      case ConfChangeType.RemoveNode:
        remove(draft, change.nodeId);
        break;
      default:
        throw invalid(`unknown conf change type ${String((change as { type: unknown }).type)}`);
    }
  }
  if (draft.incoming.size === 0) throw invalid("removed all voters");
}

/** Enters a joint configuration: the current voters become the outgoing half. */
export function enterJoint(input: ChangeInput, autoLeave: boolean, changes: readonly ConfChangeSingle[]): ChangeResult {
  if (isJoint(input.config)) throw invalid("configuration is already joint");
  if (input.config.voters.incoming.size === 0) throw invalid("cannot make a zero-voter configuration joint");
  const draft = draftOf(input);
  draft.outgoing = new Set(draft.incoming);
  applyChanges(draft, input, changes);
  draft.autoLeave = autoLeave;
  return resultOf(draft);
}

/** Leaves a joint configuration: the outgoing half is dropped, learnersNext become learners. */
export function leaveJoint(input: ChangeInput): ChangeResult {
  if (!isJoint(input.config)) throw invalid("cannot leave a non-joint configuration");
  const draft = draftOf(input);
  for (const id of draft.learnersNext) {
    draft.learners.add(id);
    withLearnerFlag(draft, id, true);
  }
  draft.learnersNext.clear();
  for (const id of draft.outgoing) {
    if (!draft.incoming.has(id) && !draft.learners.has(id)) draft.progress.delete(id);
  }
  draft.outgoing = new Set();
  draft.autoLeave = false;
  return resultOf(draft);
}

/** Applies changes that alter at most one voter, without a joint configuration. */
export function simpleChange(input: ChangeInput, changes: readonly ConfChangeSingle[]): ChangeResult {
  if (isJoint(input.config)) throw invalid("cannot apply a simple change in a joint configuration");
  const draft = draftOf(input);
  applyChanges(draft, input, changes);
  let changed = 0;
  for (const id of draft.incoming) if (!input.config.voters.incoming.has(id)) changed++;
  for (const id of input.config.voters.incoming) if (!draft.incoming.has(id)) changed++;
  if (changed > 1) throw invalid("more than one voter changed without entering a joint configuration");
  return resultOf(draft);
}
