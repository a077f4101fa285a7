/**
 * New instance records, fenced. A record that does not exist yet has no revision to compare
 * against, so the fencing of a new record is in three steps: the scope's check, the inserts (a
 * STATIC slot's finished record is replaced at the revision read), and the check again. When the
 * second check fails (the owner stalled and the scope moved meanwhile), or a write fails, the
 * records just written are withdrawn, each at the revision it was written with: deleted, or the
 * slot's previous record put back. A withdrawal that finds the record written since leaves it:
 * the new owner claimed it when it adopted the scope (record-claims.ts) and supervises it now.
 * Either way no record is left that nobody supervises, and no stale owner starts an actor for one.
 * The ids of the records left in place (claimed, or a withdrawal that failed) go to `kept`: their
 * placement reservations are the new owner's now and must not be released by the writer.
 */
import type { InstanceFields, InstanceService, StoredInstance } from "../domain/instances/instance-service.js";
import { FINISHED_STATES } from "../domain/instances/instance-schemas.js";
import { DuplicateKeyError, RevisionConflictError } from "../store/ports.js";

/** Instance records written at once by one evaluation (a bound on concurrent store writes). */
export const saveBatchInstancesMax = 100;

/** One record written: its revision, and the finished record it replaced (a STATIC slot). */
interface Written {
  id: string;
  rev: string;
  replaced: StoredInstance | null;
}

/**
 * Records `batch` (new instances, SCHEDULED) for the group whose scope `ensureCurrent` checks;
 * throws (after withdrawing what it wrote) when the scope moved or a write failed. A record written
 * and then not withdrawn (the new owner claimed it) has its id added to `kept`.
 */
export async function recordNewInstances(
  instances: Pick<InstanceService, "getRevisioned" | "insertNew" | "saveIf" | "removeIf">,
  batch: readonly InstanceFields[],
  ensureCurrent: () => Promise<void>,
  kept?: Set<string>,
): Promise<void> {
  if (batch.length === 0) return;
  await ensureCurrent();
  const written: Written[] = [];
  try {
    for (let from = 0; from < batch.length; from += saveBatchInstancesMax) {
      const results = await Promise.allSettled(batch.slice(from, from + saveBatchInstancesMax).map((instance) => record(instances, instance)));
      for (const result of results) if (result.status === "fulfilled") written.push(result.value);
      const failed = results.find((result) => result.status === "rejected");
      if (failed) throw failed.reason;
    }
    await ensureCurrent();
  } catch (error) {
    const withdrawn = await Promise.all(written.map((entry) => withdraw(instances, entry)));
    written.forEach((entry, i) => {
      if (!withdrawn[i]) kept?.add(entry.id);
    });
    throw error;
  }
}

async function record(instances: Pick<InstanceService, "getRevisioned" | "insertNew" | "saveIf">, instance: InstanceFields): Promise<Written> {
  try {
    return { id: instance.id, rev: await instances.insertNew(instance), replaced: null };
  } catch (error) {
    if (!(error instanceof DuplicateKeyError && error.key === instance.id)) throw error;
  }
  const previous = await instances.getRevisioned(instance.id);
  if (!previous) throw new RevisionConflictError("instances", instance.id, "(none)");
  // Only a finished STATIC slot is started again under its id; a live record there is someone else's.
  if (!FINISHED_STATES.has(previous.doc.state)) throw new RevisionConflictError("instances", instance.id, previous.rev);
  return { id: instance.id, rev: await instances.saveIf(instance, previous.rev), replaced: previous.doc };
}

/** True when the record was withdrawn; false when it was left (claimed by the new owner, or the store is down). */
async function withdraw(instances: Pick<InstanceService, "saveIf" | "removeIf">, { id, rev, replaced }: Written): Promise<boolean> {
  try {
    if (replaced) await instances.saveIf(replaced, rev);
    else await instances.removeIf(id, rev);
    return true;
  } catch {
    // Claimed by the new owner (which supervises it now), or the store is down: nothing more to do here.
    return false;
  }
}
