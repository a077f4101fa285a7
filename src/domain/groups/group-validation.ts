/** Cross-field rules of a group, checked on create and again after a PATCH is merged. */
import { validationError } from "../../shared/errors.js";
import type { StoredGroup } from "./group-types.js";

/**
 * Throws 422 VALIDATION_ERROR naming the first field that breaks a rule. `changed` (the keys a
 * PATCH set) picks which side of a cross-field rule to name: the one the caller touched.
 */
export function validateGroupInvariants(group: StoredGroup, changed?: ReadonlySet<string>): void {
  if (group.minInstances > group.maxInstances) {
    const bounds = `(${group.minInstances} > ${group.maxInstances})`;
    if (changed?.has("maxInstances") && !changed.has("minInstances")) {
      throw validationError(`maxInstances: must not be below minInstances ${bounds}`);
    }
    throw validationError(`minInstances: must not exceed maxInstances ${bounds}`);
  }
  if (group.portRange.start > group.portRange.end) {
    throw validationError(`portRange.start: must not exceed portRange.end (${group.portRange.start} > ${group.portRange.end})`);
  }
  if (group.memoryMb <= 0) throw validationError("memoryMb: must be greater than 0");
  if (group.parent !== null && group.parent === group.name) throw validationError("parent: a group cannot be its own parent");
  const load = group.loadScaling;
  if (load && load.minTps === undefined && load.maxMsptAvg === undefined) {
    throw validationError("loadScaling: must set minTps, maxMsptAvg or both (null removes load scaling)");
  }
}
