/**
 * The group scaling loop as an explicit transition table (docs/decisions/scheduler.md, "The group
 * loop"). The machine in `group-machine.ts` is derived from {@link GROUP_TRANSITIONS}; unlisted
 * (state, event) pairs are ignored. STARTING is transient.
 */
import { checkTable, type TransitionRow } from "../shared/transition-table.js";

/** States of a group actor. */
export const GROUP_MACHINE_STATES = ["STARTING", "WAITING", "EVALUATING", "MAINTENANCE", "PAUSED", "DELETED"] as const;
/** One of {@link GROUP_MACHINE_STATES}. */
export type GroupMachineState = (typeof GROUP_MACHINE_STATES)[number];
/** The group actor is done once its group is deleted. */
export const GROUP_FINAL_STATES: readonly GroupMachineState[] = ["DELETED"];

/** The done and error events of the invoked `evaluate` actor (its id is `evaluate`). */
export const EVALUATE_DONE = "xstate.done.actor.evaluate";
/** See {@link EVALUATE_DONE}. */
export const EVALUATE_ERROR = "xstate.error.actor.evaluate";

/** What one evaluation reports back. */
export interface EvaluationOutput {
  /** More work is known right now (starts were capped): evaluate again without waiting. */
  again: boolean;
}

/** Events sent to a group actor. */
export type GroupEvent =
  /** Evaluate now (an operator's explicit start, a test). */
  | { type: "TICK" }
  /** Something the decision depends on changed: the group record, an instance's state or players, a node. */
  | { type: "CHANGED" }
  | { type: "MAINTENANCE_ON" }
  | { type: "MAINTENANCE_OFF" }
  /** The crash-loop detector tripped for this group. */
  | { type: "CRASH_LOOP"; crashCount: number; windowStartMs: number }
  /** `POST /api/v1/groups/{group}/resume`. */
  | { type: "RESUME" }
  /** The group was deleted. */
  | { type: "DELETED" }
  | { type: typeof EVALUATE_DONE; output: EvaluationOutput }
  | { type: typeof EVALUATE_ERROR; error: unknown };

/** Operator and scheduler event types (not the evaluate actor's own). */
export const GROUP_EVENT_TYPES = ["TICK", "CHANGED", "MAINTENANCE_ON", "MAINTENANCE_OFF", "CRASH_LOOP", "RESUME", "DELETED"] as const;

/**
 * Effects of the group machine, provided from src/:
 * - announceCrashLoop: pause recorded on the group, crash-loop metric, GROUP_CRASH_LOOP;
 * - clearCrashLoop: pause cleared, the detector's window for the group reset;
 * - stopGroupInstances: STOP to every instance actor of the group;
 * - reportEvaluationFailed: log + cloud_scheduler_tick_failures_total.
 * The evaluation itself is the invoked actor `evaluate` (a `fromPromise` honouring its AbortSignal).
 */
export const GROUP_EFFECTS = ["announceCrashLoop", "clearCrashLoop", "stopGroupInstances", "reportEvaluationFailed"] as const;
/** One of {@link GROUP_EFFECTS}. */
export type GroupEffect = (typeof GROUP_EFFECTS)[number];

type Row = TransitionRow<GroupMachineState> & { effects: readonly GroupEffect[] };

const deleteRow = (from: GroupMachineState): Row => ({ from, event: "DELETED", to: "DELETED", effects: ["stopGroupInstances"] });

/** Every edge of the group loop. */
export const GROUP_TRANSITIONS: readonly Row[] = [
  { from: "STARTING", event: "always", guard: "startsInMaintenance", to: "MAINTENANCE", effects: [] },
  { from: "STARTING", event: "always", guard: "startsPaused", to: "PAUSED", effects: [] },
  { from: "STARTING", event: "always", to: "EVALUATING", effects: [] },

  { from: "WAITING", event: "after:evaluationInterval", to: "EVALUATING", effects: [] },
  { from: "WAITING", event: "TICK", to: "EVALUATING", effects: [] },
  { from: "WAITING", event: "CHANGED", to: "EVALUATING", effects: [] },
  { from: "WAITING", event: "MAINTENANCE_ON", to: "MAINTENANCE", effects: [] },
  { from: "WAITING", event: "CRASH_LOOP", to: "PAUSED", effects: ["announceCrashLoop"] },
  deleteRow("WAITING"),

  { from: "EVALUATING", event: EVALUATE_DONE, guard: "evaluateAgain", to: "EVALUATING", reenter: true, updates: ["clearPending"], effects: [] },
  { from: "EVALUATING", event: EVALUATE_DONE, to: "WAITING", effects: [] },
  { from: "EVALUATING", event: EVALUATE_ERROR, to: "WAITING", updates: ["clearPending"], effects: ["reportEvaluationFailed"] },
  { from: "EVALUATING", event: "after:evaluationTimeout", to: "WAITING", updates: ["clearPending"], effects: ["reportEvaluationFailed"] },
  { from: "EVALUATING", event: "TICK", to: "EVALUATING", updates: ["notePending"], effects: [] },
  { from: "EVALUATING", event: "CHANGED", to: "EVALUATING", updates: ["notePending"], effects: [] },
  { from: "EVALUATING", event: "MAINTENANCE_ON", to: "MAINTENANCE", updates: ["clearPending"], effects: [] },
  { from: "EVALUATING", event: "CRASH_LOOP", to: "PAUSED", updates: ["clearPending"], effects: ["announceCrashLoop"] },
  deleteRow("EVALUATING"),

  { from: "MAINTENANCE", event: "MAINTENANCE_OFF", to: "EVALUATING", effects: ["clearCrashLoop"] },
  deleteRow("MAINTENANCE"),

  { from: "PAUSED", event: "RESUME", to: "EVALUATING", effects: ["clearCrashLoop"] },
  { from: "PAUSED", event: "MAINTENANCE_ON", to: "MAINTENANCE", effects: [] },
  deleteRow("PAUSED"),
];

checkTable(GROUP_TRANSITIONS, GROUP_MACHINE_STATES, GROUP_FINAL_STATES);
