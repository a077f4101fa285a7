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
 *   is acquired and every `reconcileIntervalMs`;
 * - {@link PlacementView} and `PlacementRepair`: the reservations of every node, shared with the
 *   other controllers through the key-value store, claimed atomically and repaired each round;
 * - `DeletedGroupStrays`: what a deleted group left running is stopped.
 *
 * The parts are built and wired in scheduler-parts.ts.
 *
 * Ownership: every write of an instance record and every daemon command happens only while the
 * instance's scope is owned, fenced by {@link ScopeOwnership.ensureCurrent} and stamped with the
 * scope's fencing token. Losing a scope stops its actors in one transition; the processes keep
 * running and the next owner adopts them from the records.
 */
import { EventTypes } from "../events/event-types.js";
import type { Subscription } from "../events/types.js";
import type { Timer } from "../shared/clock.js";
import { conflict } from "../shared/errors.js";
import type { ConsoleSink } from "./daemon-report-router.js";
import type { InstanceLifecycle, InstanceStateListener, RevisionStart } from "./instance-lifecycle.js";
import { LiveInstances } from "./live-instances.js";
import { PlacementView } from "./placement-view.js";
import { buildSchedulerParts, stopSettleTimeoutMs, type SchedulerHostOptions, type SchedulerParts } from "./scheduler-parts.js";
import { defaultSchedulerTuning, type SchedulerTuning } from "./scheduler-tuning.js";
import { SupervisedInstances } from "./supervised-instances.js";

export { defaultSchedulerTuning, type SchedulerTuning } from "./scheduler-tuning.js";
export { stopSettleTimeoutMs, type DaemonLink, type SchedulerHostOptions } from "./scheduler-parts.js";

/** The result of `POST /api/v1/groups/{group}/start`. */
export interface ExplicitStartResult {
  count: number;
  reason?: string;
}

/** Runs the scheduling actors of the scopes this controller owns. */
export class SchedulerHost implements InstanceLifecycle {
  readonly tuning: SchedulerTuning;
  readonly live = new LiveInstances();
  /** Every reservation on every node, whichever controller made it. */
  readonly view: PlacementView;
  private readonly supervised = new SupervisedInstances();
  private readonly parts: SchedulerParts;
  private countWritten: ((instanceId: string, group: string) => void) | null = null;
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
        this.parts.scopes.acquired(scope, token).then(() => {
          this.parts.reconciler.request();
          return this.parts.countSync?.sweep();
        }),
      ),
    lost: (scope: string) => this.parts.scopes.lost(scope),
  };

  constructor(private readonly options: SchedulerHostOptions) {
    this.tuning = { ...defaultSchedulerTuning, ...options.tuning };
    this.view = new PlacementView(options.kv);
    this.parts = buildSchedulerParts(options, {
      tuning: this.tuning,
      live: this.live,
      supervised: this.supervised,
      view: this.view,
      track: (work) => this.track(work),
      isStarted: () => this.started,
      playerCountWritten: (id, group) => this.countWritten?.(id, group),
      drainingAdopted: (id, group) => this.drainingAdopted?.(id, group),
      trackGroup: (group) => this.trackGroup(group),
    });
  }

  /** Loads the nodes, subscribes to events and daemon reports, and starts owning scopes. */
  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    const { events } = this.options;
    const toGroup: SchedulerParts["scopes"]["toGroup"] = (group, event) => this.parts.scopes.toGroup(group, event);
    const nodeEvent = (nodeId: unknown, type: "CONNECTED" | "DISCONNECTED" | "DRAIN" | "UNDRAIN", epoch?: unknown) =>
      this.parts.nodes.event(String(nodeId), { type }, typeof epoch === "number" ? epoch : undefined);
    this.subscriptions.push(
      events.subscribe(EventTypes.GROUP_CREATED, (e) => this.groupCreated(String(e.data.groupName))),
      events.subscribe(EventTypes.GROUP_UPDATED, (e) => toGroup(String(e.data.groupName), { type: "CHANGED" })),
      events.subscribe(EventTypes.GROUP_DELETED, (e) => this.groupDeleted(String(e.data.groupName))),
      events.subscribe(EventTypes.GROUP_MAINTENANCE_CHANGED, (e) =>
        toGroup(String(e.data.groupName), { type: e.data.maintenance === true ? "MAINTENANCE_ON" : "MAINTENANCE_OFF" }),
      ),
      events.subscribe(EventTypes.NODE_CONNECTED, (e) => nodeEvent(e.data.nodeId, "CONNECTED", e.data.sessionEpoch)),
      events.subscribe(EventTypes.NODE_DISCONNECTED, (e) => nodeEvent(e.data.nodeId, "DISCONNECTED", e.data.sessionEpoch)),
      events.subscribe(EventTypes.NODE_DRAIN_REQUESTED, (e) => nodeEvent(e.data.nodeId, "DRAIN")),
      events.subscribe(EventTypes.NODE_DRAIN_COMPLETED, (e) => nodeEvent(e.data.nodeId, "UNDRAIN")),
      // A player route handled by another controller changed the registry: the owner writes the count.
      ...[EventTypes.PLAYER_CONNECTED, EventTypes.PLAYER_DISCONNECTED].map((type) =>
        events.subscribe(type, (e) => {
          if (e.source.startsWith("peer:")) this.track(this.parts.countSync?.refresh([String(e.data.instanceId)]) ?? Promise.resolve());
        }),
      ),
    );
    this.unsubscribeReports = this.options.daemons.onReport((report) => this.parts.reports.route(report));
    await this.parts.nodes.start();
    // Every reservation on every node, whichever controller made it (read again every reconcile interval).
    await this.view.refresh();
    const groups = await this.options.groups.listDocs();
    for (const group of groups) this.trackGroup(group.name);
    await this.options.scopes.start(this.scopeListener);
    this.parts.sweeper.start();
    this.parts.reconciler.start();
    this.parts.ticks.start();
    this.parts.countSync?.start();
  }

  /**
   * A restore is about to replace the records: every owned scope is given up (its actors stop, the
   * processes keep running, the leases are released so the restoring controller sees the cluster
   * quiet) and nothing is acquired or swept until {@link resumeScheduling}.
   */
  async pauseScheduling(): Promise<void> {
    if (!this.started || this.stopped || this.paused) return;
    this.paused = true;
    this.parts.sweeper.stop();
    await this.options.scopes.stop();
    this.parts.scopes.releaseAll();
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
    await this.view.refresh();
    const names = new Set((await this.options.groups.listDocs()).map((g) => g.name));
    for (const name of this.trackedGroups) {
      if (names.has(name)) continue;
      this.options.scopes.untrack(name);
      this.parts.crashes.reset(name);
      this.parts.evaluator.forget(name);
    }
    this.trackedGroups.clear();
    for (const name of names) this.trackGroup(name);
    this.parts.evaluator.invalidateNodes();
    this.paused = false;
    await this.options.scopes.start(this.scopeListener);
    this.parts.sweeper.start();
  }

  /** Stops every actor (the processes keep running) and waits for record writes under way. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    for (const s of this.subscriptions) s.unsubscribe();
    this.unsubscribeReports?.();
    this.parts.sweeper.stop();
    this.parts.reconciler.stop();
    this.parts.strays.stop();
    this.parts.ticks.stop();
    await this.parts.countSync?.stop();
    await this.options.scopes.stop();
    this.parts.scopes.stop();
    this.parts.nodes.stop();
    // Record writes under way finish; a command waiting for a daemon's answer is not waited for.
    let timer: Timer | undefined;
    await Promise.race([this.settle(), new Promise<void>((resolve) => (timer = this.options.clock.setTimeout(resolve, stopSettleTimeoutMs, { unref: true })))]);
    timer?.cancel();
  }

  /** Where console lines of instances go (the console hub of the console streams). */
  setConsole(sink: ConsoleSink): void {
    this.parts.reports.console = sink;
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
    return this.parts.ticks.lastTickLagMs();
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
      if (node !== undefined && this.parts.nodes.stateOf(node) === "UNREACHABLE") healingActions += 1;
    }
    return { startRetries: this.parts.dispatch.startRetriesWaiting(), healingActions };
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
    return this.parts.evaluator.startExplicitly(group);
  }

  /** `POST /api/v1/groups/{group}/resume`: ends a crash-loop pause. */
  async resume(group: string): Promise<void> {
    this.parts.crashes.reset(group);
    await this.options.groups.setSchedulingState(group, { paused: false });
    this.parts.scopes.toGroup(group, { type: "RESUME" });
  }

  /**
   * Graceful stop of an instance (the platform's stop command, then SIGTERM, then SIGKILL). When
   * another controller schedules the group, the command goes straight to the daemon under the
   * holder's fencing token; the holder's actor follows the daemon's STOPPING report.
   */
  stopInstance(id: string, force: boolean): Promise<void> {
    return this.parts.operations.stopInstance(id, force);
  }

  /** Writes one line to the instance's standard input. */
  sendCommand(id: string, line: string): Promise<void> {
    return this.parts.operations.sendCommand(id, line);
  }

  /** The in-server plugin reported ready: RUNNING, and the daemon is told (plugin readiness). */
  markReady(id: string): Promise<void> {
    return this.parts.operations.markReady(id);
  }

  /** The player count of an instance changed (plugin player routes). */
  playerCountChanged(id: string, playerCount: number): Promise<void> {
    return this.parts.operations.playerCountChanged(id, playerCount);
  }

  /** The fencing token of a group's scope while owned, else null. */
  fencingTokenOf(group: string): number | null {
    return this.parts.scopes.fencingTokenOf(group);
  }

  /** Start pacing per node from now on (the cluster-shared `scheduler.maxStartingPerNode`); 0: no limit. */
  setStartingPerNodeMax(value: number): void {
    this.tuning.startingPerNodeMax = value;
  }

  /** Whether this controller schedules `group` right now. */
  isOwned(group: string): boolean {
    return this.parts.scopes.isOwned(group);
  }

  // ---- the deployments seam (instance-lifecycle.ts) ----

  async startInstanceOfRevision(group: string, revision: number): Promise<RevisionStart> {
    if (!this.isOwned(group)) throw conflict(`Group ${group} is scheduled by another controller`, "NOT_OWNER");
    return this.parts.evaluator.startInstanceOfRevision(group, revision);
  }

  retireInstance(instanceId: string, how: "DRAIN" | "STOP"): void {
    this.parts.scopes.toInstance(instanceId, { type: how });
  }

  onInstanceState(listener: InstanceStateListener): () => void {
    return this.parts.records.onStateChange(listener);
  }

  // ---- groups ----

  private trackGroup(name: string): void {
    this.trackedGroups.add(name);
    this.options.scopes.track(name);
  }

  private async groupCreated(name: string): Promise<void> {
    this.trackGroup(name);
    await this.parts.scopes.groupCreated(name);
  }

  private groupDeleted(name: string): void {
    this.parts.scopes.toGroup(name, { type: "DELETED" });
    this.parts.crashes.reset(name);
    this.parts.evaluator.forget(name);
    this.parts.scopes.groupRemoved(name);
    // The scope stays tracked until its instances stopped; the sweep untracks it.
    this.parts.sweeper.groupDeleted(name);
  }

  private track<T>(work: Promise<T>): void {
    const tracked = work.catch((err: unknown) => this.options.logger.error("Scheduler background work failed", err));
    this.pending.add(tracked);
    void tracked.finally(() => this.pending.delete(tracked));
  }
}
