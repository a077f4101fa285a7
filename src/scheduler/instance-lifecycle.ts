/**
 * The seam for deployments (rolling replacement of a group's instances by a new revision, a later
 * feature): what a rollout may ask of the scheduler, and nothing about how a rollout proceeds.
 * {@link SchedulerHost} implements it for the groups this controller schedules; the rollout decides
 * order, surge and health gates on top of it.
 */
import type { StoredGroup } from "../domain/groups/group-types.js";
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

/** What a frozen revision starts an instance from (the fields of the daemon's spec it decides). */
export interface RevisionSpec {
  platform: string;
  jarFile: string;
  memoryMb: number;
  /** Ordered layers, each pinned to a template content hash ("" for a template that did not exist). */
  templates: { name: string; hash: string }[];
  /** The group's platformVersion when frozen; absent or null: none named. */
  platformVersion?: string | null;
  /** The catalog build frozen with the revision (src/catalog); absent or null: none. */
  build?: RevisionBuild | null;
}

/** A catalog build as a revision froze it. */
export interface RevisionBuild {
  version: string;
  sha256: string;
  downloadUrl: string;
}

/** A revision as placement needs it: its number, the memory its instances reserve and its build. */
export interface ResolvedRevision {
  revision: number;
  memoryMb: number;
  /** The catalog build its instances start (it must be fetchable before they are placed); absent or null: none. */
  build?: RevisionBuild | null;
}

/**
 * Where revisions come from (src/deployments): the revision new instances of a group start from,
 * and what a recorded revision starts. Without one, instances carry revision 0 and start from the
 * group record as it is at dispatch.
 */
export interface RevisionSource {
  /** `requested`, or the group's current revision when undefined (frozen from the group on first use). */
  resolve(group: StoredGroup, requested?: number): Promise<ResolvedRevision>;
  /** What `revision` of `group` starts; null when it is not recorded (the group record applies then). */
  specOf(group: string, revision: number): Promise<RevisionSpec | null>;
}
