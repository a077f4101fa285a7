/**
 * After a restore, the processes the restored records do not know are stopped: instances of groups
 * created after the backup, instances a scale-up started since, anything whose record the restore
 * replaced. It runs on the restoring controller while the cluster is in maintenance (no controller
 * holds a scope, so nothing else commands the daemons), asks every node that is not OFFLINE what it
 * runs (`list_instances`) and force-stops each live instance without a live record on that node,
 * under the group's current fencing-token counter, which is at least any token the daemon has seen.
 * Restored records whose process is gone are left to their next owner's reconciliation (LOST, then
 * replaced), as after any failover.
 */
import type { Logger } from "../logs/types.js";
import type { InstanceStateReport } from "../wire/daemon-proto.js";

/** Nodes asked at once. */
const NODES_IN_FLIGHT_MAX = 8;

export interface UnrecordedInstancesDeps {
  /** Nodes that may run something (not OFFLINE). */
  nodes(): Promise<string[]>;
  /** What a node runs now and ran recently, or null when it does not answer. */
  listInstances(nodeId: string): Promise<InstanceStateReport[] | null>;
  /** The node of every live instance record. */
  liveRecords(): Promise<Map<string, string>>;
  fencingToken(group: string): Promise<number>;
  /** True when the daemon took the force-stop (or no longer had the instance). */
  forceStop(nodeId: string, group: string, instanceId: string, fencingToken: number): Promise<boolean>;
  logger: Logger;
}

/** Force-stops every live process without a live record on its node; answers how many were stopped. */
export async function stopUnrecordedInstances(deps: UnrecordedInstancesDeps): Promise<number> {
  const records = await deps.liveRecords();
  const nodes = await deps.nodes();
  let stopped = 0;
  for (let at = 0; at < nodes.length; at += NODES_IN_FLIGHT_MAX) {
    await Promise.all(
      nodes.slice(at, at + NODES_IN_FLIGHT_MAX).map(async (nodeId) => {
        const listed = await deps.listInstances(nodeId);
        if (!listed) {
          deps.logger.warn(`Node ${nodeId} did not answer after the restore: what it runs is left to the scheduler's reconciliation`);
          return;
        }
        for (const report of listed) {
          if (report.state === "STOPPED" || report.state === "CRASHED") continue;
          if (records.get(report.instance_id) === nodeId) continue;
          const token = await deps.fencingToken(report.group);
          deps.logger.warn(`Node ${nodeId} runs ${report.instance_id} of ${report.group}, which the restored records do not hold: force-stopping it`);
          if (await deps.forceStop(nodeId, report.group, report.instance_id, token)) stopped++;
        }
      }),
    );
  }
  return stopped;
}
