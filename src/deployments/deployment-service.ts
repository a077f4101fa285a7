/**
 * Deployments as operators drive them: create (freezes a revision and takes the group's
 * one-active-deployment lock), list, show with per-instance progress, pause, resume, promote and
 * rollback. These write only the operator's side of a deployment (`deployments`); the rollout itself
 * is the reconciler's (deployment-reconciler.ts). Decisions: docs/decisions/deployments.md.
 */
import type { GroupService, StoredGroup } from "../domain/groups/group-service.js";
import { FINISHED_STATES } from "../domain/instances/instance-schemas.js";
import type { InstanceService } from "../domain/instances/instance-service.js";
import { KeyedMutex, type KeyedLock } from "../domain/shared/keyed-mutex.js";
import { isoFromMs } from "../domain/shared/time.js";
import { EventTypes } from "../events/event-types.js";
import type { EventBus } from "../events/types.js";
import type { Clock } from "../shared/clock.js";
import { conflict, notFound, validationError } from "../shared/errors.js";
import { DuplicateKeyError } from "../store/ports.js";
import {
  minHealthySecondsDefault,
  TERMINAL_DEPLOYMENT_STATES,
  type Deployment,
  type DeploymentCreate,
  type DeploymentDetail,
  type DeploymentSettings,
} from "./deployment-schemas.js";
import {
  effectiveState,
  revisionId,
  type DeploymentCollections,
  type DeploymentControl,
  type StoredDeployment,
  type StoredProgress,
} from "./deployment-store.js";
import type { RevisionStore, TemplateHashes } from "./revision-store.js";
import { deploymentInstances, GONE_STATE } from "./deployment-history.js";

export interface DeploymentServiceDeps {
  collections: DeploymentCollections;
  revisions: RevisionStore;
  groups: Pick<GroupService, "getDoc" | "setRevisionFields">;
  instances: Pick<InstanceService, "findDocs">;
  templateHash: TemplateHashes;
  events: EventBus;
  clock: Clock;
  /**
   * Serialises an operator's control writes on one deployment across controllers (the read of
   * the controls and their write); one controller's own mutex when absent (a single controller).
   */
  controlLock?: KeyedLock;
}

export class DeploymentService {
  private readonly writes: KeyedLock;

  constructor(private readonly deps: DeploymentServiceDeps) {
    this.writes = deps.controlLock ?? new KeyedMutex();
  }

  /**
   * Starts a deployment of `groupName`: validates, freezes the next revision (the group's fields
   * with `changes`, template layers pinned to their current hashes), takes the group's lock (409
   * DEPLOYMENT_ACTIVE when another deployment is active), records it and writes the revision's
   * fields on the group. Publishes DEPLOYMENT_CREATED.
   */
  async create(groupName: string, body: DeploymentCreate, by: string): Promise<DeploymentDetail> {
    const group = await this.requireGroup(groupName);
    if (body.canaryInstances !== undefined && body.canaryPercent !== undefined)
      throw validationError("canaryInstances and canaryPercent are exclusive: give one of them");
    const changes = body.changes ?? {};
    for (const name of changes.templates ?? []) {
      if ((await this.deps.templateHash(name)) === null) throw validationError(`changes.templates: unknown template ${name}`);
    }
    const active = await this.deps.collections.locks.get(groupName);
    if (active) throw conflict(`Group ${groupName} already has an active deployment (revision ${active.revision})`, "DEPLOYMENT_ACTIVE");

    const settings: DeploymentSettings = {
      strategy: body.strategy ?? group.updateStrategy.type,
      batchSize: body.batchSize ?? 1,
      canaryInstances: body.canaryInstances ?? null,
      canaryPercent: body.canaryPercent ?? null,
      healthGate: body.healthGate ?? true,
      minHealthySeconds: body.minHealthySeconds ?? minHealthySecondsDefault,
      autoRollback: body.autoRollback ?? false,
      promotionTimeoutSeconds: body.promotionTimeoutSeconds ?? null,
      maxSurge: group.updateStrategy.maxSurge,
      maxUnavailable: group.updateStrategy.maxUnavailable,
    };
    const previousRevision = await this.deps.revisions.currentRevision(groupName);
    const revision = await this.deps.revisions.freeze(group, changes, "DEPLOYMENT");
    const nowIso = this.nowIso();
    try {
      await this.deps.collections.locks.insert({ _id: groupName, group: groupName, revision: revision.revision, createdAt: nowIso });
    } catch (err) {
      await this.deps.revisions.discard(groupName, revision.revision);
      if (err instanceof DuplicateKeyError) throw conflict(`Group ${groupName} already has an active deployment`, "DEPLOYMENT_ACTIVE");
      throw err;
    }
    const doc: StoredDeployment = {
      _id: revisionId(groupName, revision.revision),
      group: groupName,
      revision: revision.revision,
      previousRevision,
      settings,
      changes,
      control: { paused: false, promoted: false, rollback: null },
      createdBy: by,
      createdAt: nowIso,
      updatedAt: nowIso,
    };
    await this.deps.collections.deployments.insert(doc);
    await this.deps.groups.setRevisionFields(groupName, {
      platformVersion: revision.platformVersion,
      jarFile: revision.jarFile,
      memoryMb: revision.memoryMb,
      templates: revision.templates.map((t) => t.name),
    });
    this.deps.events.publish(EventTypes.DEPLOYMENT_CREATED, { groupName, revision: revision.revision, strategy: settings.strategy });
    return this.show(groupName, revision.revision);
  }

  /** The deployments of a group, newest first; 404 for an unknown group. */
  async list(groupName: string): Promise<Deployment[]> {
    await this.requireGroup(groupName);
    const docs = await this.deps.collections.deployments.find({ group: groupName }, { sort: { field: "revision", direction: -1 } });
    const progress = await Promise.all(docs.map((d) => this.deps.collections.progress.get(d._id)));
    return docs.map((d, i) => toDeployment(d, progress[i]));
  }

  /** One deployment with its revision and the group's instances as the rollout sees them. */
  async show(groupName: string, revision: number): Promise<DeploymentDetail> {
    const { doc, progress } = await this.require(groupName, revision);
    const [revisionRecord, records] = await Promise.all([this.deps.revisions.get(groupName, revision), this.deps.instances.findDocs({ group: groupName })]);
    const finished = TERMINAL_DEPLOYMENT_STATES.has(effectiveState(doc, progress));
    const instances = deploymentInstances(doc, progress, records, finished);
    // A running rollout counts what lives; a finished one what it did.
    const counted = (i: (typeof instances)[number]) => finished || (!FINISHED_STATES.has(i.state) && i.state !== GONE_STATE);
    const { _id: _ignored, ...revisionFields } = revisionRecord ?? { _id: "" };
    return {
      ...toDeployment(doc, progress),
      revisionRecord: revisionRecord ? (revisionFields as DeploymentDetail["revisionRecord"]) : null,
      progress: {
        newInstances: instances.filter((i) => i.role === "NEW" && counted(i)).length,
        newHealthy: instances.filter((i) => i.healthy && counted(i)).length,
        oldInstances: instances.filter((i) => i.role === "OLD" && !FINISHED_STATES.has(i.state) && i.state !== GONE_STATE).length,
        retired: progress?.retired.length ?? 0,
      },
      instances,
    };
  }

  /** IN_PROGRESS → PAUSED: no further instance is started or retired (those under way finish). */
  pause(groupName: string, revision: number): Promise<DeploymentDetail> {
    return this.control(groupName, revision, "pause", (c) => ({ ...c, paused: true }));
  }

  /** PAUSED → IN_PROGRESS. */
  resume(groupName: string, revision: number): Promise<DeploymentDetail> {
    return this.control(groupName, revision, "resume", (c) => ({ ...c, paused: false }));
  }

  /** Ends the canary phase: the rollout replaces the rest. 409 NO_CANARY for a deployment without canaries. */
  promote(groupName: string, revision: number): Promise<DeploymentDetail> {
    return this.control(groupName, revision, "promote", (c, doc) => {
      if (!doc.settings.canaryInstances && !doc.settings.canaryPercent)
        throw conflict(`Deployment ${revision} of ${groupName} has no canary to promote`, "NO_CANARY");
      return { ...c, promoted: true };
    });
  }

  /**
   * Stops the rollout (ROLLED_BACK); new instances start from the previous revision again. With
   * `restore`, the previous revision also replaces the instances of this one.
   */
  rollback(groupName: string, revision: number, restore: boolean, by: string): Promise<DeploymentDetail> {
    return this.control(groupName, revision, "roll back", (c) => ({ ...c, rollback: { restore, at: this.nowIso(), by } }));
  }

  /** Removes every deployment record of a deleted group. */
  async forgetGroup(groupName: string): Promise<void> {
    const { collections } = this.deps;
    await Promise.all([collections.deployments.deleteMany({ group: groupName }), collections.progress.deleteMany({ group: groupName })]);
    await collections.locks.delete(groupName);
    await this.deps.revisions.forgetGroup(groupName);
  }

  private control(
    groupName: string,
    revision: number,
    verb: string,
    change: (control: DeploymentControl, doc: StoredDeployment) => DeploymentControl,
  ): Promise<DeploymentDetail> {
    return this.writes.run(`deployment:${revisionId(groupName, revision)}`, async () => {
      const { doc, progress } = await this.require(groupName, revision);
      const state = effectiveState(doc, progress);
      if (TERMINAL_DEPLOYMENT_STATES.has(state)) throw conflict(`Cannot ${verb} deployment ${revision} of ${groupName}: it is ${state}`, "DEPLOYMENT_FINISHED");
      const control = change(doc.control, doc);
      if (JSON.stringify(control) !== JSON.stringify(doc.control)) {
        await this.deps.collections.deployments.put({ ...doc, control, updatedAt: this.nowIso() });
      }
      return this.show(groupName, revision);
    });
  }

  private async require(groupName: string, revision: number): Promise<{ doc: StoredDeployment; progress: StoredProgress | null }> {
    await this.requireGroup(groupName);
    const id = revisionId(groupName, revision);
    const doc = await this.deps.collections.deployments.get(id);
    if (!doc) throw notFound(`Deployment not found: ${groupName} revision ${revision}`);
    return { doc, progress: await this.deps.collections.progress.get(id) };
  }

  private async requireGroup(name: string): Promise<StoredGroup> {
    const group = await this.deps.groups.getDoc(name);
    if (!group) throw notFound(`Group not found: ${name}`);
    return group;
  }

  private nowIso(): string {
    return isoFromMs(this.deps.clock.nowMs());
  }
}

/** The REST form of a deployment. */
export function toDeployment(doc: StoredDeployment, progress: StoredProgress | null): Deployment {
  const state = effectiveState(doc, progress);
  return {
    group: doc.group,
    revision: doc.revision,
    previousRevision: doc.previousRevision,
    state,
    phase: progress?.phase ?? (TERMINAL_DEPLOYMENT_STATES.has(state) ? "DONE" : "ROLLING"),
    settings: doc.settings,
    changes: doc.changes,
    desiredInstances: progress?.desiredInstances ?? null,
    canaryCount: progress?.canaryCount ?? null,
    promoted: doc.control.promoted || (progress?.promotedAt ?? null) !== null,
    outcome: progress?.state ?? null,
    reason: progress?.reason ?? null,
    createdBy: doc.createdBy,
    createdAt: doc.createdAt,
    updatedAt: progress && progress.updatedAt > doc.updatedAt ? progress.updatedAt : doc.updatedAt,
    finishedAt: progress?.finishedAt ?? null,
  };
}
