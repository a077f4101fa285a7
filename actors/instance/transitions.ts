/**
 * The instance lifecycle as an explicit transition table (docs/decisions/instance-states.md).
 * The machine in `instance-machine.ts` is derived from {@link INSTANCE_TRANSITIONS}; any (state,
 * event) pair not listed is ignored. Every non-final state except RUNNING has a bounded wait with an
 * explicit outcome, so no instance stays SCHEDULED, PREPARING, STARTING, DRAINING or STOPPING forever.
 * CREATED is transient: a new instance goes on to SCHEDULED and is dispatched; an instance adopted
 * from the store (its group's scope was acquired) goes straight to its recorded state.
 */
import { checkTable, type TransitionRow } from "../shared/transition-table.js";

/** The eight instance states of spec document 1, plus the transient CREATED. */
export const INSTANCE_MACHINE_STATES = ["CREATED", "SCHEDULED", "PREPARING", "STARTING", "RUNNING", "DRAINING", "STOPPING", "STOPPED", "CRASHED"] as const;
/** One of {@link INSTANCE_MACHINE_STATES}. */
export type InstanceMachineState = (typeof INSTANCE_MACHINE_STATES)[number];
/** States with no way out: the actor is done. */
export const INSTANCE_FINAL_STATES: readonly InstanceMachineState[] = ["STOPPED", "CRASHED"];

/** Events reported to an instance actor (by the daemon gateway, the scheduler or an operator). */
export type InstanceEvent =
  /** The daemon accepted the prepare command. */
  | { type: "DISPATCHED" }
  /** Templates unpacked and the process spawned. */
  | { type: "SPAWNED" }
  /** Ready: plugin `/api/plugin/ready` or the platform's readiness rule. */
  | { type: "READY" }
  /** Stop gracefully: stop taking players, let them leave, then stop. */
  | { type: "DRAIN" }
  /** A draining instance has no player left. */
  | { type: "EMPTY" }
  /** Stop now with the platform's stop command (the daemon escalates to SIGTERM, SIGKILL). */
  | { type: "STOP" }
  /** Kill at once. */
  | { type: "FORCE_STOP" }
  /** The process ended; unexpected unless the instance was STOPPING. */
  | { type: "EXITED"; exitCode: number }
  /** Preparing or spawning failed on the daemon (template fetch, unpack, spawn error). */
  | { type: "FAILED"; reason: string }
  /** The node went OFFLINE: the instance is gone with it (the scheduler replaces it). */
  | { type: "NODE_LOST" };

/** The event type names of {@link InstanceEvent}. */
export type InstanceEventType = InstanceEvent["type"];

/** Every event type, for tests that send each one in each state. */
export const INSTANCE_EVENT_TYPES: readonly InstanceEventType[] = [
  "DISPATCHED",
  "SPAWNED",
  "READY",
  "DRAIN",
  "EMPTY",
  "STOP",
  "FORCE_STOP",
  "EXITED",
  "FAILED",
  "NODE_LOST",
];

/**
 * Effects of the instance machine, provided from src/ with `.provide({ actions })`:
 * - dispatch: send prepare + start to the node's daemon (with the group's fencing token);
 * - sendStop: the platform's stop command; the daemon escalates to SIGTERM then SIGKILL itself;
 * - sendForceStop: kill at once (harmless when nothing runs yet);
 * - announceDrain: stop routing players to the instance;
 * - recordCrash: crash record + INSTANCE_CRASHED (counts towards the crash loop);
 * - reportLost: the node was lost; the instance is replaced, no crash-loop count;
 * - reportTimeout: a bounded wait ran out (the event is `xstate.after.<delay>…`);
 * - reportStopUnconfirmed: the daemon never confirmed the exit after a force-stop.
 */
export const INSTANCE_EFFECTS = [
  "dispatch",
  "sendStop",
  "sendForceStop",
  "announceDrain",
  "recordCrash",
  "reportLost",
  "reportTimeout",
  "reportStopUnconfirmed",
] as const;
/** One of {@link INSTANCE_EFFECTS}. */
export type InstanceEffect = (typeof INSTANCE_EFFECTS)[number];

/** Named delays of the instance machine; their lengths come from {@link InstanceTimeouts}. */
export const INSTANCE_DELAYS = ["dispatchTimeout", "prepareTimeout", "startTimeout", "drainTimeout", "stopTimeout"] as const;

type Row = TransitionRow<InstanceMachineState> & { effects: readonly InstanceEffect[] };

/** States an instance actor can be adopted in (a live instance read from the store). */
export const INSTANCE_ADOPTABLE_STATES = ["SCHEDULED", "PREPARING", "STARTING", "RUNNING", "DRAINING", "STOPPING"] as const;
/** One of {@link INSTANCE_ADOPTABLE_STATES}. */
export type InstanceAdoptableState = (typeof INSTANCE_ADOPTABLE_STATES)[number];

/** Every edge of the instance lifecycle. */
export const INSTANCE_TRANSITIONS: readonly Row[] = [
  { from: "CREATED", event: "always", guard: "adoptsPreparing", to: "PREPARING", effects: [] },
  { from: "CREATED", event: "always", guard: "adoptsStarting", to: "STARTING", effects: [] },
  { from: "CREATED", event: "always", guard: "adoptsRunning", to: "RUNNING", effects: [] },
  { from: "CREATED", event: "always", guard: "adoptsDraining", to: "DRAINING", effects: [] },
  { from: "CREATED", event: "always", guard: "adoptsStopping", to: "STOPPING", effects: [] },
  { from: "CREATED", event: "always", to: "SCHEDULED", effects: ["dispatch"] },

  { from: "SCHEDULED", event: "DISPATCHED", to: "PREPARING", effects: [] },
  { from: "SCHEDULED", event: "STOP", to: "STOPPED", effects: ["sendForceStop"] },
  { from: "SCHEDULED", event: "FORCE_STOP", to: "STOPPED", effects: ["sendForceStop"] },
  { from: "SCHEDULED", event: "NODE_LOST", to: "CRASHED", effects: ["reportLost"] },
  {
    from: "SCHEDULED",
    event: "after:dispatchTimeout",
    guard: "dispatchAttemptsLeft",
    to: "SCHEDULED",
    reenter: true,
    updates: ["countDispatchAttempt"],
    effects: ["dispatch"],
  },
  { from: "SCHEDULED", event: "after:dispatchTimeout", to: "CRASHED", effects: ["sendForceStop", "reportTimeout"] },

  { from: "PREPARING", event: "SPAWNED", to: "STARTING", effects: [] },
  { from: "PREPARING", event: "FAILED", to: "CRASHED", effects: ["recordCrash"] },
  { from: "PREPARING", event: "STOP", to: "STOPPING", effects: ["sendForceStop"], updates: ["noteForceStop"] },
  { from: "PREPARING", event: "FORCE_STOP", to: "STOPPING", effects: ["sendForceStop"], updates: ["noteForceStop"] },
  { from: "PREPARING", event: "NODE_LOST", to: "CRASHED", effects: ["reportLost"] },
  { from: "PREPARING", event: "after:prepareTimeout", to: "CRASHED", effects: ["sendForceStop", "reportTimeout"] },

  { from: "STARTING", event: "READY", to: "RUNNING", effects: [] },
  { from: "STARTING", event: "EXITED", to: "CRASHED", effects: ["recordCrash"] },
  { from: "STARTING", event: "FAILED", to: "CRASHED", effects: ["recordCrash"] },
  { from: "STARTING", event: "STOP", to: "STOPPING", effects: ["sendStop"] },
  { from: "STARTING", event: "FORCE_STOP", to: "STOPPING", effects: ["sendForceStop"], updates: ["noteForceStop"] },
  { from: "STARTING", event: "NODE_LOST", to: "CRASHED", effects: ["reportLost"] },
  { from: "STARTING", event: "after:startTimeout", to: "CRASHED", effects: ["sendForceStop", "reportTimeout"] },

  { from: "RUNNING", event: "DRAIN", to: "DRAINING", effects: ["announceDrain"] },
  { from: "RUNNING", event: "STOP", to: "STOPPING", effects: ["sendStop"] },
  { from: "RUNNING", event: "FORCE_STOP", to: "STOPPING", effects: ["sendForceStop"], updates: ["noteForceStop"] },
  { from: "RUNNING", event: "EXITED", to: "CRASHED", effects: ["recordCrash"] },
  { from: "RUNNING", event: "NODE_LOST", to: "CRASHED", effects: ["reportLost"] },

  { from: "DRAINING", event: "EMPTY", to: "STOPPING", effects: ["sendStop"] },
  { from: "DRAINING", event: "after:drainTimeout", to: "STOPPING", effects: ["sendStop"] },
  { from: "DRAINING", event: "STOP", to: "STOPPING", effects: ["sendStop"] },
  { from: "DRAINING", event: "FORCE_STOP", to: "STOPPING", effects: ["sendForceStop"], updates: ["noteForceStop"] },
  { from: "DRAINING", event: "EXITED", to: "CRASHED", effects: ["recordCrash"] },
  { from: "DRAINING", event: "NODE_LOST", to: "CRASHED", effects: ["reportLost"] },

  { from: "STOPPING", event: "EXITED", to: "STOPPED", effects: [] },
  { from: "STOPPING", event: "FORCE_STOP", to: "STOPPING", effects: ["sendForceStop"], updates: ["noteForceStop"] },
  { from: "STOPPING", event: "NODE_LOST", to: "STOPPED", effects: [] },
  {
    from: "STOPPING",
    event: "after:stopTimeout",
    guard: "forceStopNotSent",
    to: "STOPPING",
    reenter: true,
    updates: ["noteForceStop"],
    effects: ["sendForceStop"],
  },
  { from: "STOPPING", event: "after:stopTimeout", to: "STOPPED", effects: ["reportStopUnconfirmed"] },
];

checkTable(INSTANCE_TRANSITIONS, INSTANCE_MACHINE_STATES, INSTANCE_FINAL_STATES);
