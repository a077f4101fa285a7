/**
 * Node states as an explicit transition table (docs/decisions/node-states.md). The machine in
 * `node-machine.ts` is derived from {@link NODE_TRANSITIONS}; unlisted (state, event) pairs are
 * ignored. RESTORING is transient: the actor leaves it at once for the state its input names.
 */
import { checkTable, type TransitionRow } from "../shared/transition-table.js";

/** The four node states of spec document 1, plus the transient RESTORING. */
export const NODE_MACHINE_STATES = ["RESTORING", "ONLINE", "DRAINING", "UNREACHABLE", "OFFLINE"] as const;
/** One of {@link NODE_MACHINE_STATES}. */
export type NodeMachineState = (typeof NODE_MACHINE_STATES)[number];

/**
 * Events reported to a node actor (by the daemon gateway or an operator route). Liveness has one
 * owner, the gateway's session: it ends the session when the stream closes or its pings go
 * unanswered, and the actor hears DISCONNECTED; it never watches heartbeats itself.
 */
export type NodeEvent =
  /** The daemon's session ended (stream closed, or silent past the gateway's heartbeat bound). */
  | { type: "DISCONNECTED" }
  /** The daemon completed a handshake (again). */
  | { type: "CONNECTED" }
  /** `POST /api/v1/nodes/{id}/drain`. */
  | { type: "DRAIN" }
  /** `POST /api/v1/nodes/{id}/undrain`. */
  | { type: "UNDRAIN" }
  /** Exclude from placement, independent of the state. */
  | { type: "CORDON" }
  /** Include in placement again. */
  | { type: "UNCORDON" };

/** The event type names of {@link NodeEvent}. */
export const NODE_EVENT_TYPES: readonly NodeEvent["type"][] = ["DISCONNECTED", "CONNECTED", "DRAIN", "UNDRAIN", "CORDON", "UNCORDON"];

/**
 * Effects of the node machine, provided from src/:
 * - reportDisconnected / reportConnected: NODE_DISCONNECTED / NODE_CONNECTED;
 * - announceDrain / announceDrainCompleted: NODE_DRAIN_REQUESTED / NODE_DRAIN_COMPLETED;
 * - persistCordon: the record's `cordoned` flag;
 * - replaceInstances: NODE_LOST to every instance actor of the node, so the scheduler replaces them.
 */
export const NODE_EFFECTS = ["reportDisconnected", "reportConnected", "announceDrain", "announceDrainCompleted", "persistCordon", "replaceInstances"] as const;
/** One of {@link NODE_EFFECTS}. */
export type NodeEffect = (typeof NODE_EFFECTS)[number];

type Row = TransitionRow<NodeMachineState> & { effects: readonly NodeEffect[] };

const cordonRows = (state: NodeMachineState): Row[] => [
  { from: state, event: "CORDON", to: state, updates: ["noteCordon"], effects: ["persistCordon"] },
  { from: state, event: "UNCORDON", to: state, updates: ["noteUncordon"], effects: ["persistCordon"] },
];

/** Every edge of a node's life. */
export const NODE_TRANSITIONS: readonly Row[] = [
  { from: "RESTORING", event: "always", guard: "restoresDraining", to: "DRAINING", effects: [] },
  { from: "RESTORING", event: "always", guard: "restoresUnreachable", to: "UNREACHABLE", effects: [] },
  { from: "RESTORING", event: "always", guard: "restoresOffline", to: "OFFLINE", effects: [] },
  { from: "RESTORING", event: "always", to: "ONLINE", effects: [] },

  { from: "ONLINE", event: "DISCONNECTED", to: "UNREACHABLE", effects: ["reportDisconnected"] },
  { from: "ONLINE", event: "DRAIN", to: "DRAINING", updates: ["noteDrain"], effects: ["announceDrain"] },
  ...cordonRows("ONLINE"),

  { from: "DRAINING", event: "DISCONNECTED", to: "UNREACHABLE", effects: ["reportDisconnected"] },
  { from: "DRAINING", event: "UNDRAIN", to: "ONLINE", updates: ["clearDrain"], effects: ["announceDrainCompleted"] },
  ...cordonRows("DRAINING"),

  { from: "UNREACHABLE", event: "CONNECTED", guard: "drainRequested", to: "DRAINING", effects: ["reportConnected"] },
  { from: "UNREACHABLE", event: "CONNECTED", to: "ONLINE", effects: ["reportConnected"] },
  { from: "UNREACHABLE", event: "DRAIN", to: "UNREACHABLE", updates: ["noteDrain"], effects: ["announceDrain"] },
  { from: "UNREACHABLE", event: "after:offlineGrace", to: "OFFLINE", effects: ["replaceInstances"] },
  ...cordonRows("UNREACHABLE"),

  { from: "OFFLINE", event: "CONNECTED", guard: "drainRequested", to: "DRAINING", effects: ["reportConnected"] },
  { from: "OFFLINE", event: "CONNECTED", to: "ONLINE", effects: ["reportConnected"] },
  { from: "OFFLINE", event: "DRAIN", to: "OFFLINE", updates: ["noteDrain"], effects: ["announceDrain"] },
  ...cordonRows("OFFLINE"),
];

checkTable(NODE_TRANSITIONS, NODE_MACHINE_STATES, []);
