/**
 * The instances a deployment shows (`GET …/deployments/{revision}`), from what the rollout
 * recorded. A finished deployment shows its own history only: the instances of its revision the
 * rollout tracked (NEW) and the old ones it retired (OLD, retired), each with the state its record
 * has now (GONE once the record was swept), so a later rollout's instances never appear in an
 * older one. A running deployment shows those and every live instance of the group. A NEW
 * instance carries when it was first seen RUNNING and when it passes the health gate.
 */
import type { StoredInstance } from "../domain/instances/instance-service.js";
import { FINISHED_STATES } from "../domain/instances/instance-schemas.js";
import type { DeploymentInstance } from "./deployment-schemas.js";
import type { StoredDeployment, StoredProgress } from "./deployment-store.js";

/** The state shown for an instance whose record no longer exists. */
export const GONE_STATE = "GONE";

/** The deployment's instances, sorted by id (see the module comment). */
export function deploymentInstances(
  doc: StoredDeployment,
  progress: StoredProgress | null,
  records: readonly StoredInstance[],
  finished: boolean,
): DeploymentInstance[] {
  const tracked = progress?.instances ?? {};
  const retired = new Set(progress?.retired ?? []);
  const byId = new Map(records.map((r) => [r.id, r]));
  const ids = new Set<string>([...Object.keys(tracked), ...retired]);
  if (!finished) for (const r of records) if (!FINISHED_STATES.has(r.state)) ids.add(r.id);
  const gateMs = doc.settings.healthGate ? doc.settings.minHealthySeconds * 1000 : 0;
  return [...ids].sort().map((id) => {
    const record = byId.get(id);
    const isNew = Object.hasOwn(tracked, id) || record?.deploymentRevision === doc.revision;
    const runningSince = isNew ? (tracked[id]?.runningSince ?? null) : null;
    return {
      id,
      node: record?.node ?? "",
      state: record?.state ?? GONE_STATE,
      deploymentRevision: record?.deploymentRevision ?? (isNew ? doc.revision : doc.previousRevision),
      role: isNew ? ("NEW" as const) : ("OLD" as const),
      healthy: isNew && (tracked[id]?.healthy ?? false),
      retired: !isNew && retired.has(id),
      playerCount: record?.playerCount ?? 0,
      runningSince,
      healthyAt: runningSince === null ? null : new Date(Date.parse(runningSince) + gateMs).toISOString(),
    };
  });
}
