/**
 * The client-side state the event stream keeps directly (everything else is REST data refetched
 * when an event says it changed, see query-cache.ts): the last sequence, the most recent events for
 * the overview, and in-place patches of lists the page shows (an instance's new state appears at
 * once, before the list is fetched again). Pure functions over plain values.
 */
import type { LiveEvent, ResyncReason } from "./types.js";

/** Recent events kept for the overview. */
export const RECENT_EVENTS_MAX = 50;

export interface LiveState {
  /** Sequence of the newest event applied; null before the first. */
  latestSequence: number | null;
  /** Newest first, at most {@link RECENT_EVENTS_MAX}. */
  recent: readonly LiveEvent[];
  /** How many times state had to be fetched again. */
  resyncs: number;
  lastResync: ResyncReason | null;
}

export const initialLiveState: LiveState = { latestSequence: null, recent: [], resyncs: 0, lastResync: null };

/** Events that are noise on the overview (frequent, and shown as charts elsewhere). */
const QUIET_TYPES = new Set(["INSTANCE_METRICS", "NODE_STATUS", "GROUP_AGGREGATES_UPDATED", "PLAYER_JOURNEY"]);

/** Applies a batch in order; an event at or below the latest sequence is a duplicate and skipped. */
export function reduceEvents(state: LiveState, batch: readonly LiveEvent[]): LiveState {
  let latest = state.latestSequence;
  const fresh: LiveEvent[] = [];
  for (const event of batch) {
    if (latest !== null && event.sequence <= latest) continue;
    latest = event.sequence;
    if (!QUIET_TYPES.has(event.type)) fresh.push(event);
  }
  if (latest === state.latestSequence) return state;
  const recent = fresh.length === 0 ? state.recent : [...fresh.reverse(), ...state.recent].slice(0, RECENT_EVENTS_MAX);
  return { ...state, latestSequence: latest, recent };
}

/** A resync: the recent list restarts (what it showed may have gaps), the count goes up. */
export function reduceResync(state: LiveState, reason: ResyncReason): LiveState {
  return { ...state, recent: reason === "initial" ? state.recent : [], resyncs: state.resyncs + 1, lastResync: reason };
}

/** A row of an instance list. */
export interface InstanceRow {
  id: string;
  state: string;
  playerCount?: number;
}

/**
 * The rows with the states INSTANCE_STATE_CHANGED events gave them (the newest wins); the same
 * array when no row changed, so a page re-renders only when something it shows moved.
 */
export function patchInstanceRows<T extends InstanceRow>(rows: readonly T[], batch: readonly LiveEvent[]): readonly T[] {
  let states: Map<string, string> | null = null;
  for (const event of batch) {
    if (event.type !== "INSTANCE_STATE_CHANGED") continue;
    const id = event.data.instanceId;
    const next = event.data.newState;
    if (typeof id === "string" && typeof next === "string") (states ??= new Map()).set(id, next);
  }
  if (!states) return rows;
  let changed = false;
  const out = rows.map((row) => {
    const next = states!.get(row.id);
    if (next === undefined || next === row.state) return row;
    changed = true;
    return { ...row, state: next };
  });
  return changed ? out : rows;
}

/** A row of a group list. */
export interface GroupRow {
  name: string;
  maintenance: boolean;
  runningInstances: number;
  totalPlayers: number;
}

/**
 * The rows with what GROUP_MAINTENANCE_CHANGED and GROUP_AGGREGATES_UPDATED say of them (values set,
 * the newest event wins) and without the groups GROUP_DELETED removed; the same array when nothing
 * changed. A new group is not added: its record is fetched.
 */
export function patchGroupRows<T extends GroupRow>(rows: readonly T[], batch: readonly LiveEvent[]): readonly T[] {
  let changes: Map<string, Partial<GroupRow> | null> | null = null;
  for (const event of batch) {
    const name = event.data.groupName;
    if (typeof name !== "string") continue;
    let change: Partial<GroupRow> | null | undefined;
    if (event.type === "GROUP_MAINTENANCE_CHANGED" && typeof event.data.maintenance === "boolean") change = { maintenance: event.data.maintenance };
    else if (event.type === "GROUP_AGGREGATES_UPDATED" && typeof event.data.runningInstances === "number" && typeof event.data.totalPlayers === "number")
      change = { runningInstances: event.data.runningInstances, totalPlayers: event.data.totalPlayers };
    else if (event.type === "GROUP_DELETED") change = null;
    if (change === undefined) continue;
    changes ??= new Map();
    const before = changes.get(name);
    changes.set(name, change === null || before === null ? change : { ...before, ...change });
  }
  if (!changes) return rows;
  let changed = false;
  const out: T[] = [];
  for (const row of rows) {
    const change = changes.get(row.name);
    if (change === undefined) out.push(row);
    else if (change === null) changed = true;
    else if (Object.entries(change).some(([k, v]) => row[k as keyof GroupRow] !== v)) {
      changed = true;
      out.push({ ...row, ...change });
    } else out.push(row);
  }
  return changed ? out : rows;
}

/** States an instance no longer counts in the overview in. */
const FINISHED_STATES = new Set(["STOPPED", "CRASHED"]);

/** The overview's counts as far as events tell (a fetch corrects the rest). */
export interface OverviewCounts {
  nodeCount: number;
  instanceCount: number;
  playerCount: number;
  groupCount: number;
}

/**
 * The counts moved by the batch: an instance entering or leaving the live states (not STOPPED or
 * CRASHED; one without an old state is new), a group created or deleted. Deltas, so applied once per
 * event: the overview fetches the counts again after such a change to correct what a delta cannot
 * know (players, nodes, instances removed without an event).
 */
export function patchOverviewCounts<T extends OverviewCounts>(counts: T, batch: readonly LiveEvent[]): T {
  let instances = 0;
  let groups = 0;
  for (const event of batch) {
    if (event.type === "INSTANCE_STATE_CHANGED") {
      const old = event.data.oldState;
      const wasLive = typeof old === "string" && old !== "" && !FINISHED_STATES.has(old);
      const isLive = typeof event.data.newState === "string" && !FINISHED_STATES.has(event.data.newState);
      instances += Number(isLive) - Number(wasLive);
    } else if (event.type === "GROUP_CREATED") groups += 1;
    else if (event.type === "GROUP_DELETED") groups -= 1;
  }
  if (instances === 0 && groups === 0) return counts;
  return { ...counts, instanceCount: Math.max(0, counts.instanceCount + instances), groupCount: Math.max(0, counts.groupCount + groups) };
}

/** One line for an event, as the overview and the live log show it. */
export function describeEvent(event: LiveEvent): string {
  const d = event.data;
  const s = (key: string) => (typeof d[key] === "string" || typeof d[key] === "number" ? String(d[key]) : "?");
  switch (event.type) {
    case "INSTANCE_STATE_CHANGED":
      return `${s("instanceId")} (${s("group")}) ${d.oldState ? `${s("oldState")} → ` : ""}${s("newState")}`;
    case "INSTANCE_CRASHED":
      return `${s("instanceId")} (${s("group")}) crashed: ${s("classification")}, exit ${d.exitCode ?? "?"}`;
    case "NODE_CONNECTED":
      return `node ${s("nodeId")} connected`;
    case "NODE_DISCONNECTED":
      return `node ${s("nodeId")} disconnected: ${s("reason")}`;
    case "NODE_HEARTBEAT_STALE":
      return `node ${s("nodeId")} missed ${s("missedPongs")} heartbeats`;
    case "NODE_DRAIN_REQUESTED":
      return `node ${s("nodeId")} draining`;
    case "NODE_DRAIN_COMPLETED":
      return `node ${s("nodeId")} drained`;
    case "GROUP_CREATED":
    case "GROUP_UPDATED":
    case "GROUP_DELETED":
      return `group ${s("groupName")} ${event.type.slice(6).toLowerCase()}`;
    case "GROUP_MAINTENANCE_CHANGED":
      return `group ${s("groupName")} maintenance ${d.maintenance ? "on" : "off"}`;
    case "GROUP_CRASH_LOOP":
      return `group ${s("group")} paused: ${s("crashCount")} crashes in the window`;
    case "DEPLOYMENT_CREATED":
      return `deployment ${s("groupName")} #${s("revision")} started (${s("strategy")})`;
    case "DEPLOYMENT_COMPLETED":
      return `deployment ${s("groupName")} #${s("revision")} ${s("outcome")}`;
    case "PLAYER_CONNECTED":
      return `${s("name")} joined ${s("instanceId")}`;
    case "PLAYER_DISCONNECTED":
      return `${s("name")} left ${s("instanceId")}`;
    case "PLAYER_TRANSFER":
      return `${s("name")} moved ${s("fromInstanceId")} → ${s("toInstanceId")}`;
    case "TEMPLATE_UPDATED":
      return `template ${s("templateName")} changed`;
    default:
      return event.type;
  }
}
