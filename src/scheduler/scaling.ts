/**
 * Scaling policies: how many instances a group should start or stop now. Pure: the group, its
 * instances, the idle bookkeeping and the time in; a {@link ScalingDecision} out. The rules are in
 * docs/decisions/scheduler.md ("Scaling"):
 *
 * - maintenance or a crash-loop pause: skip the group;
 * - STATIC: exactly minInstances slots; a slot an operator stopped still counts (it stays stopped);
 *   surplus stops the highest slots first (static-slots.ts);
 * - DYNAMIC: at least minInstances, at most maxInstances; scale up when the players on RUNNING
 *   instances reach `scaleUpFillRatio` of their slots; stop idle instances (0 players for
 *   `idleCooldownMs`) while the others stay at or below `scaleDownFillRatio`; with the group's
 *   `loadScaling`, one more instance when the reported load stays over a threshold (see
 *   {@link readLoad}), and no idle stop while it is over;
 * - MANUAL: nothing automatic; only explicit starts ({@link decideExplicitStart}).
 */
import type { Group, LoadScaling } from "../domain/groups/group-schemas.js";
import type { InstanceFields } from "../domain/instances/instance-service.js";
import type { InstanceState } from "../domain/instances/instance-schemas.js";
import { AssertionError } from "../shared/errors.js";
import { slotNumber } from "./static-slots.js";

/** What scaling needs of a group. */
export type ScalingGroup = Pick<Group, "name" | "scalingMode" | "minInstances" | "maxInstances" | "maxPlayers" | "maintenance"> & {
  /** Thresholds of scaling on reported load; absent or null: player fill only. */
  loadScaling?: LoadScaling | null;
};

/** What scaling needs of an instance of the group. */
export type ScalingInstance = Pick<InstanceFields, "id" | "state" | "playerCount">;

/** Tunables of the DYNAMIC policy. */
export interface ScalingPolicy {
  /** Scale up when players on RUNNING instances reach this share of their maxPlayers slots. */
  scaleUpFillRatio: number;
  /** An idle instance is stopped only if the remaining RUNNING ones stay at or below this share. */
  scaleDownFillRatio: number;
  /** How long a RUNNING instance must have had 0 players before scale-down may stop it. */
  idleCooldownMs: number;
  /** Starts per decision; a bigger gap is closed over several evaluations run back to back. */
  startsPerDecisionMax: number;
  /** A load sample reported longer ago than this does not count (servers report every 10-30 s). */
  loadSampleMaxAgeMs: number;
}

/** Defaults: 80 % up, 60 % down (the gap keeps a fresh idle instance from flapping), 5 min idle. */
export const defaultScalingPolicy: ScalingPolicy = {
  scaleUpFillRatio: 0.8,
  scaleDownFillRatio: 0.6,
  idleCooldownMs: 300_000,
  startsPerDecisionMax: 500,
  loadSampleMaxAgeMs: 120_000,
};

/** The outcome of one evaluation of a group. */
export type ScalingDecision =
  | { action: "SKIP"; reason: "MAINTENANCE" | "CRASH_LOOP_PAUSED"; message: string }
  | {
      action: "SCALE";
      /** Instances to schedule now. */
      start: number;
      /** Instance ids to stop (DYNAMIC scale-down drains them; STATIC/over-max surplus stops them). */
      stop: string[];
      /** The count the group is steering towards. */
      target: number;
      /** True when `start` was cut at startsPerDecisionMax: evaluate again at once. */
      capped: boolean;
      message: string;
      /** Set when the start is the reported load's (the evaluator then notes the time for the cooldown). */
      trigger?: "LOAD";
    };

/** Instance states that count towards a group's size: on the way up or serving. */
export const COUNTED_STATES: ReadonlySet<InstanceState> = new Set<InstanceState>(["SCHEDULED", "PREPARING", "STARTING", "RUNNING"]);

/** What one evaluation of a group knows. */
export interface ScalingInput {
  group: ScalingGroup;
  /** The group's instances (any state; finished and stopping ones are ignored). */
  instances: readonly ScalingInstance[];
  /** Whether the crash-loop detector paused the group. */
  paused: boolean;
  nowMs: number;
  /** Since when each idle RUNNING instance had 0 players (see {@link trackIdle}). */
  idleSinceMs: ReadonlyMap<string, number>;
  /**
   * STATIC: instance ids an operator stopped (the group record's `stoppedInstances`). Their slots
   * count towards minInstances while they are stopped, so nothing is started in their place.
   */
  stoppedByOperator?: ReadonlySet<string>;
  /** DYNAMIC with `loadScaling`: the load this evaluation read and the bookkeeping since the last. */
  load?: { reading: LoadReading; tracking: LoadTracking };
}

/** One instance's latest reported tick figures (its metrics snapshot). */
export interface LoadSample {
  instanceId: string;
  tps1m: number;
  msptAvg: number;
  reportedAtMs: number;
}

/** A group's load as one evaluation reads it. */
export interface LoadReading {
  /** Mean 1-minute TPS of the counted samples; null when none reports TPS. */
  tpsAvg: number | null;
  /** Mean milliseconds per tick of the counted samples; null when none reports it. */
  msptAvg: number | null;
  /** RUNNING instances whose fresh sample counted. */
  reporting: number;
  /** Which threshold the reading is over, in words; null when it is within both. */
  breach: string | null;
}

/** What load scaling remembers of a group between evaluations. */
export interface LoadTracking {
  /** When the evaluations started seeing the load over a threshold, without a break since; null: within. */
  breachSinceMs: number | null;
  /** When the last load-triggered start was scheduled. */
  lastLoadStartMs: number | null;
}

/** Nothing seen yet. */
export const noLoadTracking: LoadTracking = { breachSinceMs: null, lastLoadStartMs: null };

/**
 * Reads the group's load from its instances' samples: only RUNNING instances count, each with a
 * sample no older than `loadSampleMaxAgeMs`; a figure of 0 is one the server did not report (the
 * snapshot stores a missing number as 0). The thresholds apply to the means, so one lagging server
 * of many does not grow the group (new players go to the least-loaded instances anyway).
 */
export function readLoad(
  threshold: LoadScaling,
  instances: readonly ScalingInstance[],
  samples: readonly LoadSample[],
  nowMs: number,
  policy: ScalingPolicy = defaultScalingPolicy,
): LoadReading {
  const running = new Set(instances.filter((i) => i.state === "RUNNING").map((i) => i.id));
  const fresh = samples.filter((s) => running.has(s.instanceId) && nowMs - s.reportedAtMs <= policy.loadSampleMaxAgeMs);
  const mean = (values: number[]) => (values.length > 0 ? values.reduce((sum, v) => sum + v, 0) / values.length : null);
  const tps = fresh.map((s) => s.tps1m).filter((v) => v > 0);
  const mspt = fresh.map((s) => s.msptAvg).filter((v) => v > 0);
  const tpsAvg = mean(tps);
  const msptAvg = mean(mspt);
  const reporting = fresh.filter((s) => s.tps1m > 0 || s.msptAvg > 0).length;
  const over: string[] = [];
  if (threshold.minTps !== undefined && tpsAvg !== null && tpsAvg < threshold.minTps) over.push(`mean TPS ${tpsAvg.toFixed(2)} below ${threshold.minTps}`);
  if (threshold.maxMsptAvg !== undefined && msptAvg !== null && msptAvg > threshold.maxMsptAvg)
    over.push(`mean MSPT ${msptAvg.toFixed(2)} above ${threshold.maxMsptAvg}`);
  const breach = over.length > 0 ? `${over.join(", ")} (${reporting} reporting)` : null;
  return { tpsAvg, msptAvg, reporting, breach };
}

/** The bookkeeping after `reading`: a breach keeps its first time, a reading within the thresholds ends it. */
export function trackLoad(previous: LoadTracking, reading: LoadReading, nowMs: number): LoadTracking {
  return { breachSinceMs: reading.breach === null ? null : (previous.breachSinceMs ?? nowMs), lastLoadStartMs: previous.lastLoadStartMs };
}

/**
 * Updates the idle bookkeeping: RUNNING instances with 0 players keep their first idle time (or get
 * `nowMs`); every other instance is dropped. Returns a new map; the input is not changed.
 */
export function trackIdle(previous: ReadonlyMap<string, number>, instances: readonly ScalingInstance[], nowMs: number): Map<string, number> {
  const next = new Map<string, number>();
  for (const instance of instances) {
    if (instance.state !== "RUNNING" || instance.playerCount > 0) continue;
    next.set(instance.id, previous.get(instance.id) ?? nowMs);
  }
  return next;
}

/** Decides starts and stops for one group. */
export function decideScaling(input: ScalingInput, policy: ScalingPolicy = defaultScalingPolicy): ScalingDecision {
  const { group } = input;
  if (group.maintenance) return { action: "SKIP", reason: "MAINTENANCE", message: `group ${group.name} is in maintenance` };
  if (input.paused) return { action: "SKIP", reason: "CRASH_LOOP_PAUSED", message: `group ${group.name} is paused after a crash loop` };
  const counted = input.instances.filter((i) => COUNTED_STATES.has(i.state));
  switch (group.scalingMode) {
    case "STATIC":
      return resizeStatic(input, counted, policy);
    case "MANUAL":
      return { action: "SCALE", start: 0, stop: [], target: counted.length, capped: false, message: "MANUAL: explicit starts only" };
    case "DYNAMIC":
      return decideDynamic(input, counted, policy);
    default:
      // The group schema admits only the three modes.
      throw new AssertionError(`unknown scaling mode: ${group.scalingMode}`);
  }
}

function decideDynamic(input: ScalingInput, counted: readonly ScalingInstance[], policy: ScalingPolicy): ScalingDecision {
  const { group } = input;
  const floor = group.minInstances;
  const ceiling = Math.max(group.minInstances, group.maxInstances);
  if (counted.length < floor) return resize(counted, floor, policy, `DYNAMIC: below minInstances ${floor}`);
  if (counted.length > ceiling) return resize(counted, ceiling, policy, `DYNAMIC: above maxInstances ${ceiling}`);

  const running = counted.filter((i) => i.state === "RUNNING");
  const players = running.reduce((sum, i) => sum + i.playerCount, 0);
  const slots = running.length * group.maxPlayers;
  if (slots > 0 && players >= policy.scaleUpFillRatio * slots) {
    // Enough instances that the players fill at most scaleUpFillRatio, and at least one more than
    // now; instances still starting count, so a pending scale-up is not repeated.
    const wanted = Math.max(running.length + 1, Math.ceil(players / (policy.scaleUpFillRatio * group.maxPlayers)));
    const target = Math.min(ceiling, Math.max(floor, wanted));
    const fill = Math.round((players / slots) * 100);
    return resize(counted, Math.max(target, counted.length), policy, `DYNAMIC: ${players} players fill ${fill} % of ${slots} slots`);
  }
  const onLoad = decideOnLoad(input, counted, ceiling);
  if (onLoad) return onLoad;

  // Scale down: idle past the cooldown, longest idle first, while the rest stay at or below the
  // scale-down fill and at or above minInstances.
  const keepForLoad = group.maxPlayers > 0 ? Math.ceil(players / (policy.scaleDownFillRatio * group.maxPlayers)) : 0;
  const keep = Math.max(floor, keepForLoad);
  const idle = running
    .filter((i) => i.playerCount === 0)
    .map((i) => ({ id: i.id, since: input.idleSinceMs.get(i.id) ?? input.nowMs }))
    .filter((i) => input.nowMs - i.since >= policy.idleCooldownMs)
    .sort((a, b) => a.since - b.since || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const removable = Math.max(0, Math.min(idle.length, counted.length - keep));
  const stop = idle.slice(0, removable).map((i) => i.id);
  return {
    action: "SCALE",
    start: 0,
    stop,
    target: counted.length - stop.length,
    capped: false,
    message: stop.length > 0 ? `DYNAMIC: ${stop.length} idle for ${policy.idleCooldownMs} ms` : "DYNAMIC: steady",
  };
}

/**
 * Scaling on load: null while the load is within the group's thresholds (or it has none). Over a
 * threshold: one start once the breach has lasted `sustainSeconds`, the group is below
 * maxInstances, nothing of it is still starting and the cooldown since the last load start has
 * passed; otherwise a hold — no start, and no idle stop either (capacity is not taken from
 * a lagging group; the load itself never stops anything).
 */
function decideOnLoad(input: ScalingInput, counted: readonly ScalingInstance[], ceiling: number): ScalingDecision | null {
  const threshold = input.group.loadScaling;
  const load = input.load;
  if (!threshold || !load || load.reading.breach === null) return null;
  const { nowMs } = input;
  const lastedMs = nowMs - (load.tracking.breachSinceMs ?? nowMs);
  const hold = (why: string): ScalingDecision => ({
    action: "SCALE",
    start: 0,
    stop: [],
    target: counted.length,
    capped: false,
    message: `DYNAMIC: ${load.reading.breach} for ${Math.round(lastedMs / 1000)} s; ${why}`,
  });
  const sustainMs = threshold.sustainSeconds * 1000;
  if (lastedMs < sustainMs) return hold(`scaling up once it lasts ${threshold.sustainSeconds} s`);
  if (counted.length >= ceiling) return hold(`at maxInstances ${ceiling}`);
  const starting = counted.filter((i) => i.state !== "RUNNING").length;
  if (starting > 0) return hold(`${starting} instance${starting === 1 ? " is" : "s are"} still starting`);
  const last = load.tracking.lastLoadStartMs;
  const cooldownMs = threshold.cooldownSeconds * 1000;
  if (last !== null && nowMs - last < cooldownMs) return hold(`cooldown of ${threshold.cooldownSeconds} s after the last start on load`);
  return {
    action: "SCALE",
    start: 1,
    stop: [],
    target: counted.length + 1,
    capped: false,
    message: `DYNAMIC: ${load.reading.breach} for ${Math.round(lastedMs / 1000)} s: one more instance`,
    trigger: "LOAD",
  };
}

/** Starts or stops to reach `target`; surplus goes in order: not yet RUNNING, fewest players, newest id. */
function resize(counted: readonly ScalingInstance[], target: number, policy: ScalingPolicy, message: string): ScalingDecision {
  if (counted.length < target) {
    const missing = target - counted.length;
    const start = Math.min(missing, policy.startsPerDecisionMax);
    return { action: "SCALE", start, stop: [], target, capped: start < missing, message };
  }
  const surplus = counted.length - target;
  const stop = [...counted]
    .sort((a, b) => rankForStop(a) - rankForStop(b) || a.playerCount - b.playerCount || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0))
    .slice(0, surplus)
    .map((i) => i.id);
  return { action: "SCALE", start: 0, stop, target, capped: false, message };
}

/**
 * STATIC: a slot an operator stopped counts as filled (nothing replaces it); surplus stops ids that
 * are not slots of the group first (as {@link resize} orders them), then the highest slots, so that
 * lowering minInstances from 3 to 2 stops `<group>-3` and keeps the slots 1 and 2.
 */
function resizeStatic(input: ScalingInput, counted: readonly ScalingInstance[], policy: ScalingPolicy): ScalingDecision {
  const { group } = input;
  const countedIds = new Set(counted.map((i) => i.id));
  const stoppedSlots = [...(input.stoppedByOperator ?? [])].filter((id) => !countedIds.has(id) && slotNumber(group.name, id) !== null).length;
  const filled = counted.length + stoppedSlots;
  const held = stoppedSlots > 0 ? ` (${stoppedSlots} stopped by an operator)` : "";
  const message = `STATIC: exactly ${group.minInstances}${held}`;
  if (filled <= group.minInstances) {
    const decision = resize(counted, group.minInstances - stoppedSlots, policy, message);
    return decision.action === "SCALE" ? { ...decision, target: group.minInstances } : decision;
  }
  const surplus = Math.min(counted.length, filled - group.minInstances);
  const notSlots = counted.filter((i) => slotNumber(group.name, i.id) === null);
  const ordered = [
    ...(resize(notSlots, 0, policy, message) as Extract<ScalingDecision, { action: "SCALE" }>).stop,
    ...counted
      .filter((i) => slotNumber(group.name, i.id) !== null)
      .sort((a, b) => (slotNumber(group.name, b.id) as number) - (slotNumber(group.name, a.id) as number))
      .map((i) => i.id),
  ];
  return { action: "SCALE", start: 0, stop: ordered.slice(0, surplus), target: group.minInstances, capped: false, message };
}

function rankForStop(instance: ScalingInstance): number {
  return instance.state === "RUNNING" ? 1 : 0;
}

/** The result of `POST /api/v1/groups/{group}/start`: how many instances were scheduled, and why not more. */
export interface ExplicitStartDecision {
  count: number;
  /** Set when nothing starts. */
  reason?: string;
}

/**
 * How many instances an explicit start schedules: STATIC fills up to minInstances; DYNAMIC fills up
 * to minInstances, or adds one while below maxInstances; MANUAL adds one while below maxInstances.
 * Nothing in maintenance or while paused by a crash loop.
 */
export function decideExplicitStart(group: ScalingGroup, instances: readonly ScalingInstance[], paused: boolean): ExplicitStartDecision {
  if (group.maintenance) return { count: 0, reason: `group ${group.name} is in maintenance` };
  if (paused) return { count: 0, reason: `group ${group.name} is paused after a crash loop; resume it first` };
  const live = instances.filter((i) => COUNTED_STATES.has(i.state)).length;
  const ceiling = Math.max(group.minInstances, group.maxInstances);
  let count: number;
  if (group.scalingMode === "STATIC") count = Math.max(0, group.minInstances - live);
  else if (group.scalingMode === "DYNAMIC" && live < group.minInstances) count = group.minInstances - live;
  else count = live < ceiling ? 1 : 0;
  if (count > 0) return { count };
  return {
    count: 0,
    reason: group.scalingMode === "STATIC" ? `STATIC group already has ${live} of ${group.minInstances}` : `group is at maxInstances ${ceiling}`,
  };
}
