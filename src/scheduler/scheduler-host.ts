/**
 * The scheduler host: runs the actors of `actors/` against the stores, the event bus and the daemon
 * gateway. Per owned scope a supervisor runs a group actor per group and an instance actor per live
 * instance; a node actor per node follows the gateway's CONNECTED/DISCONNECTED and replaces the instances of a node that stays
 * unreachable past its grace period.
 *
 * Ownership: every write of an instance record and every daemon command happens only while the
 * instance's scope is owned, fenced by {@link ScopeOwnership.ensureCurrent} and stamped with the
 * scope's fencing token. Losing a scope stops its actors in one transition; the processes keep
 * running and the next owner adopts them from the records.
 *
 * The instance actors' state is the source of the records: every state an actor enters is written
 * to its instance record (in order, per instance) and published as INSTANCE_STATE_CHANGED.
 */
import { createActor, type Actor, type InspectionEvent } from "xstate";
import type { GroupTimings } from "../../actors/group/group-machine.js";
import type { GroupEvent } from "../../actors/group/transitions.js";
import type { InstanceTimeouts } from "../../actors/instance/instance-machine.js";
import type { InstanceAdoptableState, InstanceEvent } from "../../actors/instance/transitions.js";
import type { NodeTimeouts } from "../../actors/node/node-machine.js";
import type { NodeEvent } from "../../actors/node/transitions.js";
import type { ScopeGroup, ScopeInstance } from "../../actors/supervisor/supervisor-machine.js";
import type { CrashService } from "../domain/crashes/crash-service.js";
import type { GroupService, StoredGroup } from "../domain/groups/group-service.js";
import type { InstanceFields, InstanceService } from "../domain/instances/instance-service.js";
import { FINISHED_STATES, type InstanceState } from "../domain/instances/instance-schemas.js";
import type { NodeRecord } from "../domain/nodes/node-schemas.js";
import type { NodeService } from "../domain/nodes/node-service.js";
import { KeyedMutex } from "../domain/shared/keyed-mutex.js";
import { isoFromMs } from "../domain/shared/time.js";
import { EventTypes, type GroupCrashLoopPayload, type InstanceCrashedPayload, type InstanceStateChangedPayload } from "../events/event-types.js";
import type { EventBus, Subscription } from "../events/types.js";
import type { CommandResult, InstanceCommand } from "../wire/daemon-proto.js";
import type { DaemonReport } from "../gateway/daemon-gateway.js";
import type { Logger } from "../logs/types.js";
import type { MetricsService } from "../metrics/metrics.js";
import type { MachineCredentials } from "../plugin-api/credentials.js";
import type { Clock } from "../shared/clock.js";
import { conflict, notFound } from "../shared/errors.js";
import { provideNodeEffects, provideSupervisor, type CrashCause, type InstanceRef } from "./actor-effects.js";
import { CrashLoopDetector, type CrashLoopOptions } from "./crash-loop.js";
import { DaemonReportRouter, READY_CHAIN, type ConsoleSink, type CrashDetails } from "./daemon-report-router.js";
import { GroupEvaluator } from "./group-evaluator.js";
import { buildInstanceSpec } from "./instance-spec.js";
import { LiveInstances, STARTING_STATES } from "./live-instances.js";
import { ScopeLostError, type ScopeOwnership } from "./scopes.js";
import { slotNumber } from "./static-slots.js";

/** Commands to daemons and their reports: the daemon gateway, narrowed. */
export interface DaemonLink {
  sendCommand(nodeId: string, command: InstanceCommand): Promise<CommandResult>;
  onReport(handler: (report: DaemonReport) => void): () => void;
}

/** Bounds and timings of the host; every field has a default. */
export interface SchedulerTuning {
  /** scheduler.evaluationIntervalSeconds × 1000. */
  evaluationIntervalMs: number;
  evaluationTimeoutMs: number;
  instanceTimeouts: Partial<InstanceTimeouts>;
  nodeTimeouts: Partial<NodeTimeouts>;
  /** How long STOPPED and CRASHED instance records stay listed before they are deleted. */
  finishedRetentionMs: number;
  /** How long the node list read for placement is reused. */
  nodeListCacheMs: number;
  /** scheduler.maxStartingPerNode: instances starting at once per node (0: no limit). */
  startingPerNodeMax: number;
}

/** Defaults: the spec's 15 s tick; finished instances stay visible for ten minutes. */
export const defaultSchedulerTuning: SchedulerTuning = {
  evaluationIntervalMs: 15_000,
  evaluationTimeoutMs: 30_000,
  instanceTimeouts: {},
  nodeTimeouts: {},
  finishedRetentionMs: 10 * 60_000,
  nodeListCacheMs: 1_000,
  startingPerNodeMax: 16,
};

/** How long {@link SchedulerHost.stop} waits for background work before it returns. */
export const stopSettleTimeoutMs = 5_000;

/** Daemon error codes after which a dispatch is not retried: the instance fails at once. */
const PERMANENT_DISPATCH_ERRORS: ReadonlySet<string> = new Set(["UNKNOWN_PLATFORM", "INVALID_PLATFORM", "INVALID_SPEC", "TOO_MANY_INSTANCES"]);
/** Crash classifications that are not the group's fault: they do not count towards a crash loop. */
const NOT_THE_GROUPS_FAULT: ReadonlySet<string> = new Set(["NODE_LOST", "LOST"]);

export interface SchedulerHostOptions {
  groups: GroupService;
  instances: InstanceService;
  nodes: NodeService;
  crashes: CrashService;
  events: EventBus;
  daemons: DaemonLink;
  credentials: MachineCredentials;
  scopes: ScopeOwnership;
  crashLoop: CrashLoopOptions;
  clock: Clock;
  logger: Logger;
  metrics: MetricsService;
  tuning?: Partial<SchedulerTuning>;
}

type SupervisorActor = Actor<ReturnType<typeof provideSupervisor>>;
type NodeActor = Actor<ReturnType<typeof provideNodeEffects>>;

/** The result of `POST /api/v1/groups/{group}/start`. */
export interface ExplicitStartResult {
  count: number;
  reason?: string;
}

/** Runs the scheduling actors of the scopes this controller owns. */
export class SchedulerHost {
  readonly tuning: SchedulerTuning;
  readonly live = new LiveInstances();
  private readonly supervisors = new Map<string, SupervisorActor>();
  private readonly fencingTokens = new Map<string, number>();
  private readonly nodeActors = new Map<string, NodeActor>();
  /** Last machine state written (or adopted) per supervised instance. */
  private readonly knownStates = new Map<string, InstanceState>();
  /** Per instance, the tail of its record writes: states land in the order the actor entered them. */
  private readonly recordWrites = new KeyedMutex();
  private readonly crashLoops: CrashLoopDetector;
  private readonly evaluator: GroupEvaluator;
  private readonly reports: DaemonReportRouter;
  private readonly subscriptions: Subscription[] = [];
  /** Deleted groups whose scopes stay tracked until their instances finished. */
  private readonly deletedGroups = new Set<string>();
  private readonly pending = new Set<Promise<unknown>>();
  private unsubscribeReports: (() => void) | null = null;
  private sweepTimer: NodeJS.Timeout | null = null;
  private stopped = false;
  private started = false;

  constructor(private readonly options: SchedulerHostOptions) {
    this.tuning = { ...defaultSchedulerTuning, ...options.tuning };
    this.crashLoops = new CrashLoopDetector(options.crashLoop, options.clock);
    this.evaluator = new GroupEvaluator({
      groups: options.groups,
      instances: options.instances,
      nodes: options.nodes,
      live: this.live,
      clock: options.clock,
      logger: options.logger,
      nodeListCacheMs: this.tuning.nodeListCacheMs,
      startingPerNodeMax: this.tuning.startingPerNodeMax,
      fencingTokenOf: (group) => this.fencingTokenOf(group),
      ensureCurrent: (group) => this.ensureCurrent(group),
      instanceAdded: (instance) => this.instanceAdded(instance),
      toInstance: (id, event) => this.toInstance(id, event),
      nodesSeen: (nodes) => {
        for (const node of nodes) {
          this.live.setNodeHost(node.id, node.host);
          if (!this.stopped) this.startNodeActor(node);
        }
      },
    });
    this.reports = new DaemonReportRouter({
      live: this.live,
      instances: options.instances,
      events: options.events,
      logger: options.logger,
      clock: options.clock,
      isSupervised: (id) => this.knownStates.has(id),
      toInstance: (id, event) => this.toInstance(id, event),
      forceStopStray: (nodeId, instanceId, group) => this.forceStopStray(nodeId, instanceId, group),
    });
  }

  /** Loads the nodes, subscribes to events and daemon reports, and starts owning scopes. */
  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    const { events } = this.options;
    this.subscriptions.push(
      events.subscribe(EventTypes.GROUP_CREATED, (e) => this.groupCreated(String(e.data.groupName))),
      events.subscribe(EventTypes.GROUP_UPDATED, (e) => this.toGroup(String(e.data.groupName), { type: "CHANGED" })),
      events.subscribe(EventTypes.GROUP_DELETED, (e) => this.groupDeleted(String(e.data.groupName))),
      events.subscribe(EventTypes.GROUP_MAINTENANCE_CHANGED, (e) =>
        this.toGroup(String(e.data.groupName), { type: e.data.maintenance === true ? "MAINTENANCE_ON" : "MAINTENANCE_OFF" }),
      ),
      events.subscribe(EventTypes.NODE_CONNECTED, (e) => this.nodeEvent(String(e.data.nodeId), { type: "CONNECTED" })),
      events.subscribe(EventTypes.NODE_DISCONNECTED, (e) => this.nodeEvent(String(e.data.nodeId), { type: "DISCONNECTED" })),
      events.subscribe(EventTypes.NODE_DRAIN_REQUESTED, (e) => this.nodeEvent(String(e.data.nodeId), { type: "DRAIN" })),
      events.subscribe(EventTypes.NODE_DRAIN_COMPLETED, (e) => this.nodeEvent(String(e.data.nodeId), { type: "UNDRAIN" })),
    );
    this.unsubscribeReports = this.options.daemons.onReport((report) => this.reports.route(report));
    for (const node of await this.options.nodes.list()) {
      this.live.setNodeHost(node.id, node.host);
      this.startNodeActor(node);
    }
    // Every live instance, whichever controller schedules it: placement needs every reservation.
    // Their states are followed once their group's scope is acquired here (put again then).
    for (const doc of await this.options.instances.findDocs()) if (!FINISHED_STATES.has(doc.state)) this.live.put(doc, false);
    const groups = await this.options.groups.listDocs();
    for (const group of groups) this.options.scopes.track(group.name);
    await this.options.scopes.start({
      acquired: (scope, token) => this.track(this.scopeAcquired(scope, token)),
      lost: (scope) => this.scopeLost(scope),
    });
    this.sweepTimer = setInterval(() => this.track(this.sweepFinished()), Math.max(1_000, Math.min(this.tuning.evaluationIntervalMs, 60_000)));
    this.sweepTimer.unref();
  }

  /** Stops every actor (the processes keep running) and waits for record writes under way. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    for (const s of this.subscriptions) s.unsubscribe();
    this.unsubscribeReports?.();
    if (this.sweepTimer) clearInterval(this.sweepTimer);
    await this.options.scopes.stop();
    for (const supervisor of this.supervisors.values()) supervisor.stop();
    for (const node of this.nodeActors.values()) node.stop();
    this.supervisors.clear();
    this.nodeActors.clear();
    // Record writes under way finish; a command waiting for a daemon's answer is not waited for.
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.settle(), new Promise<void>((resolve) => (timer = setTimeout(resolve, stopSettleTimeoutMs)))]);
    clearTimeout(timer);
  }

  /** Where console lines of instances go (the console hub of the console streams). */
  setConsole(sink: ConsoleSink): void {
    this.reports.console = sink;
  }

  /** True between {@link start} and {@link stop}. */
  isRunning(): boolean {
    return this.started && !this.stopped;
  }

  /** Waits until the host's background work (record writes, dispatches) is done; for tests and shutdown. */
  async settle(): Promise<void> {
    while (this.pending.size > 0) await Promise.allSettled([...this.pending]);
  }

  // ---- operator actions ----

  /** `POST /api/v1/groups/{group}/start`: schedules what the scaling mode allows now. */
  async startExplicitly(group: string): Promise<ExplicitStartResult> {
    if (!this.isOwned(group)) throw conflict(`Group ${group} is scheduled by another controller`, "NOT_OWNER");
    return this.evaluator.startExplicitly(group);
  }

  /** `POST /api/v1/groups/{group}/resume`: ends a crash-loop pause. */
  async resume(group: string): Promise<void> {
    this.crashLoops.reset(group);
    await this.options.groups.setSchedulingState(group, { paused: false });
    this.toGroup(group, { type: "RESUME" });
  }

  /**
   * Graceful stop of an instance (the platform's stop command, then SIGTERM, then SIGKILL). When
   * another controller schedules the group, the command goes straight to the daemon under the
   * holder's fencing token; the holder's actor follows the daemon's STOPPING report.
   */
  async stopInstance(id: string, force: boolean): Promise<void> {
    const doc = await this.requireLive(id);
    // A graceful stop of a STATIC instance keeps its slot stopped until the group is started
    // again; it is noted on the group record before the stop goes out, so whichever controller
    // schedules the group reads it before the instance is STOPPED. A force-stop is respawned.
    const holdsSlot = !force && (await this.options.groups.getDoc(doc.group))?.static === true;
    if (holdsSlot) await this.options.groups.setStoppedByOperator(doc.group, id, true);
    if (this.knownStates.has(id)) {
      this.toInstance(id, { type: force ? "FORCE_STOP" : "STOP" });
      return;
    }
    const body = { group: doc.group, fencing_token: await this.actingFencingToken(doc.group), instance_id: id };
    const result = await this.command(doc.node, force ? { type: "force_stop_instance", body } : { type: "stop_instance", body });
    if (result.ok) return;
    if (holdsSlot) await this.options.groups.setStoppedByOperator(doc.group, id, false);
    throw refused(result);
  }

  /** Writes one line to the instance's standard input. */
  async sendCommand(id: string, line: string): Promise<void> {
    const doc = await this.requireLive(id);
    const result = await this.command(doc.node, { type: "stdin_instance", body: { group: doc.group, fencing_token: await this.actingFencingToken(doc.group), instance_id: id, line } });
    if (!result.ok) throw refused(result);
  }

  /** The in-server plugin reported ready: RUNNING, and the daemon is told (plugin readiness). */
  async markReady(id: string): Promise<void> {
    const doc = await this.requireLive(id);
    // A ready server runs: catch the actor up if reports of the earlier states are late.
    for (const event of READY_CHAIN) this.toInstance(id, event);
    // The daemon then reports RUNNING, which reaches the group's scheduler wherever it runs.
    const result = await this.command(doc.node, { type: "mark_instance_ready", body: { group: doc.group, fencing_token: await this.actingFencingToken(doc.group), instance_id: id } });
    if (!result.ok && result.error_code !== "INVALID_STATE") this.options.logger.warn(`Node ${doc.node} refused the readiness of ${id}: ${result.error_code}`);
  }

  /** This controller's fencing token for the group, or the holder's when another controller schedules it. */
  private async actingFencingToken(group: string): Promise<number> {
    return this.fencingTokenOf(group) ?? (await this.options.scopes.holderFencingToken(this.options.scopes.scopeOf(group))) ?? 0;
  }

  /** The player count of an instance changed (plugin player routes). */
  async playerCountChanged(id: string, playerCount: number): Promise<void> {
    const live = this.live.get(id);
    if (live) this.live.setPlayerCount(id, playerCount);
    await this.recordWrites.run(id, async () => {
      const doc = await this.options.instances.getDoc(id);
      if (!doc || FINISHED_STATES.has(doc.state)) return;
      await this.options.instances.save({ ...doc, playerCount });
    });
    if (playerCount === 0 && this.knownStates.get(id) === "DRAINING") this.toInstance(id, { type: "EMPTY" });
    if (live) this.toGroup(live.group, { type: "CHANGED" });
  }

  /** The fencing token of a group's scope while owned, else null. */
  fencingTokenOf(group: string): number | null {
    return this.fencingTokens.get(this.options.scopes.scopeOf(group)) ?? null;
  }

  /** Whether this controller schedules `group` right now. */
  isOwned(group: string): boolean {
    return this.fencingTokenOf(group) !== null;
  }

  // ---- scopes ----

  private async scopeAcquired(scope: string, fencingToken: number): Promise<void> {
    const existing = this.supervisors.get(scope);
    this.fencingTokens.set(scope, fencingToken);
    if (existing?.getSnapshot().value === "OWNING") {
      existing.send({ type: "SCOPE_ACQUIRED", fencingToken, groups: [], instances: [] });
      return;
    }
    const groups = await this.groupsOfScope(scope);
    const adopted: ScopeInstance[] = [];
    for (const group of groups) {
      for (const doc of await this.options.instances.findDocs({ group: group.name })) {
        if (FINISHED_STATES.has(doc.state)) {
          // A finished STATIC instance is a slot to refill: its record names the node of its directory.
          if (group.static) this.live.put(doc);
          continue;
        }
        this.live.put(doc);
        adopted.push({ instanceId: doc.id, group: doc.group, node: doc.node, adoptState: doc.state as InstanceAdoptableState, timeouts: this.tuning.instanceTimeouts });
        this.knownStates.set(doc.id, doc.state);
      }
    }
    if (this.fencingTokens.get(scope) !== fencingToken || this.stopped) return;
    const supervisor = existing ?? this.createSupervisor(scope);
    supervisor.send({ type: "SCOPE_ACQUIRED", fencingToken, groups: groups.map((g) => this.scopeGroup(g)), instances: adopted });
    this.options.logger.info(`Scheduling scope ${scope} (fencing token ${fencingToken}): ${groups.length} groups, ${adopted.length} live instances adopted`);
  }

  /** The groups of a scope: a `group:<name>` scope holds that group alone. */
  private async groupsOfScope(scope: string): Promise<StoredGroup[]> {
    if (scope.startsWith("group:")) {
      const doc = await this.options.groups.getDoc(scope.slice("group:".length));
      return doc && this.options.scopes.scopeOf(doc.name) === scope ? [doc] : [];
    }
    return (await this.options.groups.listDocs()).filter((g) => this.options.scopes.scopeOf(g.name) === scope);
  }

  private scopeLost(scope: string): void {
    this.fencingTokens.delete(scope);
    const supervisor = this.supervisors.get(scope);
    if (!supervisor) return;
    const children = { ...supervisor.getSnapshot().context.instances };
    supervisor.send({ type: "SCOPE_LOST" });
    // A scope acquired again gets a fresh supervisor; a deleted group's leaves nothing behind.
    supervisor.stop();
    this.supervisors.delete(scope);
    for (const id of Object.keys(children)) this.knownStates.delete(id);
    this.options.logger.warn(`Lost scheduling scope ${scope}: its actors are stopped; the processes keep running`);
  }

  private createSupervisor(scope: string): SupervisorActor {
    const supervisor = createActor(
      provideSupervisor({
        instances: {
          dispatch: (ref) => this.track(this.dispatch(ref)),
          stop: (ref) => this.track(this.sendStopCommand(ref, false)),
          forceStop: (ref) => this.track(this.sendStopCommand(ref, true)),
          announceDrain: (ref) => this.options.events.publish(EventTypes.INSTANCE_DRAINING, { instanceId: ref.instanceId, group: ref.group, nodeId: ref.node }),
          crashed: (ref, cause) => this.track(this.recordCrash(ref, cause)),
          lost: (ref) => this.track(this.recordCrash(ref, { kind: "FAILURE", reason: "NODE_LOST" }, false)),
          timedOut: (ref, delay) => this.track(this.recordCrash(ref, { kind: "FAILURE", reason: `TIMEOUT:${delay}` })),
          stopUnconfirmed: (ref) => this.options.logger.warn(`Instance ${ref.instanceId} on ${ref.node}: no exit confirmed after a force-stop; recorded as STOPPED`),
        },
        groups: {
          evaluate: (group, signal) => this.evaluator.evaluate(group, signal),
          crashLoop: (group, loop) => this.track(this.pauseGroup(group, loop)),
          resumed: (group) => {
            this.crashLoops.reset(group);
            this.track(this.options.groups.setSchedulingState(group, { paused: false }));
          },
          stopInstances: (group) => {
            for (const instance of this.live.ofGroup(group)) this.toInstance(instance.id, { type: "STOP" });
          },
          evaluationFailed: (group, error) => {
            this.options.metrics.schedulerTickFailures.inc();
            if (error instanceof ScopeLostError) this.options.logger.warn(`Evaluation of group ${group} aborted: ${error.message}`);
            else this.options.logger.error(`Evaluation of group ${group} failed`, error);
          },
        },
        scopeAcquired: () => undefined,
        scopeLost: () => undefined,
      }),
      { input: { scope }, inspect: (event) => this.inspect(event) },
    );
    supervisor.start();
    this.supervisors.set(scope, supervisor);
    return supervisor;
  }

  private scopeGroup(group: StoredGroup): ScopeGroup {
    const timings: Partial<GroupTimings> = { evaluationIntervalMs: this.tuning.evaluationIntervalMs, evaluationTimeoutMs: this.tuning.evaluationTimeoutMs };
    return { group: group.name, maintenance: group.maintenance, paused: group.paused ?? false, timings };
  }

  // ---- groups ----

  private async groupCreated(name: string): Promise<void> {
    this.options.scopes.track(name);
    const supervisor = this.supervisors.get(this.options.scopes.scopeOf(name));
    if (!supervisor || supervisor.getSnapshot().value !== "OWNING") return;
    const doc = await this.options.groups.getDoc(name);
    if (doc) supervisor.send({ type: "GROUP_ADDED", group: this.scopeGroup(doc) });
  }

  private groupDeleted(name: string): void {
    this.toGroup(name, { type: "DELETED" });
    this.crashLoops.reset(name);
    this.evaluator.forget(name);
    const supervisor = this.supervisors.get(this.options.scopes.scopeOf(name));
    supervisor?.send({ type: "GROUP_REMOVED", group: name });
    // The scope stays tracked until its instances stopped; the sweep untracks it.
    this.deletedGroups.add(name);
  }

  private toGroup(group: string, event: GroupEvent): void {
    this.supervisors.get(this.options.scopes.scopeOf(group))?.send({ type: "TO_GROUP", group, event });
  }

  private toInstance(instanceId: string, event: InstanceEvent): void {
    const live = this.live.get(instanceId);
    if (!live) return;
    this.supervisors.get(this.options.scopes.scopeOf(live.group))?.send({ type: "TO_INSTANCE", instanceId, event });
  }

  private instanceAdded(instance: InstanceFields): void {
    this.live.put(instance);
    this.knownStates.set(instance.id, instance.state);
    this.supervisors
      .get(this.options.scopes.scopeOf(instance.group))
      ?.send({ type: "INSTANCE_ADDED", instance: { instanceId: instance.id, group: instance.group, node: instance.node, timeouts: this.tuning.instanceTimeouts } });
  }

  private async pauseGroup(group: string, loop: { crashCount: number; windowStartMs: number }): Promise<void> {
    await this.options.groups.setSchedulingState(group, { paused: true });
    this.options.metrics.schedulerCrashLoops.inc();
    this.options.logger.warn(`Group ${group} paused: ${loop.crashCount} crashes since ${isoFromMs(loop.windowStartMs)} (crash loop)`);
    this.options.events.publish(EventTypes.GROUP_CRASH_LOOP, { group, crashCount: loop.crashCount, windowStart: isoFromMs(loop.windowStartMs) } satisfies GroupCrashLoopPayload);
  }

  // ---- instances: records follow the actors ----

  private inspect(event: InspectionEvent): void {
    if (event.type !== "@xstate.snapshot") return;
    const id = (event.actorRef as { id?: unknown }).id;
    if (typeof id !== "string" || !id.startsWith("instance:")) return;
    const snapshot = event.snapshot as { value?: unknown; context?: { instanceId: string; group: string; node: string } };
    const state = snapshot.value;
    const context = snapshot.context;
    if (typeof state !== "string" || state === "CREATED" || !context) return;
    const instanceId = context.instanceId;
    const previous = this.knownStates.get(instanceId);
    if (previous === undefined || previous === state) return;
    const next = state as InstanceState;
    this.knownStates.set(instanceId, next);
    this.live.setState(instanceId, next);
    if (STARTING_STATES.has(previous) && !STARTING_STATES.has(next)) {
      for (const group of this.evaluator.takeGroupsWaitingForSlots()) this.toGroup(group, { type: "CHANGED" });
    }
    this.track(this.writeState(context.group, context.node, instanceId, previous, next));
  }

  private async writeState(group: string, node: string, instanceId: string, from: InstanceState, to: InstanceState): Promise<void> {
    const finished = FINISHED_STATES.has(to);
    try {
      await this.recordWrites.run(instanceId, async () => {
        await this.ensureCurrent(group);
        const doc = await this.options.instances.getDoc(instanceId);
        if (!doc) return;
        const nowIso = isoFromMs(this.options.clock.nowMs());
        const next: InstanceFields = { ...doc, state: to };
        if (to === "STARTING" && !doc.startedAt) next.startedAt = nowIso;
        if (finished) {
          next.stoppedAt = nowIso;
          next.playerCount = 0;
        }
        await this.options.instances.save(next);
      });
    } catch (err) {
      // The group's lease moved to another controller, which owns the instance documents now.
      if (err instanceof ScopeLostError) return;
      this.options.logger.error(`Recording state ${to} of instance ${instanceId} failed`, err);
    }
    this.options.events.publish(EventTypes.INSTANCE_STATE_CHANGED, { instanceId, group, nodeId: node, oldState: from, newState: to } satisfies InstanceStateChangedPayload);
    if (finished) {
      this.knownStates.delete(instanceId);
      this.supervisors.get(this.options.scopes.scopeOf(group))?.send({ type: "INSTANCE_FINISHED", instanceId });
    }
    if (finished || to === "RUNNING" || to === "DRAINING" || to === "STOPPING") this.toGroup(group, { type: "CHANGED" });
  }

  private async dispatch(ref: InstanceRef): Promise<void> {
    const [doc, group] = await Promise.all([this.options.instances.getDoc(ref.instanceId), this.options.groups.getDoc(ref.group)]);
    if (!doc || !group) {
      this.toInstance(ref.instanceId, { type: "DISPATCHED" });
      this.toInstance(ref.instanceId, { type: "FAILED", reason: !group ? `group ${ref.group} no longer exists` : "instance record missing" });
      return;
    }
    const token = this.options.credentials.issueWorkloadToken({ instanceId: doc.id, group: doc.group, node: doc.node });
    const fencingToken = this.fencingTokenOf(ref.group);
    if (fencingToken === null) return;
    const result = await this.command(ref.node, { type: "start_instance", body: { group: ref.group, fencing_token: fencingToken, spec: buildInstanceSpec(group, doc, token.token) } });
    if (result.ok || result.error_code === "INSTANCE_EXISTS") {
      this.toInstance(ref.instanceId, { type: "DISPATCHED" });
    } else if (PERMANENT_DISPATCH_ERRORS.has(result.error_code)) {
      this.toInstance(ref.instanceId, { type: "DISPATCHED" });
      this.toInstance(ref.instanceId, { type: "FAILED", reason: `${result.error_code}: ${result.message}` });
    } else {
      // Not connected, timed out, stale epoch: the actor's dispatch timeout sends it again.
      this.options.logger.warn(`Dispatch of ${ref.instanceId} to ${ref.node} failed: ${result.error_code} ${result.message}`);
    }
  }

  private async sendStopCommand(ref: InstanceRef, force: boolean): Promise<void> {
    const fencingToken = this.fencingTokenOf(ref.group);
    if (fencingToken === null) return;
    const body = { group: ref.group, fencing_token: fencingToken, instance_id: ref.instanceId };
    const result = await this.command(ref.node, force ? { type: "force_stop_instance", body } : { type: "stop_instance", body });
    if (result.ok) return;
    if (result.error_code === "UNKNOWN_INSTANCE") {
      // Nothing runs there (never started, or already gone): the stop is complete.
      this.toInstance(ref.instanceId, { type: "EXITED", exitCode: 0 });
      return;
    }
    this.options.logger.warn(`${force ? "Force-stop" : "Stop"} of ${ref.instanceId} on ${ref.node} failed: ${result.error_code} ${result.message}`);
  }

  private async recordCrash(ref: InstanceRef, cause: CrashCause, countsTowardsLoop = true): Promise<void> {
    const details: CrashDetails = this.reports.takeCrashDetails(ref.instanceId) ?? {
      exitCode: cause.kind === "EXIT" ? cause.exitCode : -1,
      classification: cause.kind === "EXIT" ? (cause.exitCode === 0 ? "NORMAL_EXIT_UNEXPECTED" : "ERROR_EXIT") : classificationOfReason(cause.reason),
      logTail: [],
      uptimeMs: 0,
      timestampMs: this.options.clock.nowMs(),
    };
    const crash = {
      instanceId: ref.instanceId,
      group: ref.group,
      nodeId: ref.node,
      exitCode: details.exitCode,
      classification: details.classification,
      logTail: details.logTail,
      uptimeMs: details.uptimeMs,
    } satisfies InstanceCrashedPayload;
    try {
      await this.options.crashes.record({ ...crash, timestampMs: details.timestampMs });
    } catch (err) {
      this.options.logger.error(`Recording the crash of ${ref.instanceId} failed`, err);
    }
    this.options.events.publish(EventTypes.INSTANCE_CRASHED, crash);
    this.options.logger.warn(`Instance ${ref.instanceId} of ${ref.group} crashed on ${ref.node}: ${details.classification} (exit ${details.exitCode})`);
    if (!countsTowardsLoop || NOT_THE_GROUPS_FAULT.has(details.classification)) return;
    const verdict = this.crashLoops.recordCrash(ref.group);
    if (verdict.tripped) this.toGroup(ref.group, { type: "CRASH_LOOP", crashCount: verdict.crashCount, windowStartMs: verdict.windowStartMs });
  }

  /** An instance the daemon runs but nobody should: kill it (fenced with the group's token when owned). */
  private async forceStopStray(nodeId: string, instanceId: string, group: string): Promise<void> {
    const fencingToken = this.fencingTokenOf(group);
    if (fencingToken === null) return;
    this.options.logger.warn(`Node ${nodeId} runs ${instanceId} of ${group}, which is not a live instance: force-stopping it`);
    await this.command(nodeId, { type: "force_stop_instance", body: { group, fencing_token: fencingToken, instance_id: instanceId } });
  }

  private async command(nodeId: string, command: InstanceCommand): Promise<CommandResult> {
    try {
      return await this.options.daemons.sendCommand(nodeId, command);
    } catch (err) {
      const code = (err as { code?: string }).code ?? "COMMAND_FAILED";
      return { command_id: "", ok: false, error_code: code, message: (err as Error).message };
    }
  }

  private async requireLive(id: string): Promise<InstanceFields> {
    const doc = await this.options.instances.getDoc(id);
    if (!doc) throw notFound(`Instance not found: ${id}`);
    if (FINISHED_STATES.has(doc.state)) throw conflict(`Instance ${id} is ${doc.state}`, "INVALID_STATE");
    return doc;
  }

  private async ensureCurrent(group: string): Promise<void> {
    const scope = this.options.scopes.scopeOf(group);
    const token = this.fencingTokens.get(scope);
    if (token === undefined) throw new ScopeLostError(scope);
    await this.options.scopes.ensureCurrent(scope, token);
  }

  /**
   * Periodic housekeeping: every stored group is tracked (an event missed from a peer must not
   * leave a group without an owner); a deleted group is untracked once its instances finished.
   */
  private async syncTrackedGroups(): Promise<void> {
    const names = new Set((await this.options.groups.listDocs()).map((g) => g.name));
    for (const name of names) this.options.scopes.track(name);
    for (const name of [...this.deletedGroups]) {
      if (names.has(name)) {
        this.deletedGroups.delete(name);
        continue;
      }
      if (this.live.ofGroup(name).every((i) => FINISHED_STATES.has(i.state))) {
        this.options.scopes.untrack(name);
        this.deletedGroups.delete(name);
      }
    }
  }

  /**
   * Deletes STOPPED and CRASHED records older than the retention, and forgets them here. The
   * records of a STATIC group's slots stay while the group exists and is STATIC: they say on which
   * node each slot's directory is.
   */
  private async sweepFinished(): Promise<void> {
    await this.syncTrackedGroups();
    const cutoffMs = this.options.clock.nowMs() - this.tuning.finishedRetentionMs;
    const groups = new Map((await this.options.groups.listDocs()).map((g) => [g.name, g]));
    for (const state of ["STOPPED", "CRASHED"] as const) {
      for (const doc of await this.options.instances.findDocs({ state })) {
        const group = groups.get(doc.group);
        if (group?.static && slotNumber(group.name, doc.id) !== null) continue;
        if (!this.isOwned(doc.group) && group) continue;
        const endedMs = doc.stoppedAt ? Date.parse(doc.stoppedAt) : 0;
        if (endedMs > cutoffMs) continue;
        await this.options.instances.remove(doc.id);
        this.live.remove(doc.id);
      }
    }
  }

  // ---- nodes ----

  private startNodeActor(node: Pick<NodeRecord, "id" | "state" | "cordoned" | "drainRequestedAt">): NodeActor {
    const existing = this.nodeActors.get(node.id);
    if (existing) return existing;
    const actor = createActor(
      provideNodeEffects({
        disconnected: () => undefined,
        connected: () => undefined,
        drainRequested: () => undefined,
        drainCompleted: () => undefined,
        cordonChanged: () => undefined,
        replaceInstances: (nodeId) => this.track(this.nodeOffline(nodeId)),
      }),
      {
        input: {
          nodeId: node.id,
          state: node.state,
          drainRequested: node.drainRequestedAt !== null,
          cordoned: node.cordoned,
          // Liveness is the gateway's (a closed or silent stream ends the session, NODE_DISCONNECTED):
          // the node actor keeps the grace period that follows.
          timeouts: this.tuning.nodeTimeouts,
        },
      },
    );
    actor.start();
    this.nodeActors.set(node.id, actor);
    return actor;
  }

  private nodeEvent(nodeId: string, event: NodeEvent): void {
    const actor = this.nodeActors.get(nodeId);
    if (actor) {
      actor.send(event);
    } else if (event.type === "CONNECTED") {
      this.track(
        this.options.nodes.get(nodeId).then(
          (node) => {
            this.live.setNodeHost(node.id, node.host);
            this.startNodeActor(node).send(event);
          },
          () => undefined,
        ),
      );
    }
    this.evaluator.invalidateNodes();
    if (event.type === "CONNECTED") this.redispatchScheduled(nodeId);
    if (event.type === "CONNECTED" || event.type === "UNDRAIN") this.changedEverywhere();
  }

  /**
   * A node (re)connected: instances waiting for it in SCHEDULED are sent now instead of at their
   * next dispatch attempt (a daemon restart should not cost a dispatch timeout).
   */
  private redispatchScheduled(nodeId: string): void {
    for (const instance of this.live.onNode(nodeId)) {
      if (this.knownStates.get(instance.id) === "SCHEDULED") this.track(this.dispatch({ instanceId: instance.id, group: instance.group, node: nodeId }));
    }
  }

  /** The node stayed unreachable past its grace period: OFFLINE, and its instances are replaced. */
  private async nodeOffline(nodeId: string): Promise<void> {
    try {
      const record = await this.options.nodes.get(nodeId);
      if (record.state === "UNREACHABLE") await this.options.nodes.upsert(nodeId, { host: record.host, state: "OFFLINE" });
    } catch (err) {
      this.options.logger.error(`Marking node ${nodeId} OFFLINE failed`, err);
    }
    const lost = this.live.onNode(nodeId).filter((i) => this.knownStates.has(i.id));
    this.options.logger.warn(`Node ${nodeId} is OFFLINE after its grace period: replacing ${lost.length} instances`);
    for (const instance of lost) this.toInstance(instance.id, { type: "NODE_LOST" });
    this.evaluator.invalidateNodes();
  }

  private changedEverywhere(): void {
    for (const supervisor of this.supervisors.values()) {
      for (const group of supervisor.getSnapshot().context.groups) supervisor.send({ type: "TO_GROUP", group, event: { type: "CHANGED" } });
    }
  }

  private track<T>(work: Promise<T>): void {
    const tracked = work.catch((err: unknown) => this.options.logger.error("Scheduler background work failed", err));
    this.pending.add(tracked);
    void tracked.finally(() => this.pending.delete(tracked));
  }
}

/** A command the daemon refused, as the operator sees it. */
function refused(result: CommandResult): Error {
  return conflict(`The daemon refused the command: ${result.error_code}${result.message ? ` (${result.message})` : ""}`, result.error_code || "COMMAND_REFUSED");
}

/** The crash classification of a failure without a process exit. */
function classificationOfReason(reason: string): string {
  if (reason === "NODE_LOST") return "NODE_LOST";
  if (reason.startsWith("TIMEOUT:")) return "TIMEOUT";
  if (reason.startsWith("PREPARE_FAILED")) return "PREPARE_FAILED";
  if (reason.startsWith("SPAWN_FAILED")) return "SPAWN_FAILED";
  return "START_FAILED";
}
