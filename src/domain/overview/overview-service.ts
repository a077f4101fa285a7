/** The overview record (spec document 1): counts across nodes, instances, players and groups. */
import { Type, type Static } from "@sinclair/typebox";
import type { GroupService } from "../groups/group-service.js";
import type { InstanceService } from "../instances/instance-service.js";
import type { NodeService } from "../nodes/node-service.js";

/** The overview record (GET /api/v1/overview). */
export const OverviewSchema = Type.Object({
  /** Registered nodes, whatever their state. */
  nodeCount: Type.Integer(),
  /** Instances neither STOPPED nor CRASHED. */
  instanceCount: Type.Integer(),
  /** Players on those instances. */
  playerCount: Type.Integer(),
  groupCount: Type.Integer(),
});
/** The overview record. */
export type Overview = Static<typeof OverviewSchema>;

/** Computes the overview from the other services. */
export class OverviewService {
  constructor(
    private readonly groups: Pick<GroupService, "count">,
    private readonly instances: Pick<InstanceService, "liveTotals">,
    private readonly nodes: Pick<NodeService, "count">,
    /** Distinct players online (the player registry); the sum of the live instances' counts without it. */
    private readonly players?: { onlineCount(): Promise<number> },
  ) {}

  /** Counts, read concurrently from the three services. */
  async get(): Promise<Overview> {
    const [nodeCount, totals, groupCount, online] = await Promise.all([
      this.nodes.count(),
      this.instances.liveTotals(),
      this.groups.count(),
      this.players ? this.players.onlineCount() : null,
    ]);
    return { nodeCount, instanceCount: totals.instanceCount, playerCount: online ?? totals.playerCount, groupCount };
  }
}
