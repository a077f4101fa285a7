/**
 * The instances whose actors run here, with the last state each entered as this controller wrote
 * (or adopted) it. Several parts read it: the report router routes only to supervised instances, an
 * operator's stop goes to the actor when there is one, a reconnected node's SCHEDULED instances are
 * dispatched again. The scope lifecycle adds and drops entries; the record writer moves states.
 */
import type { InstanceState } from "../domain/instances/instance-schemas.js";

export class SupervisedInstances {
  private readonly states = new Map<string, InstanceState>();

  /** An actor runs for `instanceId` here, in `state` (adopted from its record, or just created). */
  follow(instanceId: string, state: InstanceState): void {
    this.states.set(instanceId, state);
  }

  /** Its actor stopped here (finished, or the scope was lost). */
  forget(instanceId: string): void {
    this.states.delete(instanceId);
  }

  has(instanceId: string): boolean {
    return this.states.has(instanceId);
  }

  /** The last state recorded for a supervised instance, undefined for the others. */
  stateOf(instanceId: string): InstanceState | undefined {
    return this.states.get(instanceId);
  }

  /** The supervised instance ids. */
  ids(): IterableIterator<string> {
    return this.states.keys();
  }

  get size(): number {
    return this.states.size;
  }
}
