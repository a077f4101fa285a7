/**
 * Rebuilds a configuration from a {@link ConfState} (after a restart or a snapshot) by replaying
 * it as a sequence of changes through the same pure functions that apply live changes.
 */
import { EMPTY_TRACKER_CONFIG } from "../tracker/tracker.js";
import { ConfChangeType, type ConfChangeSingle, type ConfState } from "../types.js";
import { type ChangeResult, enterJoint, simpleChange } from "./changer.js";

/** The configuration and progress map described by `confState`, new members probing from `lastIndex`. */
export function restoreConfig(confState: ConfState, lastIndex: number, inflightMsgsMax: number): ChangeResult {
  let state: ChangeResult = { config: EMPTY_TRACKER_CONFIG, progress: new Map() };
  const step = (changes: ConfChangeSingle[]): void => {
    state = simpleChange({ ...state, lastIndex, inflightMsgsMax }, changes);
  };
  const joint = confState.votersOutgoing.length > 0;
  if (!joint) {
    for (const id of confState.voters) step([{ type: ConfChangeType.AddVoter, nodeId: id }]);
    for (const id of confState.learners) step([{ type: ConfChangeType.AddLearner, nodeId: id }]);
    return state;
  }
  // The outgoing half first, as a plain configuration; then enter the joint configuration that
  // turns it into the incoming half.
  for (const id of confState.votersOutgoing) step([{ type: ConfChangeType.AddVoter, nodeId: id }]);
  const incoming: ConfChangeSingle[] = [
    ...confState.voters.map((id) => ({ type: ConfChangeType.AddVoter, nodeId: id })),
    ...confState.learners.map((id) => ({ type: ConfChangeType.AddLearner, nodeId: id })),
    ...confState.learnersNext.map((id) => ({ type: ConfChangeType.AddLearner, nodeId: id })),
  ];
  // enterJoint starts from the outgoing voters as incoming; remove those not in the new incoming half.
  const removals: ConfChangeSingle[] = confState.votersOutgoing
    .filter((id) => !confState.voters.includes(id))
    .map((id) => ({ type: ConfChangeType.RemoveNode, nodeId: id }));
  return enterJoint({ ...state, lastIndex, inflightMsgsMax }, confState.autoLeave, [...removals, ...incoming]);
}
