/**
 * One evaluation of a group: decide (scaling.ts), place each new instance (placement.ts), record
 * it SCHEDULED and hand it to its instance actor; stops go to the instance actors. Evaluations and
 * explicit starts of one group never interleave. A placement failure is written on the group
 * record (`schedulingIssue`) and cleared by the next evaluation that needs no placement or places.
 * A DYNAMIC group with `loadScaling` has its RUNNING instances' load samples read first.
 */
import { randomBytes } from "node:crypto";
import type { EvaluationOutput } from "../../actors/group/transitions.js";
import type { InstanceEvent } from "../../actors/instance/transitions.js";
import type { GroupService, StoredGroup } from "../domain/groups/group-service.js";
import type { SchedulingIssue } from "../domain/groups/group-schemas.js";
import type { InstanceFields, InstanceService } from "../domain/instances/instance-service.js";
import type { NodeRecord } from "../domain/nodes/node-schemas.js";
import type { NodeService } from "../domain/nodes/node-service.js";
import { KeyedMutex } from "../domain/shared/keyed-mutex.js";
import { isoFromMs } from "../domain/shared/time.js";
import type { Logger } from "../logs/types.js";
import type { Clock } from "../shared/clock.js";
import { notFound } from "../shared/errors.js";
import type { RevisionSource, RevisionStart } from "./instance-lifecycle.js";
import type { LiveInstance, LiveInstances } from "./live-instances.js";
import { recordNewInstances } from "./new-instance-records.js";
import { placeInstance, type PlacementFailure, type PlacementNode } from "./placement.js";
import { freeSlots } from "./static-slots.js";
import {
  decideExplicitStart,
  decideScaling,
  noLoadTracking,
  readLoad,
  trackIdle,
  trackLoad,
  type LoadSample,
  type LoadTracking,
  type ScalingInput,
  type ScalingInstance,
} from "./scaling.js";

export interface GroupEvaluatorDeps {
  groups: GroupService;
  instances: InstanceService;
  nodes: NodeService;
  live: LiveInstances;
  clock: Clock;
  logger: Logger;
  nodeListCacheMs: number;
  /**
   * Start pacing: at most this many instances of the groups scheduled here are starting (SCHEDULED,
   * PREPARING, STARTING) on one node at once; 0 means no limit. Explicit starts are not paced.
   */
  startingPerNodeMax: number;
  fencingTokenOf(group: string): number | null;
  /** Fencing check before a record is written; throws when the group's scope moved. */
  ensureCurrent(group: string): Promise<void>;
  /** A new instance was recorded SCHEDULED: start its actor. */
  instanceAdded(instance: InstanceFields): void;
  toInstance(instanceId: string, event: InstanceEvent): void;
  /** The node records placement just read (the host learns nodes it has not seen yet). */
  nodesSeen(nodes: readonly NodeRecord[]): void;
  /** Frozen revisions (deployments): new instances carry the group's current one; none: revision 0. */
  revisions?: Pick<RevisionSource, "resolve">;
  /** The latest load samples of these instances (those without a current one are left out); absent: no load scaling. */
  loadSamples?(instanceIds: readonly string[]): Promise<LoadSample[]>;
}

/** Decides and carries out the scaling of groups. */
export class GroupEvaluator {
  private readonly perGroup = new KeyedMutex();
  private readonly idleSince = new Map<string, Map<string, number>>();
  private readonly loadTracking = new Map<string, LoadTracking>();
  /** Groups whose last evaluation left instances unplaced because start slots were full. */
  private readonly waitingForSlots = new Set<string>();
  private nodeCache: { atMs: number; nodes: Promise<NodeRecord[]> } | null = null;

  constructor(private readonly deps: GroupEvaluatorDeps) {}

  /** The group actor's evaluation. */
  evaluate(name: string, signal: AbortSignal): Promise<EvaluationOutput> {
    return this.perGroup.run(name, async () => {
      const group = await this.deps.groups.getDoc(name);
      if (!group || signal.aborted) return { again: false };
      const nowMs = this.deps.clock.nowMs();
      const instances = this.deps.live.ofGroup(name);
      const idle = trackIdle(this.idleSince.get(name) ?? new Map(), instances, nowMs);
      this.idleSince.set(name, idle);
      if (!group.static && (group.stoppedInstances ?? []).length > 0) await this.deps.groups.setSchedulingState(name, { stoppedInstances: [] });
      const stoppedByOperator = new Set(group.static ? (group.stoppedInstances ?? []) : []);
      const load = await this.readLoad(group, instances, nowMs);
      const decision = decideScaling({ group, instances, paused: group.paused ?? false, nowMs, idleSinceMs: idle, stoppedByOperator, load });
      if (decision.action === "SKIP") return { again: false };
      const drains =
        group.scalingMode === "DYNAMIC" && decision.target >= group.minInstances && decision.target <= Math.max(group.minInstances, group.maxInstances);
      for (const id of decision.stop) this.deps.toInstance(id, { type: drains && this.deps.live.get(id)?.state === "RUNNING" ? "DRAIN" : "STOP" });
      const placed = (await this.schedule(group, decision.start, signal, { paced: true })).length;
      if (decision.trigger === "LOAD" && placed > 0 && load) {
        this.loadTracking.set(name, { ...load.tracking, lastLoadStartMs: nowMs });
        this.deps.logger.info(`Group ${name}: ${decision.message.replace(/^DYNAMIC: /, "")}`);
      }
      return { again: decision.capped && placed === decision.start };
    });
  }

  /** The load input of a DYNAMIC group with thresholds (its bookkeeping updated); undefined otherwise. */
  private async readLoad(group: StoredGroup, instances: readonly ScalingInstance[], nowMs: number): Promise<ScalingInput["load"]> {
    const threshold = group.loadScaling;
    if (group.scalingMode !== "DYNAMIC" || !threshold || !this.deps.loadSamples) {
      this.loadTracking.delete(group.name);
      return undefined;
    }
    const running = instances.filter((i) => i.state === "RUNNING").map((i) => i.id);
    let samples: LoadSample[] = [];
    try {
      if (running.length > 0) samples = await this.deps.loadSamples(running);
    } catch (err) {
      // Unknown load is read as no breach: the group keeps scaling on player fill.
      this.deps.logger.warn(`Group ${group.name}: load samples unavailable: ${(err as Error).message}`);
    }
    const reading = readLoad(threshold, instances, samples, nowMs);
    const tracking = trackLoad(this.loadTracking.get(group.name) ?? noLoadTracking, reading, nowMs);
    this.loadTracking.set(group.name, tracking);
    return { reading, tracking };
  }

  /** `POST /api/v1/groups/{group}/start`: what the scaling mode allows now, placed at once. */
  startExplicitly(name: string): Promise<{ count: number; reason?: string }> {
    return this.perGroup.run(name, async () => {
      const group = await this.deps.groups.getDoc(name);
      if (!group) throw notFound(`Group not found: ${name}`);
      const decision = decideExplicitStart(group, this.deps.live.ofGroup(name), group.paused ?? false);
      if (decision.count === 0) return decision;
      // Starting a STATIC group starts the slots operators stopped: they are no longer held.
      let started = group;
      if (group.static && (group.stoppedInstances ?? []).length > 0) {
        await this.deps.groups.setSchedulingState(name, { stoppedInstances: [] });
        started = { ...group, stoppedInstances: [] };
      }
      const placed = (await this.schedule(started, decision.count, new AbortController().signal, { paced: false })).length;
      if (placed === 0) return { count: 0, reason: (await this.deps.groups.getDoc(name))?.schedulingIssue?.message ?? this.notStartedReason(started) };
      return { count: placed };
    });
  }

  /**
   * One new instance of `revision` (the deployments seam, instance-lifecycle.ts): placed and
   * recorded like an explicit start, not paced; a STATIC group starts a free slot only.
   */
  startInstanceOfRevision(name: string, revision: number): Promise<RevisionStart> {
    return this.perGroup.run(name, async () => {
      const group = await this.deps.groups.getDoc(name);
      if (!group) throw notFound(`Group not found: ${name}`);
      const [instance] = await this.schedule(group, 1, new AbortController().signal, { paced: false, revision });
      if (instance) return { started: true, instanceId: instance.id, node: instance.node };
      return { started: false, reason: (await this.deps.groups.getDoc(name))?.schedulingIssue?.message ?? this.notStartedReason(group) };
    });
  }

  /** Forgets a deleted group's bookkeeping. */
  forget(name: string): void {
    this.idleSince.delete(name);
    this.loadTracking.delete(name);
    this.waitingForSlots.delete(name);
  }

  /**
   * A start slot was freed (an instance scheduled here left the starting states): the groups that
   * were waiting for one, to be evaluated again. The set is emptied; a group still waiting after
   * its evaluation joins it again.
   */
  takeGroupsWaitingForSlots(): string[] {
    if (this.waitingForSlots.size === 0) return [];
    const groups = [...this.waitingForSlots];
    this.waitingForSlots.clear();
    return groups;
  }

  /** The next placement reads the node records again. */
  invalidateNodes(): void {
    this.nodeCache = null;
  }

  /**
   * Places and records up to `count` new instances; returns those scheduled. `paced`: nodes whose
   * start slots are full take none now (the rest wait for a freed slot, not an issue). `revision`:
   * the deployment revision the new instances carry (the group's current revision when undefined;
   * its memory is what they reserve).
   */
  private async schedule(
    groupRecord: StoredGroup,
    wanted: number,
    signal: AbortSignal,
    options: { paced: boolean; revision?: number },
  ): Promise<InstanceFields[]> {
    this.waitingForSlots.delete(groupRecord.name);
    let group = groupRecord;
    // A STATIC group starts free slots only: one still stopping, or stopped by an operator, is not free.
    const slots = group.static
      ? freeSlots(group.name, group.minInstances, this.deps.live.ofGroup(group.name), new Set(group.stoppedInstances ?? []), wanted)
      : null;
    const count = slots ? slots.length : wanted;
    if (count === 0) {
      if (group.schedulingIssue) await this.setIssue(group, null);
      return [];
    }
    const pinned = this.deps.revisions
      ? await this.deps.revisions.resolve(groupRecord, options.revision)
      : { revision: options.revision ?? 0, memoryMb: groupRecord.memoryMb };
    if (pinned.memoryMb !== groupRecord.memoryMb) group = { ...groupRecord, memoryMb: pinned.memoryMb };
    const nodes = await this.placementNodes();
    const max = this.deps.startingPerNodeMax;
    const request = options.paced && max > 0 ? { group, startSlotsFull: (nodeId: string) => this.deps.live.startingOn(nodeId) >= max } : { group };
    // Place the whole decision first (each placement reserves in the index), then record the
    // instances together (the store commits concurrent writes in one batch), then start actors.
    const batch: InstanceFields[] = [];
    /** The finished records a started slot replaces in the live view (put back if recording fails). */
    const replaced: LiveInstance[] = [];
    let failure: PlacementFailure | HomeUnavailable | null = null;
    let waiting = false;
    for (let i = 0; i < count && !signal.aborted; i++) {
      const slot = slots?.[i];
      const id = slot ? slot.id : `${group.name}-${randomBytes(4).toString("hex")}`;
      const home = slot?.home ? nodes.find((n) => n.id === slot.home) : undefined;
      if (slot?.home && !home)
        this.deps.logger.warn(`Node ${slot.home} of ${id} is no longer registered: ${id} starts with a fresh directory wherever it fits`);
      // A static instance goes back to the node that holds its directory, and only there: when
      // that node cannot take it now, it waits (the group record says why) and the others go on.
      const result = home ? placeInstance(request, [home], this.deps.live.placement) : placeInstance(request, nodes, this.deps.live.placement);
      if (!result.ok) {
        if (result.code === "START_SLOTS_BUSY") waiting = true;
        else failure ??= home ? homeUnavailable(id, home, result) : result;
        if (home) continue;
        break;
      }
      const instance: InstanceFields = {
        id,
        group: group.name,
        node: result.nodeId,
        state: "SCHEDULED",
        port: result.port,
        playerCount: 0,
        memoryMb: group.memoryMb,
        startedAt: null,
        stoppedAt: null,
        deploymentRevision: pinned.revision,
        startId: randomBytes(12).toString("base64url"),
      };
      const previous = this.deps.live.get(id);
      if (previous) replaced.push({ ...previous });
      this.deps.live.put(instance);
      batch.push(instance);
    }
    try {
      await recordNewInstances(this.deps.instances, batch, () => this.deps.ensureCurrent(group.name));
    } catch (err) {
      for (const instance of batch) this.deps.live.remove(instance.id);
      for (const previous of replaced) this.deps.live.put(previous);
      throw err;
    }
    for (const instance of batch) this.deps.instanceAdded(instance);
    const placed = batch.length;
    if (waiting) this.waitingForSlots.add(group.name);
    if (failure) await this.setIssue(group, failure);
    else if ((placed === count || waiting) && group.schedulingIssue) await this.setIssue(group, null);
    if (placed > 0) {
      const rest = waiting ? ` (${count - placed} wait for start slots)` : "";
      this.deps.logger.info(`Scheduled ${placed} instance${placed === 1 ? "" : "s"} of group ${group.name}${rest}`);
    }
    return batch;
  }

  /** Why an explicit start placed nothing when no scheduling issue says it. */
  private notStartedReason(group: StoredGroup): string {
    if (!group.static) return "no instance could be placed";
    const stopping = this.deps.live.ofGroup(group.name).filter((i) => i.state === "STOPPING" || i.state === "DRAINING");
    return stopping.length > 0 ? `${stopping.map((i) => i.id).join(", ")} still stopping: started again once stopped` : "no instance could be placed";
  }

  private placementNodes(): Promise<NodeRecord[]> {
    const nowMs = this.deps.clock.nowMs();
    if (!this.nodeCache || nowMs - this.nodeCache.atMs > this.deps.nodeListCacheMs) {
      const nodes = this.deps.nodes.list().then((list) => {
        this.deps.nodesSeen(list);
        return list;
      });
      this.nodeCache = { atMs: nowMs, nodes };
      // A failed listing is not cached; callers get the rejection through the promise returned below.
      nodes.catch(() => (this.nodeCache = null));
    }
    return this.nodeCache.nodes;
  }

  private async setIssue(group: StoredGroup, failure: PlacementFailure | HomeUnavailable | null): Promise<void> {
    const issue: SchedulingIssue | null = failure
      ? {
          code: failure.code,
          message: failure.message,
          since: group.schedulingIssue?.code === failure.code ? group.schedulingIssue.since : isoFromMs(this.deps.clock.nowMs()),
        }
      : null;
    if (failure && group.schedulingIssue?.message !== failure.message) this.deps.logger.warn(`Group ${group.name} cannot start instances: ${failure.message}`);
    await this.deps.groups.setSchedulingState(group.name, { schedulingIssue: issue });
  }
}

export type { ScalingInstance };

/** A static slot's placement failure on the node that holds its directory, as the group record shows it. */
export type HomeUnavailable = { ok: false; code: "STATIC_NODE_UNAVAILABLE"; message: string; nodeId: string };

function homeUnavailable(id: string, home: PlacementNode, result: PlacementFailure): HomeUnavailable {
  const why = home.state !== "ONLINE" ? `the node is ${home.state}` : home.cordoned ? "the node is cordoned" : result.message;
  return { ok: false, code: "STATIC_NODE_UNAVAILABLE", message: `${id} waits for node ${home.id}, which holds its directory: ${why}`, nodeId: home.id };
}
