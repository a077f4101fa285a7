/**
 * The scheduler's in-memory view of the instances of the groups it owns: the fields placement and
 * scaling read (node, port, memory, state, players), kept in step with every record the scheduler
 * writes, plus the placement index over them. Built from the store when a scope is acquired, so an
 * evaluation never scans the instance collection.
 */
import type { InstanceFields } from "../domain/instances/instance-service.js";
import { FINISHED_STATES, type InstanceState } from "../domain/instances/instance-schemas.js";
import { PlacementIndex } from "./placement.js";

/** What the scheduler keeps of one instance. */
export type LiveInstance = Pick<InstanceFields, "id" | "group" | "node" | "port" | "memoryMb" | "state" | "playerCount">;

/** Instances by id and by group, with the placement index of the live ones. */
export class LiveInstances {
  private readonly byId = new Map<string, LiveInstance>();
  private readonly idsByGroup = new Map<string, Set<string>>();
  /** The machine of each node (its reported host); nodes on one machine share its ports. */
  private readonly nodeHosts = new Map<string, string>();
  /** Reservations of every live instance known here (all groups), for placement. */
  readonly placement = new PlacementIndex((nodeId) => this.nodeHosts.get(nodeId) ?? nodeId);

  /** Records the host a node reported (its machine). */
  setNodeHost(nodeId: string, host: string): void {
    this.nodeHosts.set(nodeId, host);
  }

  /** Records an instance (new or adopted). Finished instances are not indexed for placement. */
  put(instance: LiveInstance): void {
    this.remove(instance.id);
    const copy = { ...instance };
    this.byId.set(copy.id, copy);
    let ids = this.idsByGroup.get(copy.group);
    if (!ids) {
      ids = new Set();
      this.idsByGroup.set(copy.group, ids);
    }
    ids.add(copy.id);
    this.placement.add(copy);
  }

  get(id: string): LiveInstance | undefined {
    return this.byId.get(id);
  }

  /** The instances of one group, in id order. */
  ofGroup(group: string): LiveInstance[] {
    const ids = this.idsByGroup.get(group);
    if (!ids) return [];
    return [...ids].sort().map((id) => this.byId.get(id) as LiveInstance);
  }

  /** The live instances placed on one node. */
  onNode(node: string): LiveInstance[] {
    return [...this.byId.values()].filter((i) => i.node === node && !FINISHED_STATES.has(i.state));
  }

  /** Changes the state; a finished state frees the instance's reservation. */
  setState(id: string, state: InstanceState): void {
    const current = this.byId.get(id);
    if (!current || current.state === state) return;
    const wasLive = !FINISHED_STATES.has(current.state);
    current.state = state;
    if (wasLive && FINISHED_STATES.has(state)) this.placement.remove(current);
  }

  setPlayerCount(id: string, playerCount: number): void {
    const current = this.byId.get(id);
    if (current) current.playerCount = playerCount;
  }

  /** Forgets an instance entirely. */
  remove(id: string): void {
    const current = this.byId.get(id);
    if (!current) return;
    if (!FINISHED_STATES.has(current.state)) this.placement.remove(current);
    this.byId.delete(id);
    const ids = this.idsByGroup.get(current.group);
    ids?.delete(id);
    if (ids && ids.size === 0) this.idsByGroup.delete(current.group);
  }

  /** Forgets every instance of a group (its scope was lost). */
  removeGroup(group: string): void {
    for (const instance of this.ofGroup(group)) this.remove(instance.id);
  }

  get size(): number {
    return this.byId.size;
  }
}
