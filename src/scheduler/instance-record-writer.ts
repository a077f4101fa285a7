/**
 * Records follow the actors: every state an instance actor enters (seen through xstate inspection)
 * is written to its instance record — in order per instance — and published as
 * INSTANCE_STATE_CHANGED. A finished instance leaves its supervisor; a state that matters to
 * scaling tells the group actor.
 *
 * Every write here is fenced as one compare-and-set: the record is read with its revision, then the
 * scope's fencing check runs, then the write goes through only at the revision read. An owner that
 * stalls between its check and its write (and lost the scope meanwhile) cannot put back an older
 * state over the new owner's: the new owner claimed the record when it adopted it (a write), so
 * the stale write fails, reads again, and its next check refuses it (ScopeLostError).
 *
 * No state write goes backwards: a state earlier in the lifecycle than the recorded one (RUNNING ->
 * SCHEDULED), or any state over a finished record, is refused with a WARN and neither recorded nor
 * announced; this controller's views of the instance go back to the recorded state. The actors
 * only move forwards, so a refusal means two actors follow one instance (scope-lifecycle.ts).
 */
import type { InspectionEvent } from "xstate";
import type { GroupEvent } from "../../actors/group/transitions.js";
import type { InstanceService, StopRequest } from "../domain/instances/instance-service.js";
import { FINISHED_STATES, type InstanceState } from "../domain/instances/instance-schemas.js";
import { KeyedMutex } from "../domain/shared/keyed-mutex.js";
import { isoFromMs } from "../domain/shared/time.js";
import { EventTypes, type InstanceStateChangedPayload } from "../events/event-types.js";
import type { EventBus } from "../events/types.js";
import type { Logger } from "../logs/types.js";
import type { Clock } from "../shared/clock.js";
import { freezePoint } from "../shared/test-freeze.js";
import type { InstanceStateChange, InstanceStateListener } from "./instance-lifecycle.js";
import { STARTING_STATES, type LiveInstances } from "./live-instances.js";
import { ScopeLostError } from "./scopes.js";
import type { SupervisedInstances } from "./supervised-instances.js";

/** Listeners of instance state changes at once (a bound: each is called on every change). */
export const stateListenersMax = 16;

export interface InstanceRecordWriterDeps {
  instances: Pick<InstanceService, "update">;
  events: Pick<EventBus, "publish">;
  clock: Clock;
  logger: Logger;
  live: LiveInstances;
  supervised: SupervisedInstances;
  /** Fencing check of the group's scope; throws {@link ScopeLostError} when it moved. */
  ensureCurrent(group: string): Promise<void>;
  toGroup(group: string, event: GroupEvent): void;
  /** The record says STOPPED or CRASHED: the actor can go. */
  instanceFinished(group: string, instanceId: string): void;
  /** An instance left the starting states (a start slot on its node is free again). */
  startSlotFreed(): void;
  /** Runs background work whose failure is logged and whose end {@link SchedulerHost.settle} waits for. */
  track(work: Promise<unknown>): void;
}

/** Writes instance records as their actors move. */
export class InstanceRecordWriter {
  /** Per instance, the tail of its record writes: states land in the order the actor entered them. */
  private readonly recordWrites = new KeyedMutex();
  private readonly listeners = new Set<InstanceStateListener>();

  constructor(private readonly deps: InstanceRecordWriterDeps) {}

  /** The inspection callback of every supervisor: instance actors' new states become record writes. */
  observe(event: InspectionEvent): void {
    if (event.type !== "@xstate.snapshot") return;
    const id = (event.actorRef as { id?: unknown }).id;
    if (typeof id !== "string" || !id.startsWith("instance:")) return;
    const snapshot = event.snapshot as { value?: unknown; context?: { instanceId: string; group: string; node: string } };
    const state = snapshot.value;
    const context = snapshot.context;
    if (typeof state !== "string" || state === "CREATED" || !context) return;
    const instanceId = context.instanceId;
    const previous = this.deps.supervised.stateOf(instanceId);
    if (previous === undefined || previous === state) return;
    const next = state as InstanceState;
    this.deps.supervised.follow(instanceId, next);
    this.deps.live.setState(instanceId, next);
    if (STARTING_STATES.has(previous) && !STARTING_STATES.has(next)) this.deps.startSlotFreed();
    this.deps.track(this.writeState({ instanceId, group: context.group, node: context.node, from: previous, to: next }));
  }

  /**
   * The owner's player count of an instance: written after the state writes before it, fenced by
   * the group's scope like a state write ({@link ScopeLostError} when it moved: the new owner
   * writes the count).
   */
  savePlayerCount(instanceId: string, playerCount: number, fenced = true): Promise<void> {
    return this.recordWrites.run(instanceId, () =>
      this.deps.instances.update(instanceId, async (doc) => {
        if (!doc || FINISHED_STATES.has(doc.state) || doc.playerCount === playerCount) return { next: null, result: undefined };
        if (fenced) await this.deps.ensureCurrent(doc.group);
        return { next: { ...doc, playerCount }, result: undefined };
      }),
    );
  }

  /**
   * Makes a stop the owner is about to acknowledge durable: `stopRequested` on the record, in order
   * with the instance's state writes and fenced like them (throws {@link ScopeLostError} when the
   * group's scope moved). A force-stop is not weakened by a later graceful stop. False when the
   * record is gone or finished (nothing to stop).
   */
  requestStop(instanceId: string, group: string, kind: StopRequest): Promise<boolean> {
    return this.recordWrites.run(instanceId, () =>
      this.deps.instances.update(instanceId, async (doc) => {
        await this.deps.ensureCurrent(group);
        if (!doc || FINISHED_STATES.has(doc.state)) return { next: null, result: false };
        if (doc.stopRequested === "FORCE_STOP" || doc.stopRequested === kind) return { next: null, result: true };
        return { next: { ...doc, stopRequested: kind }, result: true };
      }),
    );
  }

  /** Calls `listener` with every state change written (or attempted) here, in order per instance. */
  onStateChange(listener: InstanceStateListener): () => void {
    if (this.listeners.size >= stateListenersMax) throw new Error(`at most ${stateListenersMax} instance state listeners`);
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private async writeState(change: InstanceStateChange): Promise<void> {
    const { instanceId, group, node, from, to } = change;
    const finished = FINISHED_STATES.has(to);
    try {
      const refusedOver = await this.recordWrites.run(instanceId, () =>
        this.deps.instances.update<InstanceState | null>(instanceId, async (doc) => {
          if (!doc) return { next: null, result: null };
          await this.deps.ensureCurrent(group);
          if (movesBackwards(doc.state, to)) return { next: null, result: doc.state };
          // Tests freeze the owner exactly here, between its check and its write (test-freeze.ts).
          freezePoint(`instance-record-write:${to}`);
          const nowIso = isoFromMs(this.deps.clock.nowMs());
          const next = { ...doc, state: to };
          if (to === "STARTING" && !doc.startedAt) next.startedAt = nowIso;
          if (finished) {
            next.stoppedAt = nowIso;
            next.playerCount = 0;
          }
          return { next, result: null };
        }),
      );
      if (refusedOver !== null) return this.refused(change, refusedOver);
    } catch (err) {
      // The group's lease moved to another controller, which owns the instance documents now.
      if (err instanceof ScopeLostError) return;
      this.deps.logger.error(`Recording state ${to} of instance ${instanceId} failed`, err);
    }
    this.deps.events.publish(EventTypes.INSTANCE_STATE_CHANGED, {
      instanceId,
      group,
      nodeId: node,
      oldState: from,
      newState: to,
    } satisfies InstanceStateChangedPayload);
    for (const listener of this.listeners) {
      try {
        listener(change);
      } catch (err) {
        this.deps.logger.error(`An instance state listener failed on ${instanceId} ${to}`, err);
      }
    }
    if (finished) this.deps.instanceFinished(group, instanceId);
    if (finished || to === "RUNNING" || to === "DRAINING" || to === "STOPPING") this.deps.toGroup(group, { type: "CHANGED" });
  }

  /** A backwards write was refused: said once per write, and the views that took it follow the record again. */
  private refused({ instanceId, from, to }: InstanceStateChange, recorded: InstanceState): void {
    this.deps.logger.warn(
      `Refused to record ${to} (from ${from}) for instance ${instanceId} over its recorded ${recorded}: an instance record never moves backwards`,
    );
    if (this.deps.supervised.stateOf(instanceId) !== to) return;
    this.deps.live.setState(instanceId, recorded);
    if (!FINISHED_STATES.has(recorded)) this.deps.supervised.follow(instanceId, recorded);
  }
}

/** Order of the states in an instance's life; the two finished states are last and equal. */
const LIFECYCLE_RANK: Record<InstanceState, number> = {
  SCHEDULED: 0,
  PREPARING: 1,
  STARTING: 2,
  RUNNING: 3,
  DRAINING: 4,
  STOPPING: 5,
  STOPPED: 6,
  CRASHED: 6,
};

/** Whether writing `to` over a record in `recorded` would move it backwards (a finished record takes no state). */
export function movesBackwards(recorded: InstanceState, to: InstanceState): boolean {
  if (FINISHED_STATES.has(recorded)) return recorded !== to;
  return LIFECYCLE_RANK[to] < LIFECYCLE_RANK[recorded];
}
