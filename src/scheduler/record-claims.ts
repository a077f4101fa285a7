/**
 * A controller that takes a scope over claims the live records it adopts: each is written once
 * (unchanged) at the revision just read, after the scope's fencing check. From then on, any write
 * the previous owner prepared on an earlier read fails its compare-and-set, even when it passed its
 * own fencing check before the scope moved; and an instance the previous owner recorded just
 * before it lost the scope either is claimed here (so this controller supervises it) or is gone
 * (the previous owner withdrew it: new-instance-records.ts). That closes the window a check
 * followed by a write leaves open.
 */
import type { InstanceService, StoredInstance } from "../domain/instances/instance-service.js";
import { FINISHED_STATES } from "../domain/instances/instance-schemas.js";
import { RevisionConflictError, type Revisioned } from "../store/ports.js";

/** Records claimed at once (a bound on concurrent store writes during an adoption). */
export const claimBatchMax = 64;

/**
 * Claims every record of `found` that is not finished; answers the records as claimed (a record
 * that finished meanwhile is answered as it is now, one that was deleted is left out). Throws
 * what `ensureCurrent` throws when the scope moved again.
 */
export async function claimLiveRecords(
  instances: Pick<InstanceService, "saveIf" | "update">,
  found: readonly Revisioned<StoredInstance>[],
  ensureCurrent: (group: string) => Promise<void>,
): Promise<StoredInstance[]> {
  const claimed: StoredInstance[] = [];
  for (let at = 0; at < found.length; at += claimBatchMax) {
    const batch = await Promise.all(found.slice(at, at + claimBatchMax).map((entry) => claimOne(instances, entry, ensureCurrent)));
    for (const doc of batch) if (doc) claimed.push(doc);
  }
  return claimed;
}

async function claimOne(
  instances: Pick<InstanceService, "saveIf" | "update">,
  { doc, rev }: Revisioned<StoredInstance>,
  ensureCurrent: (group: string) => Promise<void>,
): Promise<StoredInstance | null> {
  if (FINISHED_STATES.has(doc.state)) return doc;
  await ensureCurrent(doc.group);
  try {
    await instances.saveIf(doc, rev);
    return doc;
  } catch (error) {
    if (!(error instanceof RevisionConflictError)) throw error;
  }
  // Written since it was read (the previous owner's last write landed first): claim what is there now.
  return instances.update(doc.id, async (current) => {
    if (!current || FINISHED_STATES.has(current.state)) return { next: null, result: current };
    await ensureCurrent(current.group);
    return { next: current, result: current };
  });
}
