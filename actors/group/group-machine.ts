/**
 * The group actor: the scaling loop of one group. It evaluates at once when started, then every
 * `evaluationIntervalMs` and whenever something changed (coalesced while an evaluation runs), skips
 * the group in maintenance and while paused by a crash loop. A definition only: the evaluation is
 * the invoked actor `evaluate`, provided from src/ as a `fromPromise` that honours its AbortSignal
 * (leaving EVALUATING aborts it); the other effects are named actions.
 */
import { assign, fromPromise, setup } from "xstate";
import { statesFromTable } from "../shared/transition-table.js";
import { EVALUATE_DONE, GROUP_MACHINE_STATES, GROUP_TRANSITIONS, type EvaluationOutput, type GroupEffect, type GroupEvent } from "./transitions.js";

/** Timing of a group loop. */
export interface GroupTimings {
  /** scheduler.evaluationIntervalSeconds × 1000. */
  evaluationIntervalMs: number;
  /** An evaluation running longer is aborted and counted as failed. */
  evaluationTimeoutMs: number;
}

/** Defaults: the spec's 15 s tick; an evaluation may take at most two ticks. */
export const defaultGroupTimings: GroupTimings = { evaluationIntervalMs: 15_000, evaluationTimeoutMs: 30_000 };

/** What a group actor is started with. */
export interface GroupInput {
  group: string;
  maintenance?: boolean;
  /** The group record says a crash loop paused it (the pause outlives a controller). */
  paused?: boolean;
  timings?: Partial<GroupTimings>;
}

/** What the invoked `evaluate` actor receives. */
export interface EvaluateInput {
  group: string;
}

/** The group actor's context. */
export interface GroupContext {
  group: string;
  startsInMaintenance: boolean;
  startsPaused: boolean;
  timings: GroupTimings;
  /** A change arrived during an evaluation: evaluate again when it ends. */
  pending: boolean;
}

const noEffect = () => {};
const effects = {
  announceCrashLoop: noEffect,
  clearCrashLoop: noEffect,
  stopGroupInstances: noEffect,
  reportEvaluationFailed: noEffect,
} satisfies Record<GroupEffect, () => void>;

/** The group loop machine, derived from GROUP_TRANSITIONS. */
export const groupMachine = setup({
  types: {
    context: {} as GroupContext,
    events: {} as GroupEvent,
    input: {} as GroupInput,
  },
  actors: {
    evaluate: fromPromise<EvaluationOutput, EvaluateInput>(async () => ({ again: false })),
  },
  actions: {
    ...effects,
    notePending: assign({ pending: true }),
    clearPending: assign({ pending: false }),
  },
  guards: {
    startsInMaintenance: ({ context }) => context.startsInMaintenance,
    startsPaused: ({ context }) => context.startsPaused,
    evaluateAgain: ({ context, event }) => context.pending || (event.type === EVALUATE_DONE && event.output.again),
  },
  delays: {
    evaluationInterval: ({ context }) => context.timings.evaluationIntervalMs,
    evaluationTimeout: ({ context }) => context.timings.evaluationTimeoutMs,
  },
}).createMachine({
  id: "group",
  context: ({ input }) => ({
    group: input.group,
    startsInMaintenance: input.maintenance ?? false,
    startsPaused: input.paused ?? false,
    timings: { ...defaultGroupTimings, ...input.timings },
    pending: false,
  }),
  initial: "STARTING",
  states: statesFromTable(GROUP_TRANSITIONS, GROUP_MACHINE_STATES, {
    EVALUATING: { invoke: { id: "evaluate", src: "evaluate", input: ({ context }: { context: GroupContext }) => ({ group: context.group }) } },
    DELETED: { type: "final" },
  }),
});
