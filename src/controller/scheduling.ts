/**
 * The scheduling wing: the scheduler host over the coordination of the profile, the stop of stray
 * instances after a restore, the coordinated restores that pause scheduling, the scheduler's gauges,
 * and (started with the scheduler) the deployment reconciler and the executor of its steps.
 */
import type { AuthService } from "../auth/auth-service.js";
import type { RestoreCoordination } from "../backup/restore-coordination.js";
import type { ClusterService } from "../cluster/cluster-service.js";
import type { ControllerConfig } from "../config/schema.js";
import { DeploymentReconciler } from "../deployments/deployment-reconciler.js";
import { IntentExecutor } from "../deployments/intent-executor.js";
import type { ControllerEventBus } from "../events/bus.js";
import type { ControllerLogService } from "../logs/logger.js";
import type { MetricsService } from "../metrics/metrics.js";
import type { InstanceMetricsService } from "../plugin-api/instance-metrics.js";
import { loadSamplesOf, metricsReportedAtOf, playerCountsOf } from "../plugin-api/scheduler-adapters.js";
import { SchedulerHost, type SchedulerTuning } from "../scheduler/scheduler-host.js";
import { groupTokenCeiling, strayInstanceStop } from "./stray-stops.js";
import { tracedDaemonLink } from "../scheduler/traced-commands.js";
import type { Clock } from "../shared/clock.js";
import type { Tracing } from "../shared/tracing.js";
import type { KvStore } from "../store/ports.js";
import type { BackupsWing } from "./backups.js";
import type { Daemons } from "./daemons.js";
import type { Domain, PlayersRef } from "./domain.js";
import type { Cleanups } from "./lifecycle.js";

export interface SchedulingOptions {
  config: ControllerConfig;
  cluster: ClusterService;
  kv: KvStore;
  events: ControllerEventBus;
  metrics: MetricsService;
  clock: Clock;
  logs: ControllerLogService;
  tracing: Tracing;
  auth: AuthService;
  domain: Domain;
  daemons: Pick<Daemons, "coordination" | "credentials" | "consoleHub" | "fencingHighWater">;
  instanceMetrics: InstanceMetricsService;
  players: PlayersRef;
  backups: BackupsWing;
  tuning?: Partial<SchedulerTuning>;
  cleanups: Cleanups;
  /** The scheduler is never started here (the component is off): player counts are written where reported. */
  runsNoScheduler?: boolean;
}

export interface Scheduling {
  scheduler: SchedulerHost;
  /** Pauses this controller's scheduling while a restore runs anywhere in the cluster. */
  restores: RestoreCoordination;
  /** Binds the restart of the platform modules after a restore (they are built later). */
  setModuleRestart(restart: () => Promise<void>): void;
  /** Starts the coordination, the scheduler and the deployments' reconciler and executor. */
  start(): Promise<void>;
}

/** Builds the scheduler (not yet running) and what hangs on it. */
export function buildScheduling(options: SchedulingOptions): Scheduling {
  const { config, cluster, kv, events, metrics, clock, logs, domain, instanceMetrics, cleanups } = options;
  const { groups, instances, nodes, crashes, capabilities, revisions, deploymentCollections } = domain;
  const { coordination } = options.daemons;
  const tokenCeiling = groupTokenCeiling(kv, options.daemons.fencingHighWater);
  const scheduler = new SchedulerHost({
    groups,
    instances,
    nodes,
    crashes,
    events,
    daemons: tracedDaemonLink(coordination.daemons, options.tracing),
    credentials: options.daemons.credentials,
    scopes: coordination.scopes,
    // The cluster-shared values in force, read at every crash (live-settings.ts).
    crashLoop: capabilities.settings.crashLoop,
    clock,
    logger: logs.logger("cloud.scheduler"),
    metrics,
    kv,
    sessionHeld: (nodeId) => coordination.sessionHeld(nodeId),
    strayFencingToken: tokenCeiling,
    revisions,
    buildCheck: (build) => capabilities.mirror.check(build),
    tuning: {
      evaluationIntervalMs: config.scheduler.evaluationIntervalSeconds * 1000,
      startingPerNodeMax: config.scheduler.maxStartingPerNode,
      reconcileIntervalMs: config.scheduler.reconcileIntervalSeconds * 1000,
      ...options.tuning,
    },
    playerCounts: playerCountsOf(() => options.players.current),
    loadSamples: loadSamplesOf(instanceMetrics),
    runsNoScheduler: options.runsNoScheduler,
  });
  scheduler.setConsole(options.daemons.consoleHub);
  capabilities.settings.onStartingPerNodeMax((value) => scheduler.setStartingPerNodeMax(value));
  options.backups.setStrayStop(
    strayInstanceStop({ daemons: coordination.daemons, nodes, instances, fencingToken: tokenCeiling, logger: logs.logger("cloud.backup") }),
  );
  // Bound once the modules exist: after a restore every module restarts over the restored records.
  const moduleRestart = { run: async () => undefined as void };
  const restores = options.backups.coordinatedRestores(cluster.nodeId, {
    pause: () => scheduler.pauseScheduling(),
    resume: async () => {
      await scheduler.resumeScheduling();
      await moduleRestart.run();
    },
    reloadAuth: () => options.auth.invalidate(),
  });
  metrics.setGaugeSources({
    schedulerLastTickLagMillis: () => scheduler.lastTickLagMs(),
    workflowsStartRetries: () => scheduler.waitingWorkflows().startRetries,
    workflowsHealingActions: () => scheduler.waitingWorkflows().healingActions,
  });

  const start = async () => {
    await coordination.start();
    cleanups.push({ name: "coordination", run: () => coordination.stop() });
    await scheduler.start();
    // Stops first: no actor reacts to the sessions the gateway then closes.
    cleanups.push({ name: "scheduler", run: () => scheduler.stop() });
    // Deployments: the reconciler steps rollouts under its singleton lease; every controller
    // carries out the steps of the groups it schedules (docs/decisions/deployments.md).
    const deploymentIntervalMs = config.deployments.reconcileIntervalSeconds * 1000;
    const intents = new IntentExecutor({
      collections: deploymentCollections,
      instances,
      lifecycle: scheduler,
      isOwned: (group) => scheduler.isOwned(group),
      clock,
      logger: logs.logger("cloud.deployments"),
      intervalMs: deploymentIntervalMs,
    });
    const reconciler = new DeploymentReconciler({
      collections: deploymentCollections,
      revisions,
      groups,
      instances,
      crashes,
      events,
      clock,
      logger: logs.logger("cloud.deployments"),
      runUnderLease: (name, ttlMs, fn) => cluster.runUnderLease(name, ttlMs, fn),
      intervalMs: deploymentIntervalMs,
      leaseTtlMs: config.deployments.leaseTtlSeconds * 1000,
      metricsReportedAtMs: metricsReportedAtOf(instanceMetrics),
    });
    intents.start();
    reconciler.start();
    cleanups.push({ name: "deployment reconciler", run: () => Promise.all([reconciler.stop(), intents.stop()]).then(() => undefined) });
  };

  return {
    scheduler,
    restores,
    setModuleRestart: (restart) => {
      moduleRestart.run = restart;
    },
    start,
  };
}
