/**
 * The parts of the scheduler host (scheduler-host.ts), built and wired to each other: every part
 * receives its dependencies as narrow ports, and a part that needs another reaches it through the
 * `parts` object filled here, so the order of construction does not matter. The host keeps what
 * the parts share (the live view, the supervised instances, the placement view, the background
 * work) and hands it in as {@link HostContext}.
 */
import type { CrashService } from "../domain/crashes/crash-service.js";
import type { GroupService } from "../domain/groups/group-service.js";
import type { InstanceService } from "../domain/instances/instance-service.js";
import type { NodeService } from "../domain/nodes/node-service.js";
import { EventTypes } from "../events/event-types.js";
import type { EventBus } from "../events/types.js";
import type { DaemonReport } from "../wire/daemon-proto.js";
import type { Logger } from "../logs/types.js";
import type { MetricsService } from "../metrics/metrics.js";
import type { Clock } from "../shared/clock.js";
import type { KvStore } from "../store/ports.js";
import { CommandDispatch, type DaemonCommands, type WorkloadTokens } from "./command-dispatch.js";
import { CrashRecorder } from "./crash-recorder.js";
import type { CrashLoopOptions } from "./crash-loop.js";
import { DaemonReportRouter } from "./daemon-report-router.js";
import { DeletedGroupStrays } from "./deleted-group-strays.js";
import { FinishedSweeper } from "./finished-sweeper.js";
import { GroupEvaluator, type GroupEvaluatorDeps } from "./group-evaluator.js";
import type { RevisionSource } from "./instance-lifecycle.js";
import { InstanceOperations } from "./instance-operations.js";
import { InstanceRecordWriter } from "./instance-record-writer.js";
import type { LiveInstances } from "./live-instances.js";
import { NodeReconciler } from "./node-reconciler.js";
import { NodeWatch } from "./node-watch.js";
import { PlacementRepair } from "./placement-repair.js";
import type { PlacementView } from "./placement-view.js";
import { PlayerCountSync } from "./player-count-sync.js";
import type { LoadSample } from "./scaling.js";
import type { SchedulerTuning } from "./scheduler-tuning.js";
import { SchedulerTicks } from "./scheduler-ticks.js";
import { ScopeLifecycle } from "./scope-lifecycle.js";
import { ScopeLostError, type ScopeOwnership } from "./scopes.js";
import type { SupervisedInstances } from "./supervised-instances.js";

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
  /** The shared key-value store: the placement ledgers every controller claims reservations in. */
  kv: KvStore;
  /** Whether any controller holds a daemon session of a node: a node that has one is never lost. */
  sessionHeld(nodeId: string): Promise<boolean>;
  /**
   * A fencing token the daemons accept for a group nobody schedules any more (deleted): its
   * processes found running are force-stopped with it. Absent: only owned groups' strays are.
   */
  strayFencingToken?(group: string): Promise<number>;
  tuning?: Partial<SchedulerTuning>;
  /** Frozen group revisions (deployments); without it instances carry revision 0. */
  revisions?: RevisionSource;
  /** The instances' latest reported load (metrics snapshots), for groups that scale on load. */
  loadSamples?(instanceIds: readonly string[]): Promise<LoadSample[]>;
  /** The player registry's count of each instance (absent: none); without it the counts are only those reported here. */
  playerCounts?(instanceIds: readonly string[]): Promise<Map<string, number>>;
  /**
   * This controller never starts its scheduler (the component is off): nothing here is owned, so a
   * player count is written where it is reported, unfenced. Absent: counts are written by owners only.
   */
  runsNoScheduler?: boolean;
  /** Whether a revision's catalog build can be started (the build mirror); without it builds are not checked. */
  buildCheck?: GroupEvaluatorDeps["buildCheck"];
}

/** The parts of the host, each with one job (scheduler-host.md, "Parts of the host"). */
export interface SchedulerParts {
  ticks: SchedulerTicks;
  evaluator: GroupEvaluator;
  dispatch: CommandDispatch;
  reports: DaemonReportRouter;
  crashes: CrashRecorder;
  records: InstanceRecordWriter;
  scopes: ScopeLifecycle;
  operations: InstanceOperations;
  nodes: NodeWatch;
  reconciler: NodeReconciler;
  countSync: PlayerCountSync | null;
  sweeper: FinishedSweeper;
  strays: DeletedGroupStrays;
}

/** What the host shares with its parts. */
export interface HostContext {
  tuning: SchedulerTuning;
  live: LiveInstances;
  supervised: SupervisedInstances;
  view: PlacementView;
  track(work: Promise<unknown>): void;
  /** True once the host started (a host that never starts writes player counts where they are reported). */
  isStarted(): boolean;
  playerCountWritten(instanceId: string, group: string): void;
  drainingAdopted(instanceId: string, group: string): void;
  /** Hands a group to the scope ownership. */
  trackGroup(group: string): void;
}

/** Builds the host's parts over `options`, wired to each other and to `host`. */
export function buildSchedulerParts(options: SchedulerHostOptions, host: HostContext): SchedulerParts {
  // Filled below; the ports read it only when called, once every part exists.
  const p = {} as SchedulerParts;
  const { clock, logger } = options;
  const { tuning, live, supervised, view, track } = host;
  const toGroup: ScopeLifecycle["toGroup"] = (group, event) => p.scopes.toGroup(group, event);
  const toInstance: ScopeLifecycle["toInstance"] = (instanceId, event) => p.scopes.toInstance(instanceId, event);
  const fencingTokenOf = (group: string) => p.scopes.fencingTokenOf(group);
  p.ticks = new SchedulerTicks({
    clock,
    tickDuration: options.metrics.schedulerTickDuration,
    groupsEvaluated: options.metrics.schedulerGroupsEvaluated,
    tickIntervalMs: tuning.evaluationIntervalMs,
  });

  p.evaluator = new GroupEvaluator({
    groups: options.groups,
    instances: options.instances,
    nodes: options.nodes,
    live,
    view,
    clock,
    logger,
    nodeListCacheMs: tuning.nodeListCacheMs,
    refusalBackoffMs: tuning.evaluationIntervalMs,
    // Read at every evaluation: the cluster-shared config changes it while the scheduler runs.
    get startingPerNodeMax() {
      return tuning.startingPerNodeMax;
    },
    fencingTokenOf,
    ensureCurrent: (group) => p.scopes.ensureCurrent(group),
    instanceAdded: (instance) => p.scopes.instanceAdded(instance),
    toInstance,
    nodesSeen: (nodes) => p.nodes.seen(nodes),
    revisions: options.revisions,
    loadSamples: options.loadSamples,
    buildCheck: options.buildCheck,
    compositionPlanningFailed: () => options.metrics.compositionPlanningFailures.inc(),
  });
  p.dispatch = new CommandDispatch({
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
    refusedByNode: (ref, code, message) => track(p.evaluator.nodeRefused(ref.group, ref.node, code, message)),
    track,
  });
  p.reports = new DaemonReportRouter({
    live,
    instances: options.instances,
    events: options.events,
    logger,
    clock,
    isSupervised: (id) => supervised.has(id),
    toInstance,
    forceStopStray: (nodeId, instanceId, group) => p.strays.stopStray(nodeId, instanceId, group),
    liveElsewhere: (group) => p.strays.liveElsewhere(group),
  });
  p.crashes = new CrashRecorder({
    crashes: options.crashes,
    groups: options.groups,
    events: options.events,
    metrics: options.metrics,
    clock,
    logger,
    crashLoop: options.crashLoop,
    takeCrashDetails: (id) => p.reports.takeCrashDetails(id),
    toGroup,
  });
  p.records = new InstanceRecordWriter({
    instances: options.instances,
    events: options.events,
    clock,
    logger,
    live,
    supervised,
    ensureCurrent: (group) => p.scopes.ensureCurrent(group),
    toGroup,
    instanceFinished: (group, id) => {
      // The process is gone: its port and memory are free for every controller.
      const node = live.get(id)?.node;
      if (node !== undefined) track(view.release(id, node));
      p.scopes.instanceFinished(group, id);
    },
    startSlotFreed: () => {
      for (const group of p.evaluator.takeGroupsWaitingForSlots()) toGroup(group, { type: "CHANGED" });
    },
    track,
  });
  p.records.onStateChange((change) => track(p.crashes.stateChanged(change)));
  p.scopes = new ScopeLifecycle({
    groups: options.groups,
    instances: options.instances,
    scopes: options.scopes,
    live,
    supervised,
    clock,
    logger,
    tuning,
    inspect: (event) => p.records.observe(event),
    completeStop: (doc, kind) => {
      // A STOPPING actor has no way to send the stop again: the command goes out directly.
      if (doc.state === "STOPPING") track(p.dispatch.stop({ instanceId: doc.id, group: doc.group, node: doc.node }, kind === "FORCE_STOP"));
      else toInstance(doc.id, { type: kind });
    },
    adoptedDraining: (doc) => host.drainingAdopted(doc.id, doc.group),
    effects: {
      instances: {
        dispatch: (ref) => track(p.dispatch.dispatch(ref)),
        stop: (ref) => track(p.dispatch.stop(ref, false)),
        forceStop: (ref) => track(p.dispatch.stop(ref, true)),
        announceDrain: (ref) => options.events.publish(EventTypes.INSTANCE_DRAINING, { instanceId: ref.instanceId, group: ref.group, nodeId: ref.node }),
        crashed: (ref, cause) => track(p.crashes.record(ref, cause)),
        lost: (ref) => track(p.crashes.record(ref, { kind: "FAILURE", reason: "NODE_LOST" }, false)),
        timedOut: (ref, delay) => track(p.crashes.record(ref, { kind: "FAILURE", reason: `TIMEOUT:${delay}` })),
        stopUnconfirmed: (ref) => logger.warn(`Instance ${ref.instanceId} on ${ref.node}: no exit confirmed after a force-stop; recorded as STOPPED`),
      },
      groups: {
        evaluate: (group, signal) => p.ticks.measure(group, () => p.evaluator.evaluate(group, signal)),
        crashLoop: (group, loop) => track(p.crashes.pauseGroup(group, loop)),
        resumed: (group) => {
          p.crashes.reset(group);
          track(options.groups.setSchedulingState(group, { paused: false }));
        },
        stopInstances: (group) => {
          for (const instance of live.ofGroup(group)) toInstance(instance.id, { type: "STOP" });
        },
        evaluationFailed: (group, error) => {
          options.metrics.schedulerTickFailures.inc();
          p.ticks.failed();
          if (error instanceof ScopeLostError) logger.warn(`Evaluation of group ${group} aborted: ${error.message}`);
          else logger.error(`Evaluation of group ${group} failed`, error);
        },
      },
    },
  });
  p.operations = new InstanceOperations({
    instances: options.instances,
    groups: options.groups,
    scopes: options.scopes,
    live,
    supervised,
    logger,
    fencingTokenOf,
    send: (nodeId, command) => p.dispatch.send(nodeId, command),
    savePlayerCount: (id, count, fenced) => p.records.savePlayerCount(id, count, fenced),
    // Only the owner writes a count, a starting controller included: it owns nothing yet. A
    // controller that never runs its scheduler shadows nobody: the count is written where reported.
    writesRecordOf: (id) => supervised.has(id) || (options.runsNoScheduler === true && !host.isStarted()),
    playerCountWritten: (id, group) => host.playerCountWritten(id, group),
    requestStop: (id, group, kind) => p.records.requestStop(id, group, kind),
    toInstance,
    toGroup,
  });
  p.nodes = new NodeWatch({
    nodes: options.nodes,
    live,
    supervised,
    clock,
    logger,
    nodeTimeouts: tuning.nodeTimeouts,
    toInstance,
    invalidateNodes: () => p.evaluator.invalidateNodes(),
    reconnected: (nodeId) => {
      p.dispatch.redispatchScheduled(nodeId);
      // The node is alive: its instances are checked against what it runs, not replaced.
      track(p.reconciler.request());
    },
    hostSeen: (nodeId, host) => view.setNodeHost(nodeId, host),
    sessionHeld: (nodeId) => options.sessionHeld(nodeId),
    capacityAdded: () => p.scopes.changedEverywhere(),
    track,
  });
  p.reconciler = new NodeReconciler({
    live,
    supervised,
    clock,
    logger,
    intervalMs: tuning.reconcileIntervalMs,
    otherNodes: async () => (await options.nodes.list()).filter((node) => node.state !== "OFFLINE").map((node) => node.id),
    listInstances: async (nodeId) => {
      const result = await p.dispatch.send(nodeId, { type: "list_instances", body: {} });
      return result.ok ? (result.instances ?? []) : null;
    },
    reconcile: (nodeId, reports, asked) => p.reports.reconcile(nodeId, reports, asked),
    ownsAnything: () => p.scopes.ownsAnything(),
    repairPlacement: () => repair.run(),
  });
  const repair = new PlacementRepair({
    view,
    live,
    supervised,
    instances: options.instances,
    groupNames: async () => new Set((await options.groups.listDocs()).map((g) => g.name)),
    isOwned: (group) => p.scopes.isOwned(group),
    clock,
    logger,
    graceMs: Math.max(tuning.reconcileIntervalMs, tuning.evaluationTimeoutMs),
  });
  const { playerCounts } = options;
  p.countSync = playerCounts
    ? new PlayerCountSync({
        supervised,
        live,
        clock,
        logger,
        intervalMs: tuning.playerCountSyncIntervalMs,
        counts: (ids) => playerCounts(ids),
        apply: (id, count) => p.operations.playerCountChanged(id, count),
      })
    : null;
  p.sweeper = new FinishedSweeper({
    groups: options.groups,
    instances: options.instances,
    scopes: options.scopes,
    live,
    clock,
    finishedRetentionMs: tuning.finishedRetentionMs,
    evaluationIntervalMs: tuning.evaluationIntervalMs,
    isOwned: (group) => p.scopes.isOwned(group),
    ensureCurrent: (group) => p.scopes.ensureCurrent(group),
    track,
  });
  p.strays = new DeletedGroupStrays({
    groups: options.groups,
    sweeper: p.sweeper,
    clock,
    logger,
    checkIntervalMs: tuning.reconcileIntervalMs,
    isOwned: (group) => p.scopes.isOwned(group),
    forceStopOwned: (nodeId, instanceId, group) => p.dispatch.forceStopStray(nodeId, instanceId, group),
    strayFencingToken: options.strayFencingToken,
    send: (nodeId, command) => p.dispatch.send(nodeId, command),
    trackGroup: (group) => host.trackGroup(group),
    track,
  });
  return p;
}
