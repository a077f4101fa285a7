/**
 * Bounds and timings of the scheduler host and its parts. The controller fills them from
 * controller.yml (`scheduler.*`); tests shorten them.
 */
import type { InstanceTimeouts } from "../../actors/instance/instance-machine.js";
import type { NodeTimeouts } from "../../actors/node/node-machine.js";
import { configDefaults } from "../config/schema.js";

/** Bounds and timings of the host; every field has a default. */
export interface SchedulerTuning {
  /** scheduler.evaluationIntervalSeconds × 1000. */
  evaluationIntervalMs: number;
  evaluationTimeoutMs: number;
  instanceTimeouts: Partial<InstanceTimeouts>;
  nodeTimeouts: Partial<NodeTimeouts>;
  /** How long STOPPED and CRASHED instance records stay listed before they are deleted. */
  finishedRetentionMs: number;
  /** How long the node list read for placement is reused. */
  nodeListCacheMs: number;
  /** scheduler.maxStartingPerNode: instances starting at once per node (0: no limit). */
  startingPerNodeMax: number;
  /** scheduler.reconcileIntervalSeconds × 1000: how often the owned instances are checked against their nodes. */
  reconcileIntervalMs: number;
  /** How often the owner reads its instances' player counts from the registry (player-count-sync.ts). */
  playerCountSyncIntervalMs: number;
}

/** Defaults: the configured keys' defaults from the schema; finished instances stay visible for ten minutes. */
export const defaultSchedulerTuning: SchedulerTuning = {
  evaluationIntervalMs: configDefaults.scheduler.evaluationIntervalSeconds * 1000,
  evaluationTimeoutMs: 30_000,
  instanceTimeouts: {},
  nodeTimeouts: {},
  finishedRetentionMs: 10 * 60_000,
  nodeListCacheMs: 1_000,
  startingPerNodeMax: configDefaults.scheduler.maxStartingPerNode,
  reconcileIntervalMs: configDefaults.scheduler.reconcileIntervalSeconds * 1000,
  playerCountSyncIntervalMs: 2_000,
};
