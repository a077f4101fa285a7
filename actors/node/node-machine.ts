/**
 * The node actor: the offline grace period, drain and cordon of one node. Whether the node is
 * reachable is not decided here: the daemon gateway's session sees the stream and its pings, and
 * reports CONNECTED and DISCONNECTED (docs/decisions/node-states.md). A definition only: effects are
 * provided from src/; the grace period is a named delay, driven by a simulated clock in tests.
 */
import { assign, setup } from "xstate";
import { statesFromTable } from "../shared/transition-table.js";
import { NODE_MACHINE_STATES, NODE_TRANSITIONS, type NodeEffect, type NodeEvent } from "./transitions.js";

/** Bounds of a node's outage. */
export interface NodeTimeouts {
  /** How long a node may stay UNREACHABLE before it is OFFLINE and its instances are replaced. */
  offlineGraceMs: number;
}

/** Default: a node unreachable for a minute has its instances replaced. */
export const defaultNodeTimeouts: NodeTimeouts = { offlineGraceMs: 60_000 };

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
  /** Set by DRAIN, cleared by UNDRAIN; a node that comes back resumes draining. */
  drainRequested: boolean;
  cordoned: boolean;
}

const noEffect = () => {};
const effects = {
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
    noteDrain: assign({ drainRequested: true }),
    clearDrain: assign({ drainRequested: false }),
    noteCordon: assign({ cordoned: true }),
    noteUncordon: assign({ cordoned: false }),
  },
  guards: {
    drainRequested: ({ context }) => context.drainRequested,
    restoresDraining: ({ context }) => context.startState === "DRAINING",
    restoresUnreachable: ({ context }) => context.startState === "UNREACHABLE",
    restoresOffline: ({ context }) => context.startState === "OFFLINE",
  },
  delays: {
    offlineGrace: ({ context }) => context.timeouts.offlineGraceMs,
  },
}).createMachine({
  id: "node",
  context: ({ input }) => ({
    nodeId: input.nodeId,
    startState: input.state ?? "ONLINE",
    timeouts: { ...defaultNodeTimeouts, ...input.timeouts },
    drainRequested: input.drainRequested ?? input.state === "DRAINING",
    cordoned: input.cordoned ?? false,
  }),
  initial: "RESTORING",
  states: statesFromTable(NODE_TRANSITIONS, NODE_MACHINE_STATES),
});
