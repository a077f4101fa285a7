/**
 * The instance actor: one per instance whose group this controller owns. A definition only: the
 * effects named here are no-ops until src/ provides them with `.provide({ actions })`, and every wait
 * is a named delay (lengths from the input), so tests drive it with xstate's `SimulatedClock`.
 */
import { assign, setup } from "xstate";
import { statesFromTable } from "../shared/transition-table.js";
import {
  INSTANCE_MACHINE_STATES,
  INSTANCE_TRANSITIONS,
  type InstanceAdoptableState,
  type InstanceEffect,
  type InstanceEvent,
  type InstanceMachineState,
} from "./transitions.js";

/** Bounded waits of an instance; each ends in an explicit outcome (instance-states.md). */
export interface InstanceTimeouts {
  /** SCHEDULED: how long the daemon has to accept the prepare command before it is sent again. */
  dispatchTimeoutMs: number;
  /** Prepare commands sent at most (the first one included) before the instance is CRASHED. */
  dispatchAttemptsMax: number;
  /** PREPARING: fetching and unpacking templates plus spawning. */
  prepareTimeoutMs: number;
  /** STARTING: from spawn to ready. */
  startTimeoutMs: number;
  /** DRAINING: how long players get to leave before the stop command. */
  drainTimeoutMs: number;
  /** STOPPING: after the stop command until a force-stop; after the force-stop until STOPPED unconfirmed. */
  stopTimeoutMs: number;
}

/** Defaults: a modded server may take minutes to boot; templates may be large downloads. */
export const defaultInstanceTimeouts: InstanceTimeouts = {
  dispatchTimeoutMs: 30_000,
  dispatchAttemptsMax: 3,
  prepareTimeoutMs: 300_000,
  startTimeoutMs: 180_000,
  drainTimeoutMs: 300_000,
  stopTimeoutMs: 30_000,
};

/** What an instance actor is started with. */
export interface InstanceInput {
  instanceId: string;
  group: string;
  node: string;
  /** The recorded state of an instance adopted from the store; a new instance omits it. */
  adoptState?: InstanceAdoptableState;
  timeouts?: Partial<InstanceTimeouts>;
}

/** The instance actor's context. */
export interface InstanceContext {
  instanceId: string;
  group: string;
  node: string;
  adoptState: InstanceAdoptableState;
  timeouts: InstanceTimeouts;
  /** Prepare commands sent so far. */
  dispatchAttempts: number;
  /** Whether a force-stop went out; the second stop timeout then gives up waiting. */
  forceStopSent: boolean;
}

const noEffect = () => {};
const effects = {
  dispatch: noEffect,
  sendStop: noEffect,
  sendForceStop: noEffect,
  announceDrain: noEffect,
  recordCrash: noEffect,
  reportLost: noEffect,
  reportTimeout: noEffect,
  reportStopUnconfirmed: noEffect,
} satisfies Record<InstanceEffect, () => void>;

/** The instance lifecycle machine, derived from INSTANCE_TRANSITIONS. */
export const instanceMachine = setup({
  types: {
    context: {} as InstanceContext,
    events: {} as InstanceEvent,
    input: {} as InstanceInput,
    output: {} as { state: InstanceMachineState },
  },
  actions: {
    ...effects,
    countDispatchAttempt: assign({ dispatchAttempts: ({ context }) => context.dispatchAttempts + 1 }),
    noteForceStop: assign({ forceStopSent: true }),
  },
  guards: {
    dispatchAttemptsLeft: ({ context }) => context.dispatchAttempts < context.timeouts.dispatchAttemptsMax,
    forceStopNotSent: ({ context }) => !context.forceStopSent,
    adoptsPreparing: ({ context }) => context.adoptState === "PREPARING",
    adoptsStarting: ({ context }) => context.adoptState === "STARTING",
    adoptsRunning: ({ context }) => context.adoptState === "RUNNING",
    adoptsDraining: ({ context }) => context.adoptState === "DRAINING",
    adoptsStopping: ({ context }) => context.adoptState === "STOPPING",
  },
  delays: {
    dispatchTimeout: ({ context }) => context.timeouts.dispatchTimeoutMs,
    prepareTimeout: ({ context }) => context.timeouts.prepareTimeoutMs,
    startTimeout: ({ context }) => context.timeouts.startTimeoutMs,
    drainTimeout: ({ context }) => context.timeouts.drainTimeoutMs,
    stopTimeout: ({ context }) => context.timeouts.stopTimeoutMs,
  },
}).createMachine({
  id: "instance",
  context: ({ input }) => ({
    instanceId: input.instanceId,
    group: input.group,
    node: input.node,
    adoptState: input.adoptState ?? "SCHEDULED",
    timeouts: { ...defaultInstanceTimeouts, ...input.timeouts },
    dispatchAttempts: 1,
    forceStopSent: false,
  }),
  initial: "CREATED",
  states: statesFromTable(INSTANCE_TRANSITIONS, INSTANCE_MACHINE_STATES, {
    STOPPED: { type: "final", output: { state: "STOPPED" } },
    CRASHED: { type: "final", output: { state: "CRASHED" } },
  }),
  // The final state's own output arrives as the done event's output.
  output: ({ event }) => (event as unknown as { output: { state: InstanceMachineState } }).output,
});
