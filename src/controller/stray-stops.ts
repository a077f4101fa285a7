/**
 * Stopping instances that run on a daemon but that no live record names (after a restore brought
 * back older records), with the group's highest fencing token so that no daemon refuses the stop as
 * stale.
 */
import { stopUnrecordedInstances } from "../backup/unrecorded-instances.js";
import { groupResource, leaseTokenKey } from "../coordination/keys.js";
import type { FencingHighWater } from "../coordination/fencing-high-water.js";
import type { InstanceService } from "../domain/instances/instance-service.js";
import { FINISHED_STATES } from "../domain/instances/instance-schemas.js";
import type { NodeService } from "../domain/nodes/node-service.js";
import type { Logger } from "../logs/types.js";
import type { KvStore } from "../store/ports.js";
import type { DaemonLink } from "../scheduler/scheduler-host.js";
import { LOCAL_SCOPE_TOKEN } from "../scheduler/scopes.js";

/**
 * The highest of a group's lease tokens (counter or durable mark: no token above it was ever
 * issued); the development profile's constant token without one.
 */
export function groupTokenCeiling(kv: KvStore, highWater: FencingHighWater): (group: string) => Promise<number> {
  return async (group) =>
    Math.max(Number(await kv.get(leaseTokenKey(groupResource(group)))) || 0, await highWater.highest(groupResource(group))) || LOCAL_SCOPE_TOKEN;
}

export interface StrayStopOptions {
  daemons: DaemonLink;
  nodes: Pick<NodeService, "list">;
  instances: Pick<InstanceService, "findDocs">;
  fencingToken(group: string): Promise<number>;
  logger: Logger;
}

/** The stop of every instance on a reachable node that no live record names. */
export function strayInstanceStop(options: StrayStopOptions): () => Promise<number> {
  const { daemons, nodes, instances } = options;
  return () =>
    stopUnrecordedInstances({
      nodes: async () => (await nodes.list()).filter((node) => node.state !== "OFFLINE").map((node) => node.id),
      listInstances: async (nodeId) => {
        const result = await daemons.sendCommand(nodeId, { type: "list_instances", body: {} }).catch(() => null);
        return result?.ok ? (result.instances ?? []) : null;
      },
      liveRecords: async () => new Map((await instances.findDocs()).filter((doc) => !FINISHED_STATES.has(doc.state)).map((doc) => [doc.id, doc.node])),
      fencingToken: options.fencingToken,
      forceStop: async (nodeId, group, instanceId, fencingToken) => {
        const result = await daemons
          .sendCommand(nodeId, { type: "force_stop_instance", body: { group, fencing_token: fencingToken, instance_id: instanceId } })
          .catch(() => null);
        return result !== null && (result.ok || result.error_code === "UNKNOWN_INSTANCE");
      },
      logger: options.logger,
    });
}
