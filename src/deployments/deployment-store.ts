/**
 * The durable state of deployments, in four collections with one writer each, so that no write
 * overwrites another's fields:
 *
 * - `group_revisions`: frozen revisions (`<group>:<revision>`), immutable once inserted;
 * - `deployments`: what an operator asked for (settings, changes) and the operator's controls
 *   (pause, promote, rollback) — written by the routes, on any controller;
 * - `deployment_progress`: what the rollout did and intends (phase, terminal state, health
 *   bookkeeping, retired instances, the intent the group's owner executes) — written only by the
 *   `deployment-reconciler` singleton;
 * - `deployment_locks`: one document per group with an active deployment (`_id` = group): its
 *   insert is the atomic "one active deployment per group" check.
 */
import type { Collection, Doc, DocumentStore } from "../store/ports.js";
import type { DeploymentChanges, DeploymentPhase, DeploymentSettings, DeploymentState, Revision } from "./deployment-schemas.js";

export const REVISIONS_COLLECTION = "group_revisions";
export const DEPLOYMENTS_COLLECTION = "deployments";
export const PROGRESS_COLLECTION = "deployment_progress";
export const LOCKS_COLLECTION = "deployment_locks";

export type StoredRevision = Revision & Doc;

/** Operator controls of a deployment (written by the routes). */
export interface DeploymentControl {
  paused: boolean;
  promoted: boolean;
  rollback: { restore: boolean; at: string; by: string } | null;
}

export type StoredDeployment = Doc & {
  group: string;
  revision: number;
  previousRevision: number;
  settings: DeploymentSettings;
  changes: DeploymentChanges;
  control: DeploymentControl;
  createdBy: string;
  createdAt: string;
  updatedAt: string;
};

/** What the group's owner is asked to do (level-based: it converges, so doing it twice does nothing more). */
export interface DeploymentIntent {
  /** The revision new instances start from. */
  revision: number;
  /** Counted (SCHEDULED … RUNNING) instances of `revision` the group should have now. */
  wantNew: number;
  /** Counted instances of the group, old and new, at most (desired + surge). */
  maxTotal: number;
  /** Old instances to drain and stop (those still counted). */
  retire: string[];
}

/** Health bookkeeping of one instance of the deployment's revision. */
export interface TrackedInstance {
  /** When the reconciler first saw it RUNNING (ISO). */
  runningSince?: string;
  /** Passed the health gate once. */
  healthy?: boolean;
  crashed?: boolean;
}

export type StoredProgress = Doc & {
  group: string;
  revision: number;
  /** Terminal state once decided; null while the rollout runs (the operator controls decide IN_PROGRESS or PAUSED). */
  state: Extract<DeploymentState, "COMPLETED" | "ROLLED_BACK" | "FAILED"> | null;
  phase: DeploymentPhase;
  desiredInstances: number | null;
  canaryCount: number | null;
  /** When the canaries were all healthy (ISO); the promotion timeout counts from here. */
  canaryReadyAt: string | null;
  promotedAt: string | null;
  reason: string | null;
  finishedAt: string | null;
  /** Old instances this deployment retired, in order; append-only, so none is retired twice. */
  retired: string[];
  instances: Record<string, TrackedInstance>;
  intent: DeploymentIntent | null;
  updatedAt: string;
  /** The reconciler lease's fencing token it was written under; a holder with an older one never overwrites it. */
  fencingToken?: number;
};

export type StoredLock = Doc & { group: string; revision: number; createdAt: string };

/** The id of revision `revision` of `group` (also the id of its deployment and progress). */
export const revisionId = (group: string, revision: number): string => `${group}:${revision}`;

/** The collections, opened once. */
export interface DeploymentCollections {
  revisions: Collection<StoredRevision>;
  deployments: Collection<StoredDeployment>;
  progress: Collection<StoredProgress>;
  locks: Collection<StoredLock>;
}

export function openDeploymentCollections(store: DocumentStore): DeploymentCollections {
  return {
    revisions: store.collection<StoredRevision>(REVISIONS_COLLECTION, { indexes: [{ name: "group_revisions_group", field: "group" }] }),
    deployments: store.collection<StoredDeployment>(DEPLOYMENTS_COLLECTION, { indexes: [{ name: "deployments_group", field: "group" }] }),
    progress: store.collection<StoredProgress>(PROGRESS_COLLECTION, { indexes: [{ name: "deployment_progress_group", field: "group" }] }),
    locks: store.collection<StoredLock>(LOCKS_COLLECTION),
  };
}

/** A fresh progress document (before the reconciler's first step). */
export function initialProgress(deployment: StoredDeployment, nowIso: string): StoredProgress {
  return {
    _id: deployment._id,
    group: deployment.group,
    revision: deployment.revision,
    state: null,
    phase: "ROLLING",
    desiredInstances: null,
    canaryCount: null,
    canaryReadyAt: null,
    promotedAt: null,
    reason: null,
    finishedAt: null,
    retired: [],
    instances: {},
    intent: null,
    updatedAt: nowIso,
  };
}

/** The state an operator sees: the reconciler's terminal state, else the operator's controls. */
export function effectiveState(deployment: StoredDeployment, progress: StoredProgress | null): DeploymentState {
  if (progress?.state) return progress.state;
  if (deployment.control.rollback) return "ROLLED_BACK";
  return deployment.control.paused ? "PAUSED" : "IN_PROGRESS";
}
