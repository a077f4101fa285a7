/**
 * Scope lifecycle: one supervisor per scope this controller owns, with a group actor per group and
 * an instance actor per live instance. Acquiring a scope reads its groups and instances, claims the
 * live records (record-claims.ts: a write each, so the previous owner's late writes fail) and
 * adopts them in their recorded state; losing it stops its actors in one transition (the
 * processes keep running; the next owner adopts them). An adopted instance whose record holds a
 * requested stop has it completed (the previous owner acknowledged it and may have died before it
 * went out). This part also holds the fencing token of each owned scope and routes events to the
 * actors.
 */
import { createActor, type Actor, type InspectionEvent } from "xstate";
import type { GroupTimings } from "../../actors/group/group-machine.js";
import type { GroupEvent } from "../../actors/group/transitions.js";
import type { InstanceAdoptableState, InstanceEvent } from "../../actors/instance/transitions.js";
import type { ScopeGroup, ScopeInstance } from "../../actors/supervisor/supervisor-machine.js";
import type { GroupService, StoredGroup } from "../domain/groups/group-service.js";
import type { InstanceFields, InstanceService, StopRequest } from "../domain/instances/instance-service.js";
import { FINISHED_STATES } from "../domain/instances/instance-schemas.js";
import type { Logger } from "../logs/types.js";
import type { Clock } from "../shared/clock.js";
import { actorClock } from "./actor-clock.js";
import { provideSupervisor, type GroupEffectsPort, type InstanceEffectsPort } from "./actor-effects.js";
import type { LiveInstances } from "./live-instances.js";
import type { SchedulerTuning } from "./scheduler-tuning.js";
import { ScopeLostError, type ScopeOwnership } from "./scopes.js";
import { claimLiveRecords } from "./record-claims.js";
import type { SupervisedInstances } from "./supervised-instances.js";

type SupervisorActor = Actor<ReturnType<typeof provideSupervisor>>;

export interface ScopeLifecycleDeps {
  groups: Pick<GroupService, "getDoc" | "listDocs">;
  instances: Pick<InstanceService, "findRevisioned" | "saveIf" | "update">;
  scopes: Pick<ScopeOwnership, "scopeOf" | "ensureCurrent">;
  live: LiveInstances;
  supervised: SupervisedInstances;
  clock: Clock;
  logger: Logger;
  tuning: Pick<SchedulerTuning, "instanceTimeouts" | "evaluationIntervalMs" | "evaluationTimeoutMs">;
  /** The effects of the actors a supervisor runs. */
  effects: { instances: InstanceEffectsPort; groups: GroupEffectsPort };
  /** Every snapshot of every actor of every supervisor (the record writer follows them). */
  inspect(event: InspectionEvent): void;
  /** An adopted instance's record holds a stop the previous owner acknowledged: carry it out. */
  completeStop(instance: Pick<InstanceFields, "id" | "group" | "node" | "state">, kind: StopRequest): void;
  /** An instance was adopted DRAINING: its players still have to be moved (the previous owner may have died mid-drain). */
  adoptedDraining(instance: Pick<InstanceFields, "id" | "group">): void;
}

/** The supervisors of the owned scopes, and the way events reach their actors. */
export class ScopeLifecycle {
  private readonly supervisors = new Map<string, SupervisorActor>();
  private readonly fencingTokens = new Map<string, number>();
  /**
   * Per scope being acquired or owned, the number of its latest acquisition (never reused; a loss
   * removes the entry). An adoption goes on after its reads only while the number is still its
   * own. The fencing token alone cannot tell: a scope lost and acquired again with the same token
   * (the lease keeper gave it up at its local deadline while the store still held it) during an
   * adoption's reads let both adoptions through, and the first supervisor was left running beside
   * the second with its own actors and timers: its actor of an instance adopted SCHEDULED
   * dispatched again after the dispatch timeout and wrote SCHEDULED over the RUNNING record the
   * other actor had written.
   */
  private readonly generations = new Map<string, number>();
  private lastGeneration = 0;
  private stopped = false;

  constructor(private readonly deps: ScopeLifecycleDeps) {}

  /** The scope is ours with `fencingToken`: adopt its groups and live instances (or take the new token). */
  async acquired(scope: string, fencingToken: number): Promise<void> {
    const existing = this.supervisors.get(scope);
    this.fencingTokens.set(scope, fencingToken);
    if (existing?.getSnapshot().value === "OWNING") {
      existing.send({ type: "SCOPE_ACQUIRED", fencingToken, groups: [], instances: [] });
      return;
    }
    const generation = this.nextGeneration(scope);
    const groups = await this.groupsOfScope(scope);
    // The scope of a group that no longer exists is held only while its instances live on (its
    // owner died while stopping them, or they ran on a lost node): they are adopted and stopped.
    const deleted = groups.length === 0 && scope.startsWith("group:") ? scope.slice("group:".length) : null;
    const orphans = deleted === null ? [] : [{ name: deleted, static: false }];
    const read: { group: { name: string; static: boolean }; docs: InstanceFields[] }[] = [];
    try {
      // Each live record is claimed (written again at the revision read): a stale owner's prepared write then fails.
      for (const group of [...groups, ...orphans]) {
        const found = await this.deps.instances.findRevisioned({ group: group.name });
        read.push({ group, docs: await claimLiveRecords(this.deps.instances, found, (g) => this.ensureCurrent(g)) });
      }
    } catch (err) {
      if (err instanceof ScopeLostError) return; // moved on again while being adopted: the next owner adopts
      throw err;
    }
    // Lost (or taken again with another token) while the records were read: nothing is adopted.
    // The live view and the supervised instances change only below, with no await in between, so
    // a scope lost during the reads leaves nothing behind.
    if (this.fencingTokens.get(scope) !== fencingToken || this.generations.get(scope) !== generation || this.stopped) return;
    if (this.supervisors.has(scope)) {
      // Cannot happen while every acquisition and loss moves the generation; if it ever does, the
      // older supervisor's actors must not keep running beside the new ones.
      this.deps.logger.warn(`Scope ${scope} was adopted twice: the earlier supervisor and its actors are stopped`);
      this.lost(scope);
      this.fencingTokens.set(scope, fencingToken);
      this.generations.set(scope, generation);
    }
    const adopted: ScopeInstance[] = [];
    const stops: InstanceFields[] = [];
    const draining: InstanceFields[] = [];
    for (const { group, docs } of read) {
      // The view of a group another controller scheduled may hold instances that finished (or were
      // deleted) meanwhile: the records read now replace it, or they would count towards the group.
      const current = new Set(docs.filter((doc) => group.static || !FINISHED_STATES.has(doc.state)).map((doc) => doc.id));
      for (const stale of this.deps.live.ofGroup(group.name)) if (!current.has(stale.id)) this.deps.live.remove(stale.id);
      for (const doc of docs) {
        if (FINISHED_STATES.has(doc.state)) {
          // A finished STATIC instance is a slot to refill: its record names the node of its directory.
          if (group.static) this.deps.live.put(doc);
          continue;
        }
        this.deps.live.put(doc);
        adopted.push({
          instanceId: doc.id,
          group: doc.group,
          node: doc.node,
          adoptState: doc.state as InstanceAdoptableState,
          timeouts: this.deps.tuning.instanceTimeouts,
        });
        this.deps.supervised.follow(doc.id, doc.state);
        if (deleted !== null) stops.push({ ...doc, stopRequested: doc.stopRequested ?? "STOP" });
        else if (doc.stopRequested) stops.push(doc);
        else if (doc.state === "DRAINING") draining.push(doc);
      }
    }
    const supervisor = this.createSupervisor(scope);
    supervisor.send({ type: "SCOPE_ACQUIRED", fencingToken, groups: groups.map((g) => this.scopeGroup(g)), instances: adopted });
    this.deps.logger.info(`Scheduling scope ${scope} (fencing token ${fencingToken}): ${groups.length} groups, ${adopted.length} live instances adopted`);
    if (deleted !== null && adopted.length > 0) this.deps.logger.warn(`Group ${deleted} no longer exists: stopping its ${adopted.length} live instance(s)`);
    for (const doc of stops) {
      this.deps.logger.info(`Completing the ${doc.stopRequested} of ${doc.id} (${doc.state}) requested before ${scope} changed hands`);
      this.deps.completeStop(doc, doc.stopRequested!);
    }
    for (const doc of draining) this.deps.adoptedDraining(doc);
  }

  /** The scope is no longer ours: its actors stop at once, nothing more is written for it. */
  lost(scope: string): void {
    this.fencingTokens.delete(scope);
    this.generations.delete(scope);
    const supervisor = this.supervisors.get(scope);
    if (!supervisor) return;
    const children = { ...supervisor.getSnapshot().context.instances };
    supervisor.send({ type: "SCOPE_LOST" });
    // A scope acquired again gets a fresh supervisor; a deleted group's leaves nothing behind.
    supervisor.stop();
    this.supervisors.delete(scope);
    for (const id of Object.keys(children)) this.deps.supervised.forget(id);
    this.deps.logger.warn(`Lost scheduling scope ${scope}: its actors are stopped; the processes keep running`);
  }

  /** Every owned scope is given up at once (a restore replaces the records under the actors). */
  releaseAll(): void {
    for (const scope of new Set([...this.supervisors.keys(), ...this.fencingTokens.keys()])) this.lost(scope);
  }

  /** A group was created: its scope's supervisor, when owned, starts its group actor. */
  async groupCreated(name: string): Promise<void> {
    const supervisor = this.supervisorOf(name);
    if (!supervisor || supervisor.getSnapshot().value !== "OWNING") return;
    const doc = await this.deps.groups.getDoc(name);
    if (doc) supervisor.send({ type: "GROUP_ADDED", group: this.scopeGroup(doc) });
  }

  /** A group was deleted: its group actor stops (its instances' actors stop them first). */
  groupRemoved(name: string): void {
    this.supervisorOf(name)?.send({ type: "GROUP_REMOVED", group: name });
  }

  /** A new instance was recorded SCHEDULED: its actor starts (and dispatches it). */
  instanceAdded(instance: InstanceFields): void {
    // Already adopted (an evaluation that outlived a loss of the scope recorded it before the
    // adoption read it): the actor that runs knows a newer state than SCHEDULED.
    if (this.deps.supervised.has(instance.id)) return;
    this.deps.live.put(instance);
    this.deps.supervised.follow(instance.id, instance.state);
    this.supervisorOf(instance.group)?.send({
      type: "INSTANCE_ADDED",
      instance: { instanceId: instance.id, group: instance.group, node: instance.node, timeouts: this.deps.tuning.instanceTimeouts },
    });
  }

  /** An instance actor reached STOPPED or CRASHED and its record says so: let it go. */
  instanceFinished(group: string, instanceId: string): void {
    this.deps.supervised.forget(instanceId);
    this.supervisorOf(group)?.send({ type: "INSTANCE_FINISHED", instanceId });
  }

  toGroup(group: string, event: GroupEvent): void {
    this.supervisorOf(group)?.send({ type: "TO_GROUP", group, event });
  }

  toInstance(instanceId: string, event: InstanceEvent): void {
    const live = this.deps.live.get(instanceId);
    if (!live) return;
    this.supervisorOf(live.group)?.send({ type: "TO_INSTANCE", instanceId, event });
  }

  /** Every group actor here evaluates again (a node came back or has room again). */
  changedEverywhere(): void {
    for (const supervisor of this.supervisors.values()) {
      for (const group of supervisor.getSnapshot().context.groups) supervisor.send({ type: "TO_GROUP", group, event: { type: "CHANGED" } });
    }
  }

  /** The fencing token of a group's scope while owned, else null. */
  fencingTokenOf(group: string): number | null {
    return this.fencingTokens.get(this.deps.scopes.scopeOf(group)) ?? null;
  }

  /** Whether any scope is owned here. */
  ownsAnything(): boolean {
    return this.fencingTokens.size > 0;
  }

  isOwned(group: string): boolean {
    return this.fencingTokenOf(group) !== null;
  }

  /** Fencing check before a record write: throws {@link ScopeLostError} when the group's scope moved. */
  async ensureCurrent(group: string): Promise<void> {
    const scope = this.deps.scopes.scopeOf(group);
    const token = this.fencingTokens.get(scope);
    if (token === undefined) throw new ScopeLostError(scope);
    await this.deps.scopes.ensureCurrent(scope, token);
  }

  /** Stops every supervisor (the processes keep running); nothing is adopted afterwards. */
  stop(): void {
    this.stopped = true;
    for (const supervisor of this.supervisors.values()) supervisor.stop();
    this.supervisors.clear();
  }

  private nextGeneration(scope: string): number {
    this.generations.set(scope, ++this.lastGeneration);
    return this.lastGeneration;
  }

  private supervisorOf(group: string): SupervisorActor | undefined {
    return this.supervisors.get(this.deps.scopes.scopeOf(group));
  }

  /** The groups of a scope: a `group:<name>` scope holds that group alone. */
  private async groupsOfScope(scope: string): Promise<StoredGroup[]> {
    if (scope.startsWith("group:")) {
      const doc = await this.deps.groups.getDoc(scope.slice("group:".length));
      return doc && this.deps.scopes.scopeOf(doc.name) === scope ? [doc] : [];
    }
    return (await this.deps.groups.listDocs()).filter((g) => this.deps.scopes.scopeOf(g.name) === scope);
  }

  private createSupervisor(scope: string): SupervisorActor {
    const supervisor = createActor(provideSupervisor({ ...this.deps.effects, scopeAcquired: () => undefined, scopeLost: () => undefined }), {
      input: { scope },
      clock: actorClock(this.deps.clock),
      inspect: (event) => this.deps.inspect(event),
    });
    supervisor.start();
    this.supervisors.set(scope, supervisor);
    return supervisor;
  }

  private scopeGroup(group: StoredGroup): ScopeGroup {
    const timings: Partial<GroupTimings> = {
      evaluationIntervalMs: this.deps.tuning.evaluationIntervalMs,
      evaluationTimeoutMs: this.deps.tuning.evaluationTimeoutMs,
    };
    return { group: group.name, maintenance: group.maintenance, paused: group.paused ?? false, timings };
  }
}
