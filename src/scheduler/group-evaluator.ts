/**
 * One evaluation of a group: decide (scaling.ts), place each new instance (placement.ts) on the
 * shared placement view, claim the reservations in the machines' ledgers (placement-view.ts),
 * record them SCHEDULED and hand them to their instance actors; stops go to the instance actors.
 * Evaluations and explicit starts of one group never interleave. A placement failure is written on
 * the group record (`schedulingIssue`) and cleared by the next evaluation that needs no placement
 * or places. A node whose daemon refused a start of the group (its own port and memory check) is
 * left out of the group's placements for one evaluation interval, and the refusal is the issue.
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
import { START_FAILED_ISSUE } from "./crash-recorder.js";
import type { RevisionBuild, RevisionSource, RevisionStart } from "./instance-lifecycle.js";
import type { LiveInstance, LiveInstances } from "./live-instances.js";
import { recordNewInstances } from "./new-instance-records.js";
import type { Reservation } from "./placement-ledger.js";
import type { PlacementView } from "./placement-view.js";
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
  /** Every reservation on every node, whichever controller made it; claims go through it. */
  view: PlacementView;
  clock: Clock;
  logger: Logger;
  nodeListCacheMs: number;
  /** How long a node that refused a start of a group is left out of that group's placements. */
  refusalBackoffMs: number;
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
  /**
   * Whether a revision's catalog build can be started now (the controllers' build mirror): when not,
   * nothing is placed and the group's `schedulingIssue` says why (nothing starts, so nothing crashes).
   */
  buildCheck?(build: RevisionBuild): Promise<{ ok: true } | { ok: false; code: string; message: string }>;
  /** Composition planning failed: the revision could not be resolved or its build cannot be started (a download under way is not a failure). */
  compositionPlanningFailed?(): void;
}

/** Build checks that are not failures: the build is on its way. */
const BUILD_PENDING_CODES: ReadonlySet<string> = new Set(["BUILD_DOWNLOADING"]);

/** Rounds of place-and-claim in one evaluation: a round's refused claims (another controller was first) are placed again. */
export const claimRoundsMax = 4;
/** The whole view is read again before a placement failure is reported, at most this often. */
export const viewRefreshMinIntervalMs = 1_000;

/** Decides and carries out the scaling of groups. */
export class GroupEvaluator {
  private readonly perGroup = new KeyedMutex();
  private readonly idleSince = new Map<string, Map<string, number>>();
  private readonly loadTracking = new Map<string, LoadTracking>();
  /** Groups whose last evaluation left instances unplaced because start slots were full. */
  private readonly waitingForSlots = new Set<string>();
  /** `<group>\n<node>` → until when the node is left out of the group's placements (its daemon refused a start). */
  private readonly refusedUntil = new Map<string, number>();
  private nodeCache: { atMs: number; nodes: Promise<NodeRecord[]> } | null = null;
  private lastViewRefreshMs = -Infinity;

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
    for (const key of [...this.refusedUntil.keys()]) if (key.startsWith(`${name}\n`)) this.refusedUntil.delete(key);
  }

  /**
   * A node's daemon refused a start of the group for want of a port or memory (its own check, the
   * last line of defence behind the shared view): the group record says so, and the node is left
   * out of the group's placements for {@link GroupEvaluatorDeps.refusalBackoffMs}, so the next
   * evaluation does not send the same start to it again at once.
   */
  nodeRefused(name: string, nodeId: string, code: string, message: string): Promise<void> {
    const nowMs = this.deps.clock.nowMs();
    for (const [key, untilMs] of this.refusedUntil) if (untilMs <= nowMs) this.refusedUntil.delete(key);
    this.refusedUntil.set(`${name}\n${nodeId}`, nowMs + this.deps.refusalBackoffMs);
    return this.perGroup.run(name, async () => {
      const group = await this.deps.groups.getDoc(name);
      if (group) await this.setIssue(group, { code, message: `node ${nodeId} refused a start: ${message}` });
    });
  }

  private refusedRecently(group: string, nodeId: string): boolean {
    const untilMs = this.refusedUntil.get(`${group}\n${nodeId}`);
    return untilMs !== undefined && untilMs > this.deps.clock.nowMs();
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
      if (group.schedulingIssue) await this.clearIssue(group);
      return [];
    }
    // Composition planning: what the new instances are made of (revision, layers, build).
    const pinned = await this.resolveRevision(groupRecord, options.revision);
    if (pinned.memoryMb !== groupRecord.memoryMb) group = { ...groupRecord, memoryMb: pinned.memoryMb };
    if (pinned.build && this.deps.buildCheck) {
      const check = await this.deps.buildCheck(pinned.build);
      if (!check.ok) {
        if (!BUILD_PENDING_CODES.has(check.code)) this.deps.compositionPlanningFailed?.();
        await this.setIssue(group, check);
        return [];
      }
    }
    const nodes = await this.placementNodes();
    const capacityMb = new Map(nodes.map((n) => [n.id, n.totalMemoryMb]));
    const max = this.deps.startingPerNodeMax;
    const paced = options.paced && max > 0;
    const refused = (nodeId: string) => this.refusedRecently(group.name, nodeId);
    const request = { group, startSlotsFull: (nodeId: string) => (paced && this.deps.live.startingOn(nodeId) >= max) || refused(nodeId) };
    // Place and claim the whole decision (each placement is held in the view, so the next one sees
    // it), then record the instances together (the store commits concurrent writes in one batch),
    // then start actors. A claim another controller beat is placed again on the view its read refreshed.
    const batch: InstanceFields[] = [];
    /** The finished records a started slot replaces in the live view (put back if recording fails). */
    const replaced = new Map<string, LiveInstance>();
    let failure: PlacementFailure | HomeUnavailable | null = null;
    let waiting = false;
    let todo = Array.from({ length: count }, (_, i) => slots?.[i] ?? null);
    /** Placed in this view and put in the live view, claimed or not yet: undone if anything fails. */
    const placedHere: InstanceFields[] = [];
    /** Records left in place when recording failed (the scope's new owner claimed them). */
    const kept = new Set<string>();
    try {
      for (let round = 0; round < claimRoundsMax && todo.length > 0 && !signal.aborted; round++) {
        const placed: InstanceFields[] = [];
        const placedSlots: typeof todo = [];
        for (const slot of todo) {
          if (signal.aborted) break;
          const id = slot ? slot.id : `${group.name}-${randomBytes(4).toString("hex")}`;
          const home = slot?.home ? nodes.find((n) => n.id === slot.home) : undefined;
          if (slot?.home && !home && round === 0)
            this.deps.logger.warn(`Node ${slot.home} of ${id} is no longer registered: ${id} starts with a fresh directory wherever it fits`);
          // A static instance goes back to the node that holds its directory, and only there: when
          // that node cannot take it now, it waits (the group record says why) and the others go on.
          const result = await this.place(request, home ? [home] : nodes);
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
          if (previous && !replaced.has(id)) replaced.set(id, { ...previous });
          this.deps.view.hold(reservationOf(instance, this.deps.clock.nowMs()));
          this.deps.live.put(instance);
          placed.push(instance);
          placedHere.push(instance);
          placedSlots.push(slot);
        }
        const refusals = placed.length > 0 ? await this.claim(placed, capacityMb) : new Map<string, unknown>();
        todo = [];
        placed.forEach((instance, i) => {
          if (!refusals.has(instance.id)) return void batch.push(instance);
          this.deps.live.remove(instance.id);
          const previous = replaced.get(instance.id);
          if (previous) this.deps.live.put(previous);
          todo.push(placedSlots[i]);
        });
      }
      await recordNewInstances(this.deps.instances, batch, () => this.deps.ensureCurrent(group.name), kept);
    } catch (err) {
      for (const instance of placedHere) {
        this.deps.view.unhold(instance.id);
        this.deps.live.remove(instance.id);
      }
      for (const previous of replaced.values()) this.deps.live.put(previous);
      // Reservations claimed for records that were never written (or withdrawn) are freed now (the
      // repair of a later reconcile round would, after its grace). A record the new owner claimed
      // before it could be withdrawn runs under that owner: its reservation stays.
      const freed = batch.filter((i) => !kept.has(i.id));
      await Promise.all(freed.map((i) => this.deps.view.release(i.id, i.node).catch(() => undefined)));
      throw err;
    }
    // Claims beaten in every round wait for the next evaluation, like full start slots.
    if (todo.length > 0) waiting = true;
    for (const instance of batch) this.deps.instanceAdded(instance);
    const placed = batch.length;
    if (waiting) this.waitingForSlots.add(group.name);
    // A wait for a node that refused a start keeps the refusal as the issue.
    const waitsForRefused = waiting && nodes.some((n) => refused(n.id));
    if (failure) await this.setIssue(group, failure);
    else if ((placed === count || (waiting && !waitsForRefused)) && group.schedulingIssue) await this.clearIssue(group);
    if (placed > 0) {
      const rest = waiting ? ` (${count - placed} wait for start slots)` : "";
      this.deps.logger.info(`Scheduled ${placed} instance${placed === 1 ? "" : "s"} of group ${group.name}${rest}`);
    }
    return batch;
  }

  /**
   * One placement on the view. A failure that the view's age could explain (memory, ports) is
   * tried once more on every ledger read again, so a reservation freed on another controller never
   * shows as an issue here.
   */
  private async place(request: Parameters<typeof placeInstance>[0], nodes: readonly PlacementNode[]): Promise<ReturnType<typeof placeInstance>> {
    const result = placeInstance(request, nodes, this.deps.view.index);
    if (result.ok || (result.code !== "INSUFFICIENT_MEMORY" && result.code !== "PORTS_EXHAUSTED")) return result;
    const nowMs = this.deps.clock.nowMs();
    if (nowMs - this.lastViewRefreshMs < viewRefreshMinIntervalMs) return result;
    this.lastViewRefreshMs = nowMs;
    await this.deps.view.refresh();
    return placeInstance(request, nodes, this.deps.view.index);
  }

  /** Claims the placements' reservations; the refused ones by id (another controller took the port or memory first). */
  private async claim(placed: readonly InstanceFields[], capacityMb: ReadonlyMap<string, number>): Promise<Map<string, unknown>> {
    const nowMs = this.deps.clock.nowMs();
    const refusals = await this.deps.view.claim(
      placed.map((i) => reservationOf(i, nowMs)),
      (nodeId) => capacityMb.get(nodeId) ?? 0,
    );
    for (const [id, why] of refusals) this.deps.logger.info(`Placement of ${id} beaten by another controller: ${why.message}; placing it again`);
    return refusals;
  }

  private async resolveRevision(group: StoredGroup, requested: number | undefined) {
    if (!this.deps.revisions) return { revision: requested ?? 0, memoryMb: group.memoryMb, build: undefined };
    try {
      return await this.deps.revisions.resolve(group, requested);
    } catch (err) {
      this.deps.compositionPlanningFailed?.();
      throw err;
    }
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

  /**
   * Placement works again: a placement issue goes. A failed start's issue stays until an instance
   * of the group runs (crash-recorder.ts), whatever this evaluation read.
   */
  private async clearIssue(group: StoredGroup): Promise<void> {
    if (group.schedulingIssue?.code === START_FAILED_ISSUE) return;
    await this.deps.groups.setSchedulingState(group.name, { reviseIssue: (current) => (current?.code === START_FAILED_ISSUE ? undefined : null) });
  }

  private async setIssue(group: StoredGroup, failure: { code: string; message: string } | null): Promise<void> {
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

function reservationOf(instance: InstanceFields, claimedAtMs: number): Reservation {
  return { instanceId: instance.id, group: instance.group, node: instance.node, port: instance.port, memoryMb: instance.memoryMb, claimedAtMs };
}

/** A static slot's placement failure on the node that holds its directory, as the group record shows it. */
export type HomeUnavailable = { ok: false; code: "STATIC_NODE_UNAVAILABLE"; message: string; nodeId: string };

function homeUnavailable(id: string, home: PlacementNode, result: PlacementFailure): HomeUnavailable {
  const why = home.state !== "ONLINE" ? `the node is ${home.state}` : home.cordoned ? "the node is cordoned" : result.message;
  return { ok: false, code: "STATIC_NODE_UNAVAILABLE", message: `${id} waits for node ${home.id}, which holds its directory: ${why}`, nodeId: home.id };
}
