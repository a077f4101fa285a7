/**
 * Chooses how a {@link ConfChange} is applied: leaving a joint configuration (empty change),
 * entering one (several voters change, or asked for explicitly), or a simple one-voter change.
 */
import { ConfChangeTransition, type ConfChange } from "../types.js";
import { type ChangeInput, type ChangeResult, enterJoint, leaveJoint, simpleChange } from "./changer.js";

/** Whether `cc` enters a joint configuration, and if so whether it is left automatically. */
export function jointMode(cc: ConfChange): { joint: boolean; autoLeave: boolean } {
  const transition = cc.transition ?? ConfChangeTransition.Auto;
  if (transition === ConfChangeTransition.Auto && cc.changes.length <= 1) return { joint: false, autoLeave: false };
  return { joint: true, autoLeave: transition !== ConfChangeTransition.JointExplicit };
}

/** Applies a conf change to a configuration, returning the new one (the input is not changed). */
export function applyConfChangeToTracker(input: ChangeInput, cc: ConfChange): ChangeResult {
  if (cc.changes.length === 0) return leaveJoint(input);
  const mode = jointMode(cc);
  if (mode.joint) return enterJoint(input, mode.autoLeave, cc.changes);
  return simpleChange(input, cc.changes);
}
