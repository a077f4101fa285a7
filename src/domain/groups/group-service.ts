/**
 * Groups: the scheduling unit (spec document 1, "Group record"). The service owns the `groups`
 * collection; the read-only aggregates runningInstances and totalPlayers are computed from the
 * instances at read time, never stored.
 */
import type { Clock } from "../../shared/clock.js";
import { conflict, notFound, validationError } from "../../shared/errors.js";
import { closestPlatform, DAEMON_PLATFORM_IDS } from "../../wire/platform-catalog.js";
import { EventTypes, type GroupMaintenanceChangedPayload } from "../../events/event-types.js";
import type { EventBus } from "../../events/types.js";
import { DuplicateKeyError, RevisionConflictError, type Collection, type DocumentStore } from "../../store/ports.js";
import { UPDATE_ATTEMPTS_MAX, updateDocument, type UpdateDecision } from "../shared/conditional-update.js";
import { KeyedMutex, type KeyedLock } from "../shared/keyed-mutex.js";
import { isoFromMs } from "../shared/time.js";
import { checkSchema } from "../shared/validate.js";
import {
  GROUP_DEFAULTS,
  GroupCreateSchema,
  GroupPatchSchema,
  resolveLoadScaling,
  type Group,
  type GroupCreate,
  type GroupListItem,
  type GroupPatch,
  type SchedulingIssue,
} from "./group-schemas.js";
import type { StoredGroup } from "./group-types.js";
import { validateGroupInvariants } from "./group-validation.js";

export type { StoredGroup } from "./group-types.js";

/** Collection owned by {@link GroupService}. */
export const GROUPS_COLLECTION = "groups";

/** The scheduler's own fields of a group record (written without GROUP_UPDATED). */
export interface GroupSchedulingState {
  paused?: boolean;
  schedulingIssue?: SchedulingIssue | null;
  /**
   * The issue computed from the record's current one, inside the same compare-and-set (after
   * `schedulingIssue`); undefined leaves it as it is. A start failure uses it so that it never hides
   * a crash-loop pause's issue, and is cleared only while it is still the issue.
   */
  reviseIssue?: (current: SchedulingIssue | null) => SchedulingIssue | null | undefined;
  /** STATIC instances an operator stopped: their slots stay stopped until the group is started. */
  stoppedInstances?: string[];
}

/** The group fields a revision freezes besides the platform (deployments change them). */
export interface GroupRevisionFields {
  platformVersion: string | null;
  jarFile: string;
  memoryMb: number;
  templates: readonly string[];
}

/** Per-group aggregates computed from the instances. */
export interface GroupAggregates {
  runningInstances: number;
  totalPlayers: number;
}

/** Where the aggregates come from (the instance service). */
export interface GroupAggregateSource {
  aggregatesForGroup(group: string): Promise<GroupAggregates>;
  aggregatesByGroup(): Promise<Map<string, GroupAggregates>>;
}

/** Result of an update: the snapshots the audit log records. */
export interface GroupUpdateResult {
  before: Group;
  after: Group;
}

/**
 * The software catalog as groups use it: the default `platformVersion` of a new group (its
 * platform's recommended build), and the check that a named version is a build of the platform.
 */
export interface GroupCatalog {
  defaultVersion(platform: string): Promise<string | null>;
  /** 422 when the catalog has builds of `platform` but not `version`. */
  check(platform: string, version: string | null): Promise<void>;
}

const noAggregates: GroupAggregates = { runningInstances: 0, totalPlayers: 0 };

/**
 * Creates, reads, updates and deletes groups, publishing the GROUP_* events. Every change of a
 * stored group is a read-modify-write under the group's lock, written as a compare-and-set on the
 * revision read (conditional-update.ts): a writer that lost the lock while it stalled fails
 * instead of putting back what it read.
 */
export class GroupService {
  private readonly groups: Collection<StoredGroup>;
  private readonly writes: KeyedLock;
  private catalog: GroupCatalog | null = null;

  constructor(
    store: DocumentStore,
    private readonly events: EventBus,
    private readonly clock: Clock,
    private readonly aggregates: GroupAggregateSource,
    /**
     * Serialises each group's read-modify-writes (PATCHes, the scheduler's fields, operator stops,
     * deployments). Several controllers write groups: the controller passes a cluster-wide lock.
     */
    writes: KeyedLock = new KeyedMutex(),
  ) {
    this.groups = store.collection<StoredGroup>(GROUPS_COLLECTION);
    this.writes = writes;
  }

  /** Consults the software catalog for defaults and checks of `platformVersion` (set once by the composition root). */
  useCatalog(catalog: GroupCatalog): void {
    this.catalog = catalog;
  }

  /** Every group in list form, ordered by name. */
  async list(): Promise<GroupListItem[]> {
    const [docs, byGroup] = await Promise.all([this.groups.find(), this.aggregates.aggregatesByGroup()]);
    return docs.map((doc) => {
      const agg = byGroup.get(doc.name) ?? noAggregates;
      return {
        name: doc.name,
        platform: doc.platform,
        platformVersion: doc.platformVersion,
        scalingMode: doc.scalingMode,
        minInstances: doc.minInstances,
        maxInstances: doc.maxInstances,
        maxPlayers: doc.maxPlayers,
        runningInstances: agg.runningInstances,
        totalPlayers: agg.totalPlayers,
        maintenance: doc.maintenance,
        static: doc.static,
      };
    });
  }

  /** The full group; 404 `Group not found: <name>` when unknown. */
  async get(name: string): Promise<Group> {
    return this.withAggregates(await this.require(name));
  }

  /** The stored document, or null (the scheduler reads it without computing aggregates). */
  getDoc(name: string): Promise<StoredGroup | null> {
    return this.groups.get(name);
  }

  /** Every stored group document (the scheduler adopts them when it starts). */
  listDocs(): Promise<StoredGroup[]> {
    return this.groups.find();
  }

  /**
   * Writes the scheduler's fields (crash-loop pause, scheduling issue) of a group, serialized with
   * PATCHes; no GROUP_UPDATED is published (the scheduler itself is the listener). Returns false
   * when the group no longer exists.
   */
  async setSchedulingState(name: string, state: GroupSchedulingState): Promise<boolean> {
    return this.writes.run(name, (signal) =>
      updateDocument(
        this.groups,
        name,
        (current) => {
          if (!current) return { next: null, result: false };
          const next: StoredGroup = { ...current };
          if (state.paused !== undefined) next.paused = state.paused;
          if (state.schedulingIssue !== undefined) next.schedulingIssue = state.schedulingIssue;
          const revised = state.reviseIssue?.(next.schedulingIssue ?? null);
          if (revised !== undefined) next.schedulingIssue = revised;
          // The crash-loop issue says why the group is paused: it goes with the pause.
          if (state.paused === false && next.schedulingIssue?.code === "CRASH_LOOP") next.schedulingIssue = null;
          if (state.stoppedInstances !== undefined) next.stoppedInstances = [...new Set(state.stoppedInstances)].sort();
          const unchanged =
            next.paused === current.paused &&
            JSON.stringify(next.schedulingIssue ?? null) === JSON.stringify(current.schedulingIssue ?? null) &&
            JSON.stringify(next.stoppedInstances ?? []) === JSON.stringify(current.stoppedInstances ?? []);
          return { next: unchanged ? null : next, result: true };
        },
        { signal },
      ),
    );
  }

  /**
   * Adds (`stopped` true) or removes an instance id of the group's `stoppedInstances`, read and
   * written under the group's write lock. Returns false when the group no longer exists.
   */
  async setStoppedByOperator(name: string, instanceId: string, stopped: boolean): Promise<boolean> {
    return this.writes.run(name, (signal) =>
      updateDocument(
        this.groups,
        name,
        (current) => {
          if (!current) return { next: null, result: false };
          const ids = new Set(current.stoppedInstances ?? []);
          if (ids.has(instanceId) === stopped) return { next: null, result: true };
          if (stopped) ids.add(instanceId);
          else ids.delete(instanceId);
          return { next: { ...current, stoppedInstances: [...ids].sort() }, result: true };
        },
        { signal },
      ),
    );
  }

  /**
   * Writes the start-relevant fields a deployment froze into a revision (or restored from the
   * previous one), so the group record says what its instances start from; publishes
   * GROUP_UPDATED when something changed. Returns false when the group no longer exists.
   */
  async setRevisionFields(name: string, fields: GroupRevisionFields): Promise<boolean> {
    const changed = await this.writes.run(name, (signal) =>
      updateDocument<StoredGroup, boolean | null>(
        this.groups,
        name,
        (current) => {
          if (!current) return { next: null, result: null };
          const next: StoredGroup = { ...current, ...fields, templates: [...fields.templates] };
          if (
            JSON.stringify([next.platformVersion, next.jarFile, next.memoryMb, next.templates]) ===
            JSON.stringify([current.platformVersion, current.jarFile, current.memoryMb, current.templates])
          )
            return { next: null, result: false };
          validateGroupInvariants(next);
          next.updatedAt = isoFromMs(this.clock.nowMs());
          return { next, result: true };
        },
        { signal },
      ),
    );
    if (changed) this.events.publish(EventTypes.GROUP_UPDATED, { groupName: name });
    return changed !== null;
  }

  /** Whether a group exists (for callers that must not throw). */
  async exists(name: string): Promise<boolean> {
    return (await this.groups.get(name)) !== null;
  }

  /** Validates and stores a new group; 409 CONFLICT when the name is taken. Publishes GROUP_CREATED. */
  async create(input: GroupCreate): Promise<Group> {
    checkSchema(GroupCreateSchema, input, "body");
    const nowIso = isoFromMs(this.clock.nowMs());
    const scalingMode = input.scalingMode ?? GROUP_DEFAULTS.scalingMode;
    const doc: StoredGroup = {
      _id: input.name,
      name: input.name,
      platform: input.platform,
      platformVersion: input.platformVersion ?? (await this.catalog?.defaultVersion(input.platform)) ?? GROUP_DEFAULTS.platformVersion,
      jarFile: input.jarFile ?? GROUP_DEFAULTS.jarFile,
      templates: [...(input.templates ?? GROUP_DEFAULTS.templates)],
      scalingMode,
      minInstances: input.minInstances ?? GROUP_DEFAULTS.minInstances,
      maxInstances: input.maxInstances ?? GROUP_DEFAULTS.maxInstances,
      maxPlayers: input.maxPlayers ?? GROUP_DEFAULTS.maxPlayers,
      memoryMb: input.memoryMb ?? GROUP_DEFAULTS.memoryMb,
      routing: input.routing ?? GROUP_DEFAULTS.routing,
      portRange: { ...(input.portRange ?? GROUP_DEFAULTS.portRange) },
      priority: input.priority ?? GROUP_DEFAULTS.priority,
      maintenance: input.maintenance ?? GROUP_DEFAULTS.maintenance,
      static: scalingMode === "STATIC",
      updateStrategy: { ...(input.updateStrategy ?? GROUP_DEFAULTS.updateStrategy) },
      parent: input.parent ?? GROUP_DEFAULTS.parent,
      loadScaling: resolveLoadScaling(input.loadScaling),
      paused: false,
      schedulingIssue: null,
      stoppedInstances: [],
      createdAt: nowIso,
      updatedAt: nowIso,
    };
    validateGroupInvariants(doc);
    checkPlatform(doc.platform);
    await this.catalog?.check(doc.platform, doc.platformVersion);
    if (doc.parent !== null && !(await this.exists(doc.parent))) {
      throw validationError(`parent: unknown group ${doc.parent}`);
    }
    try {
      await this.groups.insert(doc);
    } catch (err) {
      if (err instanceof DuplicateKeyError) throw conflict(`Group already exists: ${doc.name}`);
      throw err;
    }
    this.events.publish(EventTypes.GROUP_CREATED, { groupName: doc.name });
    return this.withAggregates(doc);
  }

  /**
   * Applies a partial update of the PATCH keys, re-checks the cross-field rules on the merged
   * record, and publishes GROUP_UPDATED (and GROUP_MAINTENANCE_CHANGED when maintenance flips).
   */
  async update(name: string, patch: GroupPatch): Promise<GroupUpdateResult> {
    checkSchema(GroupPatchSchema, patch, "body");
    const { before, after, changed } = await this.writes.run(name, (signal) =>
      updateDocument(this.groups, name, (stored) => this.patched(name, stored, patch), { signal }),
    );
    if (changed) {
      this.events.publish(EventTypes.GROUP_UPDATED, { groupName: name });
      if (before.maintenance !== after.maintenance) {
        this.events.publish(EventTypes.GROUP_MAINTENANCE_CHANGED, {
          groupName: name,
          maintenance: after.maintenance,
          message: after.maintenance ? `Group ${name} entered maintenance` : `Group ${name} left maintenance`,
        } satisfies GroupMaintenanceChangedPayload);
      }
    }
    const aggregates = await this.aggregates.aggregatesForGroup(name);
    return { before: toGroup(before, aggregates), after: toGroup(after, aggregates) };
  }

  /** A PATCH applied to the stored group (404 when there is none), re-checked as a whole. */
  private patched(
    name: string,
    current: StoredGroup | null,
    patch: GroupPatch,
  ): UpdateDecision<StoredGroup, { before: StoredGroup; after: StoredGroup; changed: boolean }> {
    if (!current) throw notFound(`Group not found: ${name}`);
    const merged: StoredGroup = { ...current, portRange: { ...current.portRange } };
    let changed = false;
    for (const key of Object.keys(patch) as (keyof GroupPatch)[]) {
      if (key === "loadScaling") continue;
      const value = patch[key];
      if (value === undefined || merged[key] === value) continue;
      (merged as Record<string, unknown>)[key] = value;
      changed = true;
    }
    if (patch.loadScaling !== undefined) {
      const loadScaling = resolveLoadScaling(patch.loadScaling);
      if (JSON.stringify(loadScaling) !== JSON.stringify(current.loadScaling ?? null)) {
        merged.loadScaling = loadScaling;
        changed = true;
      }
    }
    merged.static = merged.scalingMode === "STATIC";
    validateGroupInvariants(merged, new Set(Object.keys(patch)));
    if (changed) merged.updatedAt = isoFromMs(this.clock.nowMs());
    return { next: changed ? merged : null, result: { before: current, after: merged, changed } };
  }

  /**
   * Deletes a group and publishes GROUP_DELETED; returns the record as it was. Stopping the
   * group's instances is the scheduler's reaction to the event.
   */
  async delete(name: string): Promise<Group> {
    return this.writes.run(name, async (signal) => {
      for (let attempt = 1; ; attempt++) {
        const stored = await this.groups.getRevisioned(name);
        if (!stored) throw notFound(`Group not found: ${name}`);
        const before = await this.withAggregates(stored.doc);
        signal.throwIfAborted();
        try {
          await this.groups.deleteIf(name, stored.rev);
        } catch (error) {
          if (error instanceof RevisionConflictError && attempt < UPDATE_ATTEMPTS_MAX) continue;
          throw error;
        }
        this.events.publish(EventTypes.GROUP_DELETED, { groupName: name });
        return before;
      }
    });
  }

  /** How many groups exist. */
  count(): Promise<number> {
    return this.groups.count();
  }

  private async require(name: string): Promise<StoredGroup> {
    const doc = await this.groups.get(name);
    if (!doc) throw notFound(`Group not found: ${name}`);
    return doc;
  }

  private async withAggregates(doc: StoredGroup): Promise<Group> {
    const aggregates = await this.aggregates.aggregatesForGroup(doc.name);
    return toGroup(doc, aggregates);
  }
}

function toGroup(doc: StoredGroup, aggregates: GroupAggregates): Group {
  const { _id: _ignored, paused, schedulingIssue, stoppedInstances, loadScaling, ...rest } = doc;
  return {
    ...(rest as Omit<Group, "runningInstances" | "totalPlayers" | "paused" | "schedulingIssue" | "stoppedInstances" | "loadScaling">),
    loadScaling: loadScaling ?? null,
    paused: paused ?? false,
    schedulingIssue: schedulingIssue ?? null,
    stoppedInstances: stoppedInstances ?? [],
    ...aggregates,
  };
}

/** 422 VALIDATION_ERROR unless a daemon of this release runs `platform`; the message names the ones it runs. */
export function checkPlatform(platform: string): void {
  if (DAEMON_PLATFORM_IDS.includes(platform)) return;
  const hint = closestPlatform(platform);
  throw validationError(
    `platform: unknown platform "${platform}"${hint ? ` (did you mean ${hint}?)` : ""}; the cluster runs ${DAEMON_PLATFORM_IDS.join(", ")}`,
  );
}
