/**
 * Keeps the shared placement view true, every reconcile interval (before the node queries): the
 * view is read again (a controller that restarted or took a scope over sees what the others see
 * within one interval), every instance supervised here has its reservation (an adopted instance
 * placed before the ledgers existed, or a key-value store that lost its data), and reservations
 * nobody will release are removed:
 *
 * - of a group scheduled here, one whose instance has no actor here;
 * - of a group that no longer exists;
 *
 * each only when its record, read again, is finished, gone, or elsewhere, and only once the claim
 * is older than `graceMs` (a claim is entered before its record is written). Reservations of
 * groups another controller schedules are that controller's to repair.
 */
import type { InstanceService } from "../domain/instances/instance-service.js";
import { FINISHED_STATES } from "../domain/instances/instance-schemas.js";
import type { Logger } from "../logs/types.js";
import type { Clock } from "../shared/clock.js";
import type { LiveInstances } from "./live-instances.js";
import type { Reservation } from "./placement-ledger.js";
import type { PlacementView } from "./placement-view.js";
import type { SupervisedInstances } from "./supervised-instances.js";

/** Reservations whose record one repair reads at most (the rest wait for the next round). */
export const repairRecordReadsMax = 1_000;

export interface PlacementRepairDeps {
  view: PlacementView;
  live: LiveInstances;
  supervised: SupervisedInstances;
  instances: Pick<InstanceService, "getDoc">;
  /** The names of the groups that exist. */
  groupNames(): Promise<Set<string>>;
  isOwned(group: string): boolean;
  clock: Clock;
  logger: Logger;
  /** A claim younger than this is never removed (its record may be on its way). */
  graceMs: number;
}

/** One repair of the shared placement view (see the module comment). */
export class PlacementRepair {
  constructor(private readonly deps: PlacementRepairDeps) {}

  async run(): Promise<void> {
    const { view, live, supervised, logger } = this.deps;
    await view.refresh();
    const missing: Reservation[] = [];
    const nowMs = this.deps.clock.nowMs();
    for (const id of supervised.ids()) {
      const instance = live.get(id);
      if (!instance || FINISHED_STATES.has(instance.state) || view.has(id)) continue;
      missing.push({ instanceId: id, group: instance.group, node: instance.node, port: instance.port, memoryMb: instance.memoryMb, claimedAtMs: nowMs });
    }
    if (missing.length > 0) {
      logger.warn(
        `Placement view: ${missing.length} running instance(s) had no reservation (${missing
          .slice(0, 5)
          .map((r) => r.instanceId)
          .join(", ")}); entered`,
      );
      await view.ensure(missing);
    }
    const groups = await this.deps.groupNames();
    const suspects = view
      .reservations()
      .filter((r) => nowMs - r.claimedAtMs >= this.deps.graceMs && (this.deps.isOwned(r.group) ? !supervised.has(r.instanceId) : !groups.has(r.group)))
      .slice(0, repairRecordReadsMax);
    const stale: Reservation[] = [];
    for (const r of suspects) {
      const doc = await this.deps.instances.getDoc(r.instanceId);
      if (!doc || FINISHED_STATES.has(doc.state) || doc.node !== r.node || doc.port !== r.port) stale.push(r);
    }
    if (stale.length === 0) return;
    logger.info(
      `Placement view: ${stale.length} reservation(s) of ended instances removed (${stale
        .slice(0, 5)
        .map((r) => r.instanceId)
        .join(", ")})`,
    );
    await view.forget(stale);
  }
}
