/**
 * The seam for deployments (rolling replacement of a group's instances by a new revision, a later
 * feature): what a rollout may ask of the scheduler, and nothing about how a rollout proceeds.
 * {@link SchedulerHost} implements it for the groups this controller schedules; the rollout decides
 * order, surge and health gates on top of it.
 */
import type { InstanceState } from "../domain/instances/instance-schemas.js";

/** One state an instance actor entered, as its record was written. */
export interface InstanceStateChange {
  instanceId: string;
  group: string;
  node: string;
  from: InstanceState;
  to: InstanceState;
}

export type InstanceStateListener = (change: InstanceStateChange) => void;

/** What starting one instance of a revision came to. */
export type RevisionStart =
  | { started: true; instanceId: string; node: string }
  /** Nothing placed: the group's scheduling issue, or why the group's rules allow no instance now. */
  | { started: false; reason: string };

/** What a rollout asks of the scheduler. */
export interface InstanceLifecycle {
  /**
   * Places and records one new instance of `group` carrying `deploymentRevision: revision`, and
   * starts its actor, as an explicit start does (not paced; a STATIC group starts a free slot
   * only). The group's own evaluations keep applying its bounds, so a rollout retires an old
   * instance for each new one it starts.
   */
  startInstanceOfRevision(group: string, revision: number): Promise<RevisionStart>;
  /** DRAIN (players leave first, bounded by drainTimeout) or STOP one supervised instance. */
  retireInstance(instanceId: string, how: "DRAIN" | "STOP"): void;
  /** Every state change of the instances scheduled here, in order per instance; returns the unsubscribe. */
  onInstanceState(listener: InstanceStateListener): () => void;
}
