/**
 * Group revisions: what an instance starts from, frozen. A revision copies the group's
 * start-relevant fields (platform, platformVersion, jarFile, memoryMb) and its ordered template
 * layers, each pinned to the template's content hash at that moment, so a later template edit or
 * group change reaches running networks only through a deployment.
 *
 * The group's current revision (what new instances start from) is derived, not stored: the
 * revision of its latest deployment, or that deployment's previous revision when it was rolled
 * back or failed; with no deployment, the INITIAL revision frozen when the group's first instance
 * was scheduled.
 */
import type { StoredGroup } from "../domain/groups/group-types.js";
import type { ResolvedRevision, RevisionBuild, RevisionSource, RevisionSpec } from "../scheduler/instance-lifecycle.js";
import { ApiError } from "../shared/errors.js";
import { DuplicateKeyError } from "../store/ports.js";
import type { DeploymentChanges } from "./deployment-schemas.js";
import { effectiveState, revisionId, type DeploymentCollections, type StoredRevision } from "./deployment-store.js";

/** Revisions kept in memory (immutable documents; the bound keeps a long-lived controller small). */
export const revisionCacheEntriesMax = 1_000;
/** Attempts at taking the next revision number when another controller takes the same one. */
const revisionNumberAttemptsMax = 20;

/** The content hash of a template's current version, or null when there is no such template. */
export type TemplateHashes = (name: string) => Promise<string | null>;

/**
 * The catalog build a revision freezes for a platform and version (src/catalog): null when there is
 * none to freeze; a 422 when the catalog has builds of the platform but not this version.
 */
export type BuildLookup = (platform: string, version: string | null) => Promise<RevisionBuild | null>;

export class RevisionStore implements RevisionSource {
  private readonly cache = new Map<string, StoredRevision>();

  constructor(
    private readonly collections: DeploymentCollections,
    private readonly templateHash: TemplateHashes,
    private readonly nowIso: () => string,
    /** The catalog's builds; without it revisions freeze no build. */
    private readonly builds: BuildLookup = async () => null,
  ) {}

  async resolve(group: StoredGroup, requested?: number): Promise<ResolvedRevision> {
    if (requested !== undefined) {
      const spec = requested > 0 ? await this.get(group.name, requested) : null;
      return { revision: requested, memoryMb: spec?.memoryMb ?? group.memoryMb, build: spec?.build ?? null };
    }
    const current = await this.currentRevision(group.name);
    const revision = current > 0 ? await this.get(group.name, current) : await this.freezeInitial(group);
    return revision
      ? { revision: revision.revision, memoryMb: revision.memoryMb, build: revision.build ?? null }
      : { revision: current, memoryMb: group.memoryMb, build: null };
  }

  async specOf(group: string, revision: number): Promise<RevisionSpec | null> {
    const found = await this.get(group, revision);
    return found
      ? {
          platform: found.platform,
          jarFile: found.jarFile,
          memoryMb: found.memoryMb,
          templates: found.templates,
          platformVersion: found.platformVersion,
          build: found.build ?? null,
        }
      : null;
  }

  /** One revision, or null. */
  async get(group: string, revision: number): Promise<StoredRevision | null> {
    const id = revisionId(group, revision);
    const cached = this.cache.get(id);
    if (cached) return cached;
    const found = await this.collections.revisions.get(id);
    if (found) this.remember(found);
    return found;
  }

  /** The revision new instances of `group` start from; 0 when none is recorded yet. */
  async currentRevision(group: string): Promise<number> {
    const [latest] = await this.collections.deployments.find({ group }, { sort: { field: "revision", direction: -1 }, limit: 1 });
    if (latest) {
      const state = effectiveState(latest, await this.collections.progress.get(latest._id));
      return state === "ROLLED_BACK" || state === "FAILED" ? latest.previousRevision : latest.revision;
    }
    const [initial] = await this.collections.revisions.find({ group, origin: "INITIAL" }, { sort: { field: "revision", direction: -1 }, limit: 1 });
    return initial?.revision ?? 0;
  }

  /**
   * Freezes a new revision of `group` with `changes` applied, under the next free number (the
   * insert is the check, so two controllers never get the same number).
   */
  async freeze(group: StoredGroup, changes: DeploymentChanges, origin: StoredRevision["origin"]): Promise<StoredRevision> {
    const templates = changes.templates ?? group.templates;
    const pinned = await Promise.all(templates.map(async (name) => ({ name, hash: (await this.templateHash(name)) ?? "" })));
    const platformVersion = changes.platformVersion !== undefined ? changes.platformVersion : group.platformVersion;
    // A deployment naming a version the catalog does not have fails here, with nothing frozen.
    const build = await this.builds(group.platform, platformVersion);
    const [latest] = await this.collections.revisions.find({ group: group.name }, { sort: { field: "revision", direction: -1 }, limit: 1 });
    let revision = (latest?.revision ?? 0) + 1;
    for (let attempt = 0; attempt < revisionNumberAttemptsMax; attempt++, revision++) {
      const doc: StoredRevision = {
        _id: revisionId(group.name, revision),
        group: group.name,
        revision,
        platform: group.platform,
        platformVersion,
        jarFile: changes.jarFile ?? group.jarFile,
        memoryMb: changes.memoryMb ?? group.memoryMb,
        templates: pinned,
        build,
        origin,
        createdAt: this.nowIso(),
      };
      try {
        await this.collections.revisions.insert(doc);
        this.remember(doc);
        return doc;
      } catch (err) {
        if (!(err instanceof DuplicateKeyError)) throw err;
      }
    }
    throw new Error(`No free revision number for group ${group.name} after ${revisionNumberAttemptsMax} attempts`);
  }

  /** Removes a revision no deployment refers to (a create that failed after taking the number). */
  async discard(group: string, revision: number): Promise<void> {
    this.cache.delete(revisionId(group, revision));
    await this.collections.revisions.delete(revisionId(group, revision));
  }

  /** Forgets every revision of a deleted group (a new group of that name starts from revision 1). */
  async forgetGroup(group: string): Promise<void> {
    for (const id of [...this.cache.keys()]) if (id.startsWith(`${group}:`)) this.cache.delete(id);
    await this.collections.revisions.deleteMany({ group });
  }

  /** Revision 1 of a group that has none: frozen from the group as it is, once (a concurrent freeze wins). */
  private async freezeInitial(group: StoredGroup): Promise<StoredRevision | null> {
    const existing = await this.get(group.name, 1);
    if (existing) return existing;
    try {
      const doc: StoredRevision = {
        _id: revisionId(group.name, 1),
        group: group.name,
        revision: 1,
        platform: group.platform,
        platformVersion: group.platformVersion,
        jarFile: group.jarFile,
        memoryMb: group.memoryMb,
        templates: await Promise.all(group.templates.map(async (name) => ({ name, hash: (await this.templateHash(name)) ?? "" }))),
        build: await this.initialBuild(group),
        origin: "INITIAL",
        createdAt: this.nowIso(),
      };
      await this.collections.revisions.insert(doc);
      this.remember(doc);
      return doc;
    } catch (err) {
      if (!(err instanceof DuplicateKeyError)) throw err;
      return this.get(group.name, 1);
    }
  }

  /** The build of a group's first revision; a label the catalog does not know (named before its builds were added) freezes none. */
  private async initialBuild(group: StoredGroup): Promise<RevisionBuild | null> {
    try {
      return await this.builds(group.platform, group.platformVersion);
    } catch (err) {
      if (err instanceof ApiError && err.status === 422) return null;
      throw err;
    }
  }

  private remember(doc: StoredRevision): void {
    if (this.cache.size >= revisionCacheEntriesMax) this.cache.delete(this.cache.keys().next().value as string);
    this.cache.set(doc._id, doc);
  }
}
