/**
 * The scheduler's in-memory view of the instances of the groups it owns: the fields scaling and
 * the parts read (node, port, memory, state, players), kept in step with every record the scheduler
 * writes. Built from the store when a scope is acquired, so an evaluation never scans the instance
 * collection. Reservations of every group, whichever controller owns it, are the shared placement
 * view's (placement-view.ts), not this one's.
 */
import type { InstanceFields } from "../domain/instances/instance-service.js";
import { FINISHED_STATES, type InstanceState } from "../domain/instances/instance-schemas.js";

/** States of an instance that is starting: placed but not yet RUNNING (start pacing counts them). */
export const STARTING_STATES: ReadonlySet<InstanceState> = new Set<InstanceState>(["SCHEDULED", "PREPARING", "STARTING"]);

/** What the scheduler keeps of one instance. */
export type LiveInstance = Pick<InstanceFields, "id" | "group" | "node" | "port" | "memoryMb" | "state" | "playerCount">;

/** Instances by id and by group, with the placement index of the live ones. */
export class LiveInstances {
  private readonly byId = new Map<string, LiveInstance>();
  private readonly idsByGroup = new Map<string, Set<string>>();
  /** Instances in {@link STARTING_STATES} per node. */
  private readonly startingByNode = new Map<string, number>();

  /** Records an instance (new or adopted). */
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
    if (STARTING_STATES.has(copy.state)) this.countStarting(copy.node, 1);
  }

  /** Instances placed on `node` and not yet RUNNING (nor finished). */
  startingOn(node: string): number {
    return this.startingByNode.get(node) ?? 0;
  }

  private countStarting(node: string, delta: number): void {
    const next = (this.startingByNode.get(node) ?? 0) + delta;
    if (next > 0) this.startingByNode.set(node, next);
    else this.startingByNode.delete(node);
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

  /** Changes the state. */
  setState(id: string, state: InstanceState): void {
    const current = this.byId.get(id);
    if (!current || current.state === state) return;
    const wasStarting = STARTING_STATES.has(current.state);
    current.state = state;
    if (wasStarting !== STARTING_STATES.has(state)) this.countStarting(current.node, wasStarting ? -1 : 1);
  }

  setPlayerCount(id: string, playerCount: number): void {
    const current = this.byId.get(id);
    if (current) current.playerCount = playerCount;
  }

  /** Forgets an instance entirely. */
  remove(id: string): void {
    const current = this.byId.get(id);
    if (!current) return;
    if (STARTING_STATES.has(current.state)) this.countStarting(current.node, -1);
    this.byId.delete(id);
    const ids = this.idsByGroup.get(current.group);
    ids?.delete(id);
    if (ids && ids.size === 0) this.idsByGroup.delete(current.group);
  }

  /** Forgets every instance of a group (its scope was lost). */
  removeGroup(group: string): void {
    for (const instance of this.ofGroup(group)) this.remove(instance.id);
  }

  /** Forgets every instance (the records are read again after a restore replaced them). */
  clear(): void {
    for (const id of [...this.byId.keys()]) this.remove(id);
  }

  get size(): number {
    return this.byId.size;
  }
}
