/**
 * Module lifecycle states and their transitions (spec document 3, "States and transitions", which
 * names ACTIVE, RELOADING and a failed state; the rest is decided in docs/decisions/modules.md).
 * Pure: the runtime asks {@link assertTransition} before every change, so an illegal one is a bug
 * that fails loudly, not a state nobody meant.
 *
 *   LOADING     the worker starts; load and registerRoutes run
 *   UNRESOLVED  loaded with routes, not started: a required capability has no provider in range
 *   STARTING    the start hook runs
 *   ACTIVE      started, required capabilities resolved; routes served
 *   RELOADING   the reload fast path of a reloadable module (same worker): reload, registerRoutes
 *   UPGRADING   stop and unload of the old version, then load, upgrade, registerRoutes of the new
 *   STOPPING    stop and unload before removal (uninstall, controller shutdown)
 *   FAILED      a hook threw, or the worker hung, crashed or ran out of heap; no routes
 */
import { assert } from "../../shared/errors.js";

export const MODULE_STATES = ["LOADING", "UNRESOLVED", "STARTING", "ACTIVE", "RELOADING", "UPGRADING", "STOPPING", "FAILED"] as const;
export type ModuleState = (typeof MODULE_STATES)[number];

/** Allowed transitions: from → the states it may go to. */
export const MODULE_TRANSITIONS: Readonly<Record<ModuleState, readonly ModuleState[]>> = {
  LOADING: ["UNRESOLVED", "STARTING", "STOPPING", "FAILED"],
  UNRESOLVED: ["STARTING", "RELOADING", "UPGRADING", "STOPPING", "FAILED"],
  STARTING: ["ACTIVE", "STOPPING", "FAILED"],
  ACTIVE: ["UNRESOLVED", "RELOADING", "UPGRADING", "STOPPING", "FAILED"],
  RELOADING: ["ACTIVE", "UNRESOLVED", "STOPPING", "FAILED"],
  UPGRADING: ["UNRESOLVED", "STARTING", "STOPPING", "FAILED"],
  STOPPING: ["FAILED"],
  FAILED: ["LOADING", "UPGRADING", "STOPPING"],
};

/** Throws (an assertion: a bug) unless `from` may become `to`. */
export function assertTransition(moduleId: string, from: ModuleState, to: ModuleState): void {
  assert(MODULE_TRANSITIONS[from].includes(to), `module ${moduleId}: no transition ${from} -> ${to}`);
}

/** States in which the module's routes are kept (served only when ACTIVE; 503 otherwise). */
export const ROUTED_STATES: ReadonlySet<ModuleState> = new Set(["UNRESOLVED", "STARTING", "ACTIVE", "RELOADING"]);
