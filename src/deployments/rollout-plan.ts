/**
 * One step of a rolling replacement, pure: the group's instances (old and new revision, their
 * states and health) and the rollout's bounds in; how many new-revision instances the group should
 * have now, how many instances it may have at most, and which old instances to retire out.
 * Level-based: the same input gives the same step, and a step carried out twice does no more than
 * once, which is what lets another controller continue a rollout from the stored state.
 *
 * The bounds (docs/decisions/deployments.md, "Rolling replacement"):
 * - at most `desired + surge` counted instances (SCHEDULED … RUNNING) at any time;
 * - at least `desired - maxUnavailable` available ones (old RUNNING, or new past the health gate);
 * - at most `batchSize` new instances not yet healthy, and at most `batchSize` old ones retiring
 *   (draining or stopping) at once;
 * - during the canary phase only `targetNew` new instances, and as many old ones kept beside them.
 */
import type { InstanceState } from "../domain/instances/instance-schemas.js";
import type { StoredGroup } from "../domain/groups/group-types.js";
import type { DeploymentSettings } from "./deployment-schemas.js";

/** The bounds one rollout works within, after the group's rules are applied (see {@link rolloutBounds}). */
export interface RolloutBounds {
  surge: number;
  maxUnavailable: number;
  batchSize: number;
}

/**
 * The bounds of a rollout of `group` steering to `desired` instances:
 * - RECREATE: every old instance at once (no surge, all unavailable);
 * - a STATIC group rolls in place, one slot at a time (no surge: a slot has one id);
 * - DYNAMIC: no surge beyond maxInstances (the group's own evaluation would stop the extra ones);
 * - neither surge nor unavailability allowed would never progress: one instance at a time is.
 */
export function rolloutBounds(
  group: Pick<StoredGroup, "scalingMode" | "static" | "maxInstances" | "minInstances">,
  settings: DeploymentSettings,
  desired: number,
): RolloutBounds {
  if (settings.strategy === "RECREATE") return { surge: 0, maxUnavailable: Math.max(1, desired), batchSize: Math.max(1, desired) };
  if (group.static || group.scalingMode === "STATIC") return { surge: 0, maxUnavailable: 1, batchSize: 1 };
  let surge = settings.maxSurge;
  if (group.scalingMode === "DYNAMIC") surge = Math.min(surge, Math.max(0, Math.max(group.minInstances, group.maxInstances) - desired));
  const maxUnavailable = surge === 0 && settings.maxUnavailable === 0 ? 1 : settings.maxUnavailable;
  return { surge, maxUnavailable, batchSize: settings.batchSize };
}

/** An old-revision instance still counted (SCHEDULED … RUNNING). */
export interface OldInstance {
  id: string;
  state: InstanceState;
  playerCount: number;
}

export interface RolloutInput {
  /** The instance count the rollout steers to. */
  desired: number;
  /** How many new-revision instances this phase wants (desired; the canary count while in CANARY). */
  targetNew: number;
  bounds: RolloutBounds;
  /** Counted new-revision instances. */
  newCounted: number;
  /** New-revision instances that passed the health gate (RUNNING). */
  newHealthy: number;
  /** Old-revision instances still counted and not yet retired. */
  old: readonly OldInstance[];
  /** Old-revision instances retired and still draining or stopping. */
  oldRetiring: number;
}

export interface RolloutStep {
  wantNew: number;
  maxTotal: number;
  /** Old instances to retire now, in order. */
  retire: string[];
}

/** Old instances in the order they are retired: not serving first, then fewest players, then id. */
function retireOrder(a: OldInstance, b: OldInstance): number {
  const serving = (i: OldInstance) => (i.state === "RUNNING" ? 1 : 0);
  return serving(a) - serving(b) || a.playerCount - b.playerCount || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}

/** The next step of a rollout (see the module comment). */
export function planRolloutStep(input: RolloutInput): RolloutStep {
  const { desired, bounds } = input;
  const maxTotal = desired + bounds.surge;
  const oldCount = input.old.length;

  // New instances: up to the phase's target, within the total, at most a batch of them not yet healthy.
  const wantNew = Math.max(0, Math.min(input.targetNew, maxTotal - oldCount, input.newHealthy + bounds.batchSize));

  // Old instances: those the phase no longer needs, at most a batch retiring at once, never below
  // the availability floor.
  const keepOld = Math.max(0, desired - input.targetNew);
  const retirable = Math.max(0, Math.min(oldCount - keepOld, bounds.batchSize - input.oldRetiring));
  const ordered = [...input.old].sort(retireOrder);
  const floor = desired - bounds.maxUnavailable;
  let available = input.newHealthy + input.old.filter((i) => i.state === "RUNNING").length;
  const retire: string[] = [];
  for (const instance of ordered) {
    if (retire.length >= retirable) break;
    if (instance.state === "RUNNING") {
      if (available - 1 < floor) break;
      available--;
    }
    retire.push(instance.id);
  }
  return { wantNew, maxTotal, retire };
}
