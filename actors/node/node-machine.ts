/**
 * The node actor: liveness (heartbeats, disconnects, the offline grace period), drain and cordon of
 * one node. A definition only: effects are provided from src/; the heartbeat window and the grace
 * period are named delays, driven by a `SimulatedClock` in tests.
 */
import { assign, setup } from "xstate";
import { statesFromTable } from "../shared/transition-table.js";
import { NODE_MACHINE_STATES, NODE_TRANSITIONS, type NodeEffect, type NodeEvent } from "./transitions.js";

/** Liveness bounds of a node. */
export interface NodeTimeouts {
  /** One heartbeat window: a PONG is expected within it. */
  pongTimeoutMs: number;
  /** Consecutive windows without a PONG before the node is UNREACHABLE. */
  missedPongsMax: number;
  /** How long a node may stay UNREACHABLE before it is OFFLINE and its instances are replaced. */
  offlineGraceMs: number;
}

/** Defaults: stale after 3 × 5 s without an answer; replaced after a further minute. */
export const defaultNodeTimeouts: NodeTimeouts = { pongTimeoutMs: 5_000, missedPongsMax: 3, offlineGraceMs: 60_000 };

/** The state a node actor starts in (from the node record when a controller takes over). */
export type NodeStartState = "ONLINE" | "DRAINING" | "UNREACHABLE" | "OFFLINE";

/** What a node actor is started with. */
export interface NodeInput {
  nodeId: string;
  /** ONLINE for a node that just connected. */
  state?: NodeStartState;
  drainRequested?: boolean;
  cordoned?: boolean;
  timeouts?: Partial<NodeTimeouts>;
}

/** The node actor's context. */
export interface NodeContext {
  nodeId: string;
  startState: NodeStartState;
  timeouts: NodeTimeouts;
  missedPongs: number;
  /** Set by DRAIN, cleared by UNDRAIN; a node that comes back resumes draining. */
  drainRequested: boolean;
  cordoned: boolean;
}

const noEffect = () => {};
const effects = {
  reportStale: noEffect,
  reportResumed: noEffect,
  reportDisconnected: noEffect,
  reportConnected: noEffect,
  announceDrain: noEffect,
  announceDrainCompleted: noEffect,
  persistCordon: noEffect,
  replaceInstances: noEffect,
} satisfies Record<NodeEffect, () => void>;

/** The node machine, derived from NODE_TRANSITIONS. */
export const nodeMachine = setup({
  types: {
    context: {} as NodeContext,
    events: {} as NodeEvent,
    input: {} as NodeInput,
  },
  actions: {
    ...effects,
    resetMissedPongs: assign({ missedPongs: 0 }),
    countMissedPong: assign({ missedPongs: ({ context }) => context.missedPongs + 1 }),
    noteDrain: assign({ drainRequested: true }),
    clearDrain: assign({ drainRequested: false }),
    noteCordon: assign({ cordoned: true }),
    noteUncordon: assign({ cordoned: false }),
  },
  guards: {
    // The expiring window is one more miss; UNREACHABLE once it makes missedPongsMax.
    pongsLeft: ({ context }) => context.missedPongs + 1 < context.timeouts.missedPongsMax,
    drainRequested: ({ context }) => context.drainRequested,
    restoresDraining: ({ context }) => context.startState === "DRAINING",
    restoresUnreachable: ({ context }) => context.startState === "UNREACHABLE",
    restoresOffline: ({ context }) => context.startState === "OFFLINE",
  },
  delays: {
    pongTimeout: ({ context }) => context.timeouts.pongTimeoutMs,
    offlineGrace: ({ context }) => context.timeouts.offlineGraceMs,
  },
}).createMachine({
  id: "node",
  context: ({ input }) => ({
    nodeId: input.nodeId,
    startState: input.state ?? "ONLINE",
    timeouts: { ...defaultNodeTimeouts, ...input.timeouts },
    missedPongs: 0,
    drainRequested: input.drainRequested ?? input.state === "DRAINING",
    cordoned: input.cordoned ?? false,
  }),
  initial: "RESTORING",
  states: statesFromTable(NODE_TRANSITIONS, NODE_MACHINE_STATES),
});
