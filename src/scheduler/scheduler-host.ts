/**
 * The scheduler host: composes the parts that run the actors of `actors/` against the stores, the
 * event bus and the daemons, and subscribes them to what happens. Each part has one job:
 *
 * - {@link ScopeLifecycle}: a supervisor per owned scope (group and instance actors), adoption,
 *   fencing tokens, routing events to the actors;
 * - {@link InstanceRecordWriter}: every state an instance actor enters becomes its record and an
 *   INSTANCE_STATE_CHANGED;
 * - {@link CrashRecorder}: crash records and crash loops;
 * - {@link CommandDispatch}: the actors' commands to daemons, stamped with fencing tokens;
 * - {@link InstanceOperations}: operator and plugin actions on one instance;
 * - {@link NodeWatch}: a node actor per node and the grace period after the gateway's disconnect;
 * - {@link FinishedSweeper}: finished records and group tracking;
 * - {@link GroupEvaluator} and {@link DaemonReportRouter}: evaluations, and daemon reports;
 * - {@link NodeReconciler}: the owned instances checked against what their nodes run, when a scope
 *   is acquired and every `reconcileIntervalMs`.
 *
 * Ownership: every write of an instance record and every daemon command happens only while the
 * instance's scope is owned, fenced by {@link ScopeOwnership.ensureCurrent} and stamped with the
 * scope's fencing token. Losing a scope stops its actors in one transition; the processes keep
 * running and the next owner adopts them from the records.
 */
import type { CrashService } from "../domain/crashes/crash-service.js";
import type { GroupService } from "../domain/groups/group-service.js";
import type { InstanceService } from "../domain/instances/instance-service.js";
import { FINISHED_STATES } from "../domain/instances/instance-schemas.js";
import type { NodeService } from "../domain/nodes/node-service.js";
import { EventTypes } from "../events/event-types.js";
import type { EventBus, Subscription } from "../events/types.js";
import type { DaemonReport } from "../wire/daemon-proto.js";
import type { Logger } from "../logs/types.js";
import type { MetricsService } from "../metrics/metrics.js";
import type { Clock, Timer } from "../shared/clock.js";
import { conflict } from "../shared/errors.js";
import { CommandDispatch, type DaemonCommands, type WorkloadTokens } from "./command-dispatch.js";
import { CrashRecorder } from "./crash-recorder.js";
import type { CrashLoopOptions } from "./crash-loop.js";
import { DaemonReportRouter, type ConsoleSink } from "./daemon-report-router.js";
import { FinishedSweeper } from "./finished-sweeper.js";
import { GroupEvaluator } from "./group-evaluator.js";
import type { InstanceLifecycle, InstanceStateListener, RevisionSource, RevisionStart } from "./instance-lifecycle.js";
import { InstanceOperations } from "./instance-operations.js";
import { InstanceRecordWriter } from "./instance-record-writer.js";
import { LiveInstances } from "./live-instances.js";
import { NodeReconciler } from "./node-reconciler.js";
import { NodeWatch } from "./node-watch.js";
import { defaultSchedulerTuning, type SchedulerTuning } from "./scheduler-tuning.js";
import { PlayerCountSync } from "./player-count-sync.js";
import type { LoadSample } from "./scaling.js";
import { ScopeLifecycle } from "./scope-lifecycle.js";
import { SchedulerTicks } from "./scheduler-ticks.js";
import { ScopeLostError, type ScopeOwnership } from "./scopes.js";
import { SupervisedInstances } from "./supervised-instances.js";

export { defaultSchedulerTuning, type SchedulerTuning } from "./scheduler-tuning.js";

/** Commands to daemons and their reports: the daemon gateway, narrowed. */
export interface DaemonLink extends DaemonCommands {
  onReport(handler: (report: DaemonReport) => void): () => void;
}

/** How long {@link SchedulerHost.stop} waits for background work before it returns. */
export const stopSettleTimeoutMs = 5_000;

export interface SchedulerHostOptions {
  groups: GroupService;
  instances: InstanceService;
  nodes: NodeService;
  crashes: CrashService;
  events: EventBus;
  daemons: DaemonLink;
  credentials: WorkloadTokens;
  scopes: ScopeOwnership;
  crashLoop: CrashLoopOptions;
  clock: Clock;
  logger: Logger;
  metrics: MetricsService;
  tuning?: Partial<SchedulerTuning>;
  /** Frozen group revisions (deployments); without it instances carry revision 0. */
  revisions?: RevisionSource;
  /** The instances' latest reported load (metrics snapshots), for groups that scale on load. */
  loadSamples?(instanceIds: readonly string[]): Promise<LoadSample[]>;
  /** The player registry's count of each instance (absent: none); without it the counts are only those reported here. */
  playerCounts?(instanceIds: readonly string[]): Promise<Map<string, number>>;
}

/** The result of `POST /api/v1/groups/{group}/start`. */
export interface ExplicitStartResult {
  count: number;
  reason?: string;
}

/** Runs the scheduling actors of the scopes this controller owns. */
export class SchedulerHost implements InstanceLifecycle {
  readonly tuning: SchedulerTuning;
  readonly live = new LiveInstances();
  private readonly supervised = new SupervisedInstances();
  private readonly scopes: ScopeLifecycle;
  private readonly records: InstanceRecordWriter;
  private readonly crashes: CrashRecorder;
  private readonly dispatch: CommandDispatch;
  private readonly operations: InstanceOperations;
  private readonly nodes: NodeWatch;
  private readonly sweeper: FinishedSweeper;
  private readonly evaluator: GroupEvaluator;
  private readonly reports: DaemonReportRouter;
  private readonly reconciler: NodeReconciler;
  private readonly countSync: PlayerCountSync | null;
  private countWritten: ((instanceId: string, group: string) => void) | null = null;
  private readonly ticks: SchedulerTicks;
  private readonly subscriptions: Subscription[] = [];
  private readonly pending = new Set<Promise<unknown>>();
  private unsubscribeReports: (() => void) | null = null;
  private drainingAdopted: ((instanceId: string, group: string) => void) | null = null;
  private stopped = false;
  private started = false;
  private paused = false;
  /** Groups handed to the scope ownership, so a restore can untrack the ones it removed. */
  private readonly trackedGroups = new Set<string>();
  private readonly scopeListener = {
    // Adopted records are checked against the nodes at once: a final report may have passed while nobody owned them.
    // Their player counts are read from the registry too: a count the previous owner never wrote is repaired.
    acquired: (scope: string, token: number) =>
      this.track(
        this.scopes.acquired(scope, token).then(() => {
          this.reconciler.request();
          return this.countSync?.sweep();
        }),
      ),
    lost: (scope: string) => this.scopes.lost(scope),
  };

  constructor(private readonly options: SchedulerHostOptions) {
    const { clock, logger } = options;
    const tuning = (this.tuning = { ...defaultSchedulerTuning, ...options.tuning });
    const { live, supervised } = this;
    const track = (work: Promise<unknown>) => this.track(work);
    const toGroup: ScopeLifecycle["toGroup"] = (group, event) => this.scopes.toGroup(group, event);
    const toInstance: ScopeLifecycle["toInstance"] = (instanceId, event) => this.scopes.toInstance(instanceId, event);
    const fencingTokenOf = (group: string) => this.scopes.fencingTokenOf(group);
    this.ticks = new SchedulerTicks({
      clock,
      tickDuration: options.metrics.schedulerTickDuration,
      groupsEvaluated: options.metrics.schedulerGroupsEvaluated,
      tickIntervalMs: tuning.evaluationIntervalMs,
    });

    this.evaluator = new GroupEvaluator({
      groups: options.groups,
      instances: options.instances,
      nodes: options.nodes,
      live,
      clock,
      logger,
      nodeListCacheMs: tuning.nodeListCacheMs,
      startingPerNodeMax: tuning.startingPerNodeMax,
      fencingTokenOf,
      ensureCurrent: (group) => this.scopes.ensureCurrent(group),
      instanceAdded: (instance) => this.scopes.instanceAdded(instance),
      toInstance,
      nodesSeen: (nodes) => this.nodes.seen(nodes),
      revisions: options.revisions,
      loadSamples: options.loadSamples,
    });
    this.dispatch = new CommandDispatch({
      daemons: options.daemons,
      instances: options.instances,
      groups: options.groups,
      credentials: options.credentials,
      revisions: options.revisions,
      live,
      supervised,
      logger,
      fencingTokenOf,
      toInstance,
      track,
    });
    this.reports = new DaemonReportRouter({
      live,
      instances: options.instances,
      events: options.events,
      logger,
      clock,
      isSupervised: (id) => supervised.has(id),
      toInstance,
      forceStopStray: (nodeId, instanceId, group) => this.dispatch.forceStopStray(nodeId, instanceId, group),
    });
    this.crashes = new CrashRecorder({
      crashes: options.crashes,
      groups: options.groups,
      events: options.events,
      metrics: options.metrics,
      clock,
      logger,
      crashLoop: options.crashLoop,
      takeCrashDetails: (id) => this.reports.takeCrashDetails(id),
      toGroup,
    });
    this.records = new InstanceRecordWriter({
      instances: options.instances,
      events: options.events,
      clock,
      logger,
      live,
      supervised,
      ensureCurrent: (group) => this.scopes.ensureCurrent(group),
      toGroup,
      instanceFinished: (group, id) => this.scopes.instanceFinished(group, id),
      startSlotFreed: () => {
        for (const group of this.evaluator.takeGroupsWaitingForSlots()) toGroup(group, { type: "CHANGED" });
      },
      track,
    });
    this.scopes = new ScopeLifecycle({
      groups: options.groups,
      instances: options.instances,
      scopes: options.scopes,
      live,
      supervised,
      clock,
      logger,
      tuning,
      inspect: (event) => this.records.observe(event),
      completeStop: (doc, kind) => {
        // A STOPPING actor has no way to send the stop again: the command goes out directly.
        if (doc.state === "STOPPING") track(this.dispatch.stop({ instanceId: doc.id, group: doc.group, node: doc.node }, kind === "FORCE_STOP"));
        else toInstance(doc.id, { type: kind });
      },
      adoptedDraining: (doc) => this.drainingAdopted?.(doc.id, doc.group),
      effects: {
        instances: {
          dispatch: (ref) => track(this.dispatch.dispatch(ref)),
          stop: (ref) => track(this.dispatch.stop(ref, false)),
          forceStop: (ref) => track(this.dispatch.stop(ref, true)),
          announceDrain: (ref) => options.events.publish(EventTypes.INSTANCE_DRAINING, { instanceId: ref.instanceId, group: ref.group, nodeId: ref.node }),
          crashed: (ref, cause) => track(this.crashes.record(ref, cause)),
          lost: (ref) => track(this.crashes.record(ref, { kind: "FAILURE", reason: "NODE_LOST" }, false)),
          timedOut: (ref, delay) => track(this.crashes.record(ref, { kind: "FAILURE", reason: `TIMEOUT:${delay}` })),
          stopUnconfirmed: (ref) => logger.warn(`Instance ${ref.instanceId} on ${ref.node}: no exit confirmed after a force-stop; recorded as STOPPED`),
        },
        groups: {
          evaluate: (group, signal) => this.ticks.measure(group, () => this.evaluator.evaluate(group, signal)),
          crashLoop: (group, loop) => track(this.crashes.pauseGroup(group, loop)),
          resumed: (group) => {
            this.crashes.reset(group);
            track(options.groups.setSchedulingState(group, { paused: false }));
          },
          stopInstances: (group) => {
            for (const instance of live.ofGroup(group)) toInstance(instance.id, { type: "STOP" });
          },
          evaluationFailed: (group, error) => {
            options.metrics.schedulerTickFailures.inc();
            this.ticks.failed();
            if (error instanceof ScopeLostError) logger.warn(`Evaluation of group ${group} aborted: ${error.message}`);
            else logger.error(`Evaluation of group ${group} failed`, error);
          },
        },
      },
    });
    this.operations = new InstanceOperations({
      instances: options.instances,
      groups: options.groups,
      scopes: options.scopes,
      live,
      supervised,
      logger,
      fencingTokenOf,
      send: (nodeId, command) => this.dispatch.send(nodeId, command),
      savePlayerCount: (id, count, fenced) => this.records.savePlayerCount(id, count, fenced),
      // While no scheduler runs here nobody is shadowed: the count is written where it was reported.
      writesRecordOf: (id) => !this.started || supervised.has(id),
      playerCountWritten: (id, group) => this.countWritten?.(id, group),
      requestStop: (id, group, kind) => this.records.requestStop(id, group, kind),
      toInstance,
      toGroup,
    });
    this.nodes = new NodeWatch({
      nodes: options.nodes,
      live,
      supervised,
      clock,
      logger,
      nodeTimeouts: tuning.nodeTimeouts,
      toInstance,
      invalidateNodes: () => this.evaluator.invalidateNodes(),
      reconnected: (nodeId) => this.dispatch.redispatchScheduled(nodeId),
      capacityAdded: () => this.scopes.changedEverywhere(),
      track,
    });
    this.reconciler = new NodeReconciler({
      live,
      supervised,
      clock,
      logger,
      intervalMs: tuning.reconcileIntervalMs,
      otherNodes: async () => (await options.nodes.list()).filter((node) => node.state !== "OFFLINE").map((node) => node.id),
      listInstances: async (nodeId) => {
        const result = await this.dispatch.send(nodeId, { type: "list_instances", body: {} });
        return result.ok ? (result.instances ?? []) : null;
      },
      reconcile: (nodeId, reports, asked) => this.reports.reconcile(nodeId, reports, asked),
      ownsAnything: () => this.scopes.ownsAnything(),
    });
    const { playerCounts } = options;
    this.countSync = playerCounts
      ? new PlayerCountSync({
          supervised,
          live,
          clock,
          logger,
          intervalMs: tuning.playerCountSyncIntervalMs,
          counts: (ids) => playerCounts(ids),
          apply: (id, count) => this.operations.playerCountChanged(id, count),
        })
      : null;
    this.sweeper = new FinishedSweeper({
      groups: options.groups,
      instances: options.instances,
      scopes: options.scopes,
      live,
      clock,
      finishedRetentionMs: tuning.finishedRetentionMs,
      evaluationIntervalMs: tuning.evaluationIntervalMs,
      isOwned: (group) => this.scopes.isOwned(group),
      track,
    });
  }

  /** Loads the nodes, subscribes to events and daemon reports, and starts owning scopes. */
  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    const { events } = this.options;
    const toGroup: ScopeLifecycle["toGroup"] = (group, event) => this.scopes.toGroup(group, event);
    const nodeEvent = (nodeId: unknown, type: "CONNECTED" | "DISCONNECTED" | "DRAIN" | "UNDRAIN") => this.nodes.event(String(nodeId), { type });
    this.subscriptions.push(
      events.subscribe(EventTypes.GROUP_CREATED, (e) => this.groupCreated(String(e.data.groupName))),
      events.subscribe(EventTypes.GROUP_UPDATED, (e) => toGroup(String(e.data.groupName), { type: "CHANGED" })),
      events.subscribe(EventTypes.GROUP_DELETED, (e) => this.groupDeleted(String(e.data.groupName))),
      events.subscribe(EventTypes.GROUP_MAINTENANCE_CHANGED, (e) =>
        toGroup(String(e.data.groupName), { type: e.data.maintenance === true ? "MAINTENANCE_ON" : "MAINTENANCE_OFF" }),
      ),
      events.subscribe(EventTypes.NODE_CONNECTED, (e) => nodeEvent(e.data.nodeId, "CONNECTED")),
      events.subscribe(EventTypes.NODE_DISCONNECTED, (e) => nodeEvent(e.data.nodeId, "DISCONNECTED")),
      events.subscribe(EventTypes.NODE_DRAIN_REQUESTED, (e) => nodeEvent(e.data.nodeId, "DRAIN")),
      events.subscribe(EventTypes.NODE_DRAIN_COMPLETED, (e) => nodeEvent(e.data.nodeId, "UNDRAIN")),
      // A player route handled by another controller changed the registry: the owner writes the count.
      ...[EventTypes.PLAYER_CONNECTED, EventTypes.PLAYER_DISCONNECTED].map((type) =>
        events.subscribe(type, (e) => {
          if (e.source.startsWith("peer:")) this.track(this.countSync?.refresh([String(e.data.instanceId)]) ?? Promise.resolve());
        }),
      ),
    );
    this.unsubscribeReports = this.options.daemons.onReport((report) => this.reports.route(report));
    await this.nodes.start();
    // Every live instance, whichever controller schedules it: placement needs every reservation.
    // Their states are followed once their group's scope is acquired here (put again then).
    for (const doc of await this.options.instances.findDocs()) if (!FINISHED_STATES.has(doc.state)) this.live.put(doc, false);
    const groups = await this.options.groups.listDocs();
    for (const group of groups) this.trackGroup(group.name);
    await this.options.scopes.start(this.scopeListener);
    this.sweeper.start();
    this.reconciler.start();
    this.ticks.start();
    this.countSync?.start();
  }

  /**
   * A restore is about to replace the records: every owned scope is given up (its actors stop, the
   * processes keep running, the leases are released so the restoring controller sees the cluster
   * quiet) and nothing is acquired or swept until {@link resumeScheduling}.
   */
  async pauseScheduling(): Promise<void> {
    if (!this.started || this.stopped || this.paused) return;
    this.paused = true;
    this.sweeper.stop();
    await this.options.scopes.stop();
    this.scopes.releaseAll();
    let timer: Timer | undefined;
    await Promise.race([this.settle(), new Promise<void>((resolve) => (timer = this.options.clock.setTimeout(resolve, stopSettleTimeoutMs, { unref: true })))]);
    timer?.cancel();
  }

  /**
   * The records were replaced (or the restore gave up): the in-memory view is read again from the
   * store, the groups found there are tracked (the others untracked), and scopes are acquired and
   * adopted from the restored records as at a start.
   */
  async resumeScheduling(): Promise<void> {
    if (!this.paused || this.stopped) return;
    this.live.clear();
    for (const doc of await this.options.instances.findDocs()) if (!FINISHED_STATES.has(doc.state)) this.live.put(doc, false);
    const names = new Set((await this.options.groups.listDocs()).map((g) => g.name));
    for (const name of this.trackedGroups) {
      if (names.has(name)) continue;
      this.options.scopes.untrack(name);
      this.crashes.reset(name);
      this.evaluator.forget(name);
    }
    this.trackedGroups.clear();
    for (const name of names) this.trackGroup(name);
    this.evaluator.invalidateNodes();
    this.paused = false;
    await this.options.scopes.start(this.scopeListener);
    this.sweeper.start();
  }

  /** Stops every actor (the processes keep running) and waits for record writes under way. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    for (const s of this.subscriptions) s.unsubscribe();
    this.unsubscribeReports?.();
    this.sweeper.stop();
    this.reconciler.stop();
    this.ticks.stop();
    await this.countSync?.stop();
    await this.options.scopes.stop();
    this.scopes.stop();
    this.nodes.stop();
    // Record writes under way finish; a command waiting for a daemon's answer is not waited for.
    let timer: Timer | undefined;
    await Promise.race([this.settle(), new Promise<void>((resolve) => (timer = this.options.clock.setTimeout(resolve, stopSettleTimeoutMs, { unref: true })))]);
    timer?.cancel();
  }

  /** Where console lines of instances go (the console hub of the console streams). */
  setConsole(sink: ConsoleSink): void {
    this.reports.console = sink;
  }

  /** Called after a player count was written to an instance's record here (the group's aggregates changed). */
  onPlayerCountWritten(listener: (instanceId: string, group: string) => void): void {
    this.countWritten = listener;
  }

  /**
   * Called for every instance adopted in DRAINING (a scope taken over mid-drain): whoever moves a
   * draining instance's players (the drain transfers) carries on with it here, since no state
   * change announces it.
   */
  onDrainingAdopted(listener: (instanceId: string, group: string) => void): void {
    this.drainingAdopted = listener;
  }

  /** `cloud_scheduler_last_tick_lag_millis`: ms since the last successful tick, 0 before the first. */
  lastTickLagMs(): number {
    return this.ticks.lastTickLagMs();
  }

  /**
   * Workflows waiting here (the `cloud_workflows_*` gauges): instance starts whose dispatch failed
   * and waits for the actor's next attempt, and healing actions (supervised instances on a node that
   * is UNREACHABLE, replaced when its grace period ends).
   */
  waitingWorkflows(): { startRetries: number; healingActions: number } {
    let healingActions = 0;
    for (const id of this.supervised.ids()) {
      const node = this.live.get(id)?.node;
      if (node !== undefined && this.nodes.stateOf(node) === "UNREACHABLE") healingActions += 1;
    }
    return { startRetries: this.dispatch.startRetriesWaiting(), healingActions };
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
    this.crashes.reset(group);
    await this.options.groups.setSchedulingState(group, { paused: false });
    this.scopes.toGroup(group, { type: "RESUME" });
  }

  /**
   * Graceful stop of an instance (the platform's stop command, then SIGTERM, then SIGKILL). When
   * another controller schedules the group, the command goes straight to the daemon under the
   * holder's fencing token; the holder's actor follows the daemon's STOPPING report.
   */
  stopInstance(id: string, force: boolean): Promise<void> {
    return this.operations.stopInstance(id, force);
  }

  /** Writes one line to the instance's standard input. */
  sendCommand(id: string, line: string): Promise<void> {
    return this.operations.sendCommand(id, line);
  }

  /** The in-server plugin reported ready: RUNNING, and the daemon is told (plugin readiness). */
  markReady(id: string): Promise<void> {
    return this.operations.markReady(id);
  }

  /** The player count of an instance changed (plugin player routes). */
  playerCountChanged(id: string, playerCount: number): Promise<void> {
    return this.operations.playerCountChanged(id, playerCount);
  }

  /** The fencing token of a group's scope while owned, else null. */
  fencingTokenOf(group: string): number | null {
    return this.scopes.fencingTokenOf(group);
  }

  /** Whether this controller schedules `group` right now. */
  isOwned(group: string): boolean {
    return this.scopes.isOwned(group);
  }

  // ---- the deployments seam (instance-lifecycle.ts) ----

  async startInstanceOfRevision(group: string, revision: number): Promise<RevisionStart> {
    if (!this.isOwned(group)) throw conflict(`Group ${group} is scheduled by another controller`, "NOT_OWNER");
    return this.evaluator.startInstanceOfRevision(group, revision);
  }

  retireInstance(instanceId: string, how: "DRAIN" | "STOP"): void {
    this.scopes.toInstance(instanceId, { type: how });
  }

  onInstanceState(listener: InstanceStateListener): () => void {
    return this.records.onStateChange(listener);
  }

  // ---- groups ----

  private trackGroup(name: string): void {
    this.trackedGroups.add(name);
    this.options.scopes.track(name);
  }

  private async groupCreated(name: string): Promise<void> {
    this.trackGroup(name);
    await this.scopes.groupCreated(name);
  }

  private groupDeleted(name: string): void {
    this.scopes.toGroup(name, { type: "DELETED" });
    this.crashes.reset(name);
    this.evaluator.forget(name);
    this.scopes.groupRemoved(name);
    // The scope stays tracked until its instances stopped; the sweep untracks it.
    this.sweeper.groupDeleted(name);
  }

  private track<T>(work: Promise<T>): void {
    const tracked = work.catch((err: unknown) => this.options.logger.error("Scheduler background work failed", err));
    this.pending.add(tracked);
    void tracked.finally(() => this.pending.delete(tracked));
  }
}
