/**
 * The deployment reconciler: one controller of the cluster at a time (the Raft singleton lease
 * `deployment-reconciler`, spec document 2) steps every active deployment from the stored state.
 * Each step reads the deployment, its progress and the group's instance records, decides
 * (health gate, canary, promotion, completion, rollback) and writes the progress document with the
 * intent the group's owner carries out (intent-executor.ts). Nothing it decides lives only in
 * memory: a controller that takes the lease after a kill -9 continues from the same documents, and
 * since each step is computed from the records (rollout-plan.ts), no instance is retired twice and
 * no batch is skipped. Transitions: docs/decisions/deployments.md.
 */
import type { CrashService } from "../domain/crashes/crash-service.js";
import type { GroupService, StoredGroup } from "../domain/groups/group-service.js";
import { FINISHED_STATES, type InstanceState } from "../domain/instances/instance-schemas.js";
import type { InstanceService, StoredInstance } from "../domain/instances/instance-service.js";
import { isoFromMs, parseIsoMs } from "../domain/shared/time.js";
import { EventTypes } from "../events/event-types.js";
import type { EventBus } from "../events/types.js";
import type { Logger } from "../logs/types.js";
import { COUNTED_STATES } from "../scheduler/scaling.js";
import type { Clock, Timer } from "../shared/clock.js";
import { DuplicateKeyError, RevisionConflictError } from "../store/ports.js";
import type { StoredDeployment, StoredProgress, DeploymentCollections } from "./deployment-store.js";
import { initialProgress } from "./deployment-store.js";
import type { RevisionStore } from "./revision-store.js";
import { planRolloutStep, rolloutBounds, type OldInstance } from "./rollout-plan.js";

/** The singleton lease's name (spec document 2, "Lease key spaces"). */
export const DEPLOYMENT_RECONCILER_LEASE = "deployment-reconciler";
/** A lock whose deployment document never appeared (a create that died half-way) is removed after this long. */
export const orphanLockMs = 60_000;
/** Crash records read per step of one deployment. */
const crashesPerStepMax = 200;

/**
 * The singleton lease the reconciler steps under. `confirm` renews it through the Raft quorum and
 * rejects when it was lost: a success means no other controller can be granted it for a TTL.
 */
export interface ReconcilerLease {
  readonly signal: AbortSignal;
  readonly fencingToken: number;
  confirm(): Promise<void>;
}

/** Runs a job while this controller holds a singleton lease; false when it does not. */
export type RunUnderLease = (name: string, ttlMs: number, fn: (lease: ReconcilerLease) => Promise<void>) => Promise<boolean>;

/** Thrown when another holder of the reconciler lease wrote a deployment's progress after this step read it: the step is void. */
export class StaleReconcilerError extends Error {
  constructor(id: string, ours: number, theirs: number | undefined) {
    super(`Deployment ${id}: progress written since this step read it (fencing token ${theirs ?? "none"}; this controller's ${ours}); step dropped`);
  }
}

export interface DeploymentReconcilerOptions {
  collections: DeploymentCollections;
  revisions: RevisionStore;
  groups: Pick<GroupService, "getDoc" | "setRevisionFields">;
  instances: Pick<InstanceService, "findDocs">;
  crashes: Pick<CrashService, "list">;
  events: EventBus;
  clock: Clock;
  logger: Logger;
  runUnderLease: RunUnderLease;
  intervalMs: number;
  leaseTtlMs: number;
  /**
   * When each instance's plugin last reported metrics (epoch ms; absent: none current). With it the
   * health gate also asks a new instance for a report after it became RUNNING, when the group's
   * platform reports metrics (some instance of the previous revisions has a current report).
   */
  metricsReportedAtMs?(instanceIds: readonly string[]): Promise<Map<string, number>>;
}

const RETIRING_STATES: ReadonlySet<InstanceState> = new Set(["DRAINING", "STOPPING"]);

/** Steps the active deployments while this controller holds the lease. */
export class DeploymentReconciler {
  private stopped = false;
  private timer: Timer | null = null;
  private loop: Promise<void> | null = null;
  private wake: (() => void) | null = null;

  constructor(private readonly options: DeploymentReconcilerOptions) {}

  /** Starts trying for the lease every interval; while held, steps every interval. */
  start(): void {
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.timer?.cancel();
    this.wake?.();
    await this.loop;
  }

  private async run(): Promise<void> {
    const { logger } = this.options;
    while (!this.stopped) {
      try {
        const held = await this.options.runUnderLease(DEPLOYMENT_RECONCILER_LEASE, this.options.leaseTtlMs, async (lease) => {
          logger.info("Deployment reconciler running on this controller");
          while (!this.stopped && !lease.signal.aborted) {
            await this.stepAll(lease);
            await this.sleep();
          }
        });
        if (!held) logger.debug("Deployment reconciler: another controller holds the lease or Raft cannot commit");
      } catch (err) {
        logger.warn("Deployment reconciler failed; trying again", err);
      }
      if (!this.stopped) await this.sleep();
    }
  }

  private sleep(): Promise<void> {
    return new Promise((resolve) => {
      this.wake = resolve;
      this.timer = this.options.clock.setTimeout(resolve, this.options.intervalMs, { unref: true });
    });
  }

  /**
   * One step of every active deployment (those with a lock). Under a lease every write is fenced:
   * the lease is confirmed through Raft first, and a progress document written under a newer
   * fencing token is never overwritten. Without one (tests stepping by hand) nothing is fenced.
   */
  async stepAll(lease?: ReconcilerLease): Promise<void> {
    const locks = await this.options.collections.locks.find();
    for (const lock of locks) {
      if (this.stopped || lease?.signal.aborted) return;
      try {
        await this.step(lock.group, lock.revision, lock.createdAt, lease);
      } catch (err) {
        this.options.logger.warn(`Deployment ${lock.revision} of ${lock.group}: step failed; tried again next round`, err);
      }
    }
  }

  private async step(groupName: string, revision: number, lockedAt: string, lease?: ReconcilerLease): Promise<void> {
    const { collections, clock } = this.options;
    const nowMs = clock.nowMs();
    const id = `${groupName}:${revision}`;
    const deployment = await collections.deployments.get(id);
    if (!deployment) {
      if (nowMs - parseIsoMs(lockedAt, "createdAt") > orphanLockMs) {
        await lease?.confirm();
        await collections.locks.delete(groupName);
      }
      return;
    }
    const read = await collections.progress.getRevisioned(id);
    const stored = read?.doc ?? null;
    // The lease is confirmed, then the progress is checked to be the version this step read: another
    // holder that wrote meanwhile took over. (A higher token already there when this step read it,
    // from an earlier Raft history after a restore into a new cluster, does not stop a holder whose
    // lease was just confirmed.) The progress write itself is conditional on that version.
    const fence = async (): Promise<void> => {
      if (!lease) return;
      await lease.confirm();
      const latest = await collections.progress.getRevisioned(id);
      if ((latest?.rev ?? null) !== (read?.rev ?? null)) throw new StaleReconcilerError(id, lease.fencingToken, latest?.doc.fencingToken);
    };
    const progress: StoredProgress = structuredClone(stored ?? initialProgress(deployment, isoFromMs(nowMs)));
    const group = await this.options.groups.getDoc(groupName);
    const records = group ? await this.options.instances.findDocs({ group: groupName }) : [];
    let completed: string | null = null;

    if (!group) {
      completed = this.finish(progress, "FAILED", `group ${groupName} was deleted`, nowMs, false);
    } else if (progress.state) {
      // Decided earlier: restore the previous revision when asked, then release the group.
      if (progress.phase === "RESTORING") this.restoreStep(deployment, progress, group, records);
    } else if (deployment.control.rollback) {
      completed = this.finish(progress, "ROLLED_BACK", `rolled back by ${deployment.control.rollback.by}`, nowMs, deployment.control.rollback.restore);
    } else {
      const failure = await this.trackHealth(deployment, progress, records, nowMs);
      if (failure) {
        const { autoRollback } = deployment.settings;
        completed = this.finish(progress, autoRollback ? "ROLLED_BACK" : "FAILED", `health gate failed: ${failure}`, nowMs, autoRollback);
      } else if (deployment.control.paused) {
        progress.intent = null;
      } else {
        completed = this.rolloutStep(deployment, progress, group, records, nowMs);
      }
    }
    if (progress.state && progress.state !== "COMPLETED" && group && (!stored || !stored.state)) {
      await fence();
      await this.restoreGroupFields(groupName, deployment.previousRevision);
    }
    if (lease?.signal.aborted) return;
    const changed = JSON.stringify({ ...progress, updatedAt: "", fencingToken: 0 }) !== JSON.stringify({ ...(stored ?? {}), updatedAt: "", fencingToken: 0 });
    if (changed) {
      progress.updatedAt = isoFromMs(nowMs);
      if (lease) progress.fencingToken = lease.fencingToken;
      await fence();
      try {
        if (read) await collections.progress.putIf(progress, read.rev);
        else await collections.progress.insert(progress);
      } catch (err) {
        if (err instanceof RevisionConflictError || err instanceof DuplicateKeyError) throw new StaleReconcilerError(id, lease?.fencingToken ?? 0, undefined);
        throw err;
      }
    }
    if (completed) {
      this.options.logger.info(`Deployment ${revision} of ${groupName}: ${completed}${progress.reason ? ` (${progress.reason})` : ""}`);
      this.options.events.publish(EventTypes.DEPLOYMENT_COMPLETED, { groupName, revision, outcome: completed });
    }
    if (progress.state && progress.phase === "DONE") {
      if (!changed) await fence();
      await collections.locks.delete(groupName);
    }
  }

  /** Health bookkeeping of the new revision's instances; the reason when the gate failed. */
  private async trackHealth(deployment: StoredDeployment, progress: StoredProgress, records: readonly StoredInstance[], nowMs: number): Promise<string | null> {
    const { settings, revision } = deployment;
    const minHealthyMs = settings.minHealthySeconds * 1000;
    let failure: string | null = null;
    const newIds = new Set<string>();
    const reports = settings.healthGate ? await this.metricsReports(revision, records) : null;
    for (const record of records) {
      if (record.deploymentRevision !== revision) continue;
      newIds.add(record.id);
      const tracked = (progress.instances[record.id] ??= {});
      if (record.state === "RUNNING") {
        tracked.runningSince ??= isoFromMs(nowMs);
        const runningSinceMs = parseIsoMs(tracked.runningSince, "runningSince");
        // Metrics reported since it runs, when the platform reports them (the old revision's instances do).
        const reported = reports === null || (reports.get(record.id) ?? -1) >= runningSinceMs;
        if (!settings.healthGate || (nowMs - runningSinceMs >= minHealthyMs && reported)) tracked.healthy = true;
      }
      if (record.state === "CRASHED" && !tracked.crashed) {
        tracked.crashed = true;
        failure ??= `${record.id} crashed`;
      }
    }
    if (settings.healthGate && !failure) {
      // A crash record catches a crash the records no longer show (a slot restarted under its id).
      const crashes = await this.options.crashes.list({ group: deployment.group, from: deployment.createdAt, limit: crashesPerStepMax });
      const crashed = crashes.find((c) => newIds.has(c.instanceId) && (progress.instances[c.instanceId]?.runningSince ?? "") <= c.timestamp);
      if (crashed) {
        const tracked = (progress.instances[crashed.instanceId] ??= {});
        tracked.crashed = true;
        failure = `${crashed.instanceId} crashed`;
      }
    }
    if (!settings.healthGate) return null;
    return failure;
  }

  /**
   * The metrics report times of the group's instances when its platform reports metrics (an
   * instance of another revision has a current report); null when it does not, or nothing tells.
   */
  private async metricsReports(revision: number, records: readonly StoredInstance[]): Promise<Map<string, number> | null> {
    if (!this.options.metricsReportedAtMs) return null;
    const live = records.filter((r) => r.state === "RUNNING" || r.state === "DRAINING" || r.state === "STOPPING");
    const reports = await this.options.metricsReportedAtMs(live.map((r) => r.id));
    return live.some((r) => r.deploymentRevision !== revision && reports.has(r.id)) ? reports : null;
  }

  /** One rollout step: canary and promotion, the plan, completion (returns COMPLETED then). */
  private rolloutStep(
    deployment: StoredDeployment,
    progress: StoredProgress,
    group: StoredGroup,
    records: readonly StoredInstance[],
    nowMs: number,
  ): string | null {
    const { settings, revision } = deployment;
    const counted = records.filter((r) => COUNTED_STATES.has(r.state));
    if (progress.desiredInstances === null) {
      progress.desiredInstances = group.static ? group.minInstances : Math.max(counted.length, group.scalingMode === "DYNAMIC" ? group.minInstances : 0);
      const canary = settings.canaryInstances ?? (settings.canaryPercent !== null ? Math.ceil((progress.desiredInstances * settings.canaryPercent) / 100) : 0);
      progress.canaryCount = Math.min(canary, progress.desiredInstances);
      progress.phase = progress.canaryCount > 0 && progress.canaryCount < progress.desiredInstances ? "CANARY" : "ROLLING";
    }
    const desired = progress.desiredInstances;
    const retired = new Set(progress.retired);
    const newCounted = counted.filter((r) => r.deploymentRevision === revision);
    const newHealthy = newCounted.filter((r) => r.state === "RUNNING" && progress.instances[r.id]?.healthy).length;
    const old: OldInstance[] = counted.filter((r) => r.deploymentRevision !== revision && !retired.has(r.id));
    const oldRetiring = records.filter(
      (r) => r.deploymentRevision !== revision && (RETIRING_STATES.has(r.state) || (COUNTED_STATES.has(r.state) && retired.has(r.id))),
    ).length;
    const canaryCount = progress.canaryCount ?? 0;

    if (progress.phase === "CANARY") {
      const ready = newHealthy >= canaryCount && old.length <= desired - canaryCount && oldRetiring === 0;
      if (ready) progress.canaryReadyAt ??= isoFromMs(nowMs);
      const timeout = settings.promotionTimeoutSeconds;
      const timedOut = ready && timeout !== null && nowMs - parseIsoMs(progress.canaryReadyAt!, "canaryReadyAt") >= timeout * 1000;
      if (deployment.control.promoted || timedOut) {
        progress.phase = "ROLLING";
        progress.promotedAt = isoFromMs(nowMs);
      }
    }
    const targetNew = progress.phase === "CANARY" ? canaryCount : desired;
    const bounds = rolloutBounds(group, settings, desired);
    const step = planRolloutStep({ desired, targetNew, bounds, newCounted: newCounted.length, newHealthy, old, oldRetiring });
    progress.retired.push(...step.retire);
    const stillRetiring = progress.retired.filter((id) => records.some((r) => r.id === id && r.deploymentRevision !== revision && COUNTED_STATES.has(r.state)));
    progress.intent = { revision, wantNew: step.wantNew, maxTotal: step.maxTotal, retire: stillRetiring };

    const oldLeft = records.some((r) => r.deploymentRevision !== revision && !FINISHED_STATES.has(r.state));
    const allHealthy = newCounted.every((r) => r.state === "RUNNING" && progress.instances[r.id]?.healthy);
    if (progress.phase === "ROLLING" && !oldLeft && allHealthy && (newCounted.length >= Math.min(1, desired) || desired === 0)) {
      return this.finish(progress, "COMPLETED", null, nowMs, false);
    }
    return null;
  }

  /** After a rollback with restore: the previous revision replaces this one's instances, one batch at a time. */
  private restoreStep(deployment: StoredDeployment, progress: StoredProgress, group: StoredGroup, records: readonly StoredInstance[]): void {
    const target = deployment.previousRevision;
    const desired = progress.desiredInstances ?? records.filter((r) => COUNTED_STATES.has(r.state)).length;
    const counted = records.filter((r) => COUNTED_STATES.has(r.state));
    const toReplace: OldInstance[] = counted.filter((r) => r.deploymentRevision === deployment.revision);
    const replacing = records.filter((r) => r.deploymentRevision === deployment.revision && RETIRING_STATES.has(r.state)).length;
    const back = counted.filter((r) => r.deploymentRevision !== deployment.revision);
    if (toReplace.length === 0 && replacing === 0) {
      progress.phase = "DONE";
      progress.intent = null;
      return;
    }
    // Restoring is not gated: the previous revision ran before; RUNNING is enough.
    const bounds = rolloutBounds(group, deployment.settings, desired);
    const step = planRolloutStep({
      desired,
      targetNew: desired,
      bounds,
      newCounted: back.length,
      newHealthy: back.filter((r) => r.state === "RUNNING").length,
      old: toReplace,
      oldRetiring: replacing,
    });
    progress.intent = { revision: target, wantNew: step.wantNew, maxTotal: step.maxTotal, retire: step.retire };
  }

  /** Decides the outcome; returns it for DEPLOYMENT_COMPLETED. */
  private finish(progress: StoredProgress, outcome: NonNullable<StoredProgress["state"]>, reason: string | null, nowMs: number, restore: boolean): string {
    progress.state = outcome;
    progress.reason = reason;
    progress.finishedAt = isoFromMs(nowMs);
    progress.phase = restore ? "RESTORING" : "DONE";
    progress.intent = null;
    return outcome;
  }

  /** A rollout that did not complete: the group record shows the previous revision's fields again. */
  private async restoreGroupFields(groupName: string, previousRevision: number): Promise<void> {
    const previous = previousRevision > 0 ? await this.options.revisions.get(groupName, previousRevision) : null;
    if (!previous) return;
    await this.options.groups.setRevisionFields(groupName, {
      platformVersion: previous.platformVersion,
      jarFile: previous.jarFile,
      memoryMb: previous.memoryMb,
      templates: previous.templates.map((t) => t.name),
    });
  }
}
