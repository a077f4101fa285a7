/**
 * The software catalog's records: one document per build (`catalog_builds`, `_id`
 * `<platform>:<version>`), written under the cluster-wide record lock of its platform, so that
 * "recommended" names at most one build per platform whichever controllers write at once.
 * Groups take the recommended build as their default `platformVersion`, and a revision freezes
 * the build its group names ({@link CatalogService.freeze}). docs/decisions/catalog.md.
 */
import type { Clock } from "../shared/clock.js";
import { conflict, notFound, validationError } from "../shared/errors.js";
import type { Collection, Doc, DocumentStore } from "../store/ports.js";
import { KeyedMutex, type KeyedLock } from "../domain/shared/keyed-mutex.js";
import { isoFromMs } from "../domain/shared/time.js";
import { checkSchema } from "../domain/shared/validate.js";
import type { GroupCatalog, GroupService } from "../domain/groups/group-service.js";
import {
  BuildCreateSchema,
  BuildPatchSchema,
  buildsPerPlatformMax,
  type Build,
  type BuildCreate,
  type BuildPatch,
  type FrozenBuild,
} from "./catalog-schemas.js";

/** Collection owned by {@link CatalogService}. */
export const CATALOG_BUILDS_COLLECTION = "catalog_builds";

type StoredBuild = Build & Doc;

/** The snapshots of a change, for the audit log. */
export interface BuildChange {
  before: Build | null;
  after: Build | null;
}

const idOf = (platform: string, version: string) => `${platform}:${version}`;
const byVersionDescending = (a: Build, b: Build) => b.version.localeCompare(a.version, "en", { numeric: true });

/** Adds, changes, recommends and removes builds; answers the groups' and revisions' questions. */
export class CatalogService implements GroupCatalog {
  private readonly builds: Collection<StoredBuild>;

  constructor(
    store: DocumentStore,
    private readonly groups: Pick<GroupService, "listDocs">,
    private readonly clock: Clock,
    private readonly lock: KeyedLock = new KeyedMutex(),
  ) {
    this.builds = store.collection<StoredBuild>(CATALOG_BUILDS_COLLECTION, { indexes: [{ name: "catalog_builds_platform", field: "platform" }] });
  }

  /** Every build (of one platform), by platform, newest version first. */
  async list(platform?: string): Promise<Build[]> {
    const docs = await this.builds.find(platform ? { platform: platform.toLowerCase() } : {});
    return docs.map(toBuild).sort((a, b) => (a.platform === b.platform ? byVersionDescending(a, b) : a.platform < b.platform ? -1 : 1));
  }

  /** One build; 404 BUILD_NOT_FOUND. */
  async get(platform: string, version: string): Promise<Build> {
    const doc = await this.builds.get(idOf(platform.toLowerCase(), version));
    if (!doc) throw notFound(`Build not found: ${platform} ${version}`, "BUILD_NOT_FOUND");
    return toBuild(doc);
  }

  /** Adds a build; 409 BUILD_EXISTS for a known version. `recommended` moves the platform's recommendation to it. */
  async add(input: BuildCreate, by: string): Promise<Build> {
    checkSchema(BuildCreateSchema, input, "body");
    return this.lock.run(input.platform, async () => {
      const existing = await this.builds.find({ platform: input.platform });
      if (existing.some((b) => b.version === input.version)) throw conflict(`Build already in the catalog: ${input.platform} ${input.version}`, "BUILD_EXISTS");
      if (existing.length >= buildsPerPlatformMax)
        throw conflict(`${input.platform} has ${buildsPerPlatformMax} builds already; remove old ones first`, "CATALOG_FULL");
      const nowIso = isoFromMs(this.clock.nowMs());
      const doc: StoredBuild = {
        _id: idOf(input.platform, input.version),
        platform: input.platform,
        version: input.version,
        downloadUrl: input.downloadUrl,
        sha256: input.sha256,
        recommended: input.recommended === true,
        createdAt: nowIso,
        updatedAt: nowIso,
        updatedBy: by,
      };
      if (doc.recommended) await this.clearRecommendation(existing, by, nowIso);
      await this.builds.insert(doc);
      return toBuild(doc);
    });
  }

  /** A new download URL or digest of a version; revisions already frozen keep what they froze. */
  async update(platform: string, version: string, patch: BuildPatch, by: string): Promise<BuildChange> {
    checkSchema(BuildPatchSchema, patch, "body");
    const key = platform.toLowerCase();
    return this.lock.run(key, async () => {
      const current = await this.require(key, version);
      const next: StoredBuild = { ...current, ...definedOf(patch), updatedAt: isoFromMs(this.clock.nowMs()), updatedBy: by };
      await this.builds.put(next);
      return { before: toBuild(current), after: toBuild(next) };
    });
  }

  /** Makes `version` the platform's recommended build (the default of new groups). */
  async recommend(platform: string, version: string, by: string): Promise<BuildChange> {
    const key = platform.toLowerCase();
    return this.lock.run(key, async () => {
      const current = await this.require(key, version);
      const nowIso = isoFromMs(this.clock.nowMs());
      await this.clearRecommendation(
        (await this.builds.find({ platform: key })).filter((b) => b._id !== current._id),
        by,
        nowIso,
      );
      const next: StoredBuild = { ...current, recommended: true, updatedAt: nowIso, updatedBy: by };
      await this.builds.put(next);
      return { before: toBuild(current), after: toBuild(next) };
    });
  }

  /** Removes a build no group names; 409 BUILD_IN_USE names the groups that do. */
  async remove(platform: string, version: string): Promise<Build> {
    const key = platform.toLowerCase();
    return this.lock.run(key, async () => {
      const current = await this.require(key, version);
      const users = (await this.groups.listDocs()).filter((g) => g.platform.toLowerCase() === key && g.platformVersion === version).map((g) => g.name);
      if (users.length > 0) throw conflict(`Build ${key} ${version} is the platformVersion of ${users.join(", ")}`, "BUILD_IN_USE");
      await this.builds.delete(current._id);
      return toBuild(current);
    });
  }

  /** The recommended version of `platform`, or null (the default `platformVersion` of a new group). */
  async defaultVersion(platform: string): Promise<string | null> {
    const docs = await this.builds.find({ platform: platform.toLowerCase() });
    return docs.find((b) => b.recommended)?.version ?? null;
  }

  /** 422 when the catalog has builds of `platform` but not `version` (a platform without builds takes any label). */
  async check(platform: string, version: string | null): Promise<void> {
    await this.freeze(platform, version);
  }

  /**
   * The build a revision of a group on `platform` at `version` freezes: null when no version is
   * named or the catalog has no build of the platform; 422 when it has builds but not this one.
   */
  async freeze(platform: string, version: string | null): Promise<FrozenBuild | null> {
    if (version === null) return null;
    const docs = await this.builds.find({ platform: platform.toLowerCase() });
    if (docs.length === 0) return null;
    const build = docs.find((b) => b.version === version);
    if (!build) throw validationError(`platformVersion: the catalog has no build ${version} of ${platform} (known: ${docs.map((b) => b.version).join(", ")})`);
    return { version: build.version, sha256: build.sha256, downloadUrl: build.downloadUrl };
  }

  private async require(platform: string, version: string): Promise<StoredBuild> {
    const doc = await this.builds.get(idOf(platform, version));
    if (!doc) throw notFound(`Build not found: ${platform} ${version}`, "BUILD_NOT_FOUND");
    return doc;
  }

  private async clearRecommendation(others: readonly StoredBuild[], by: string, nowIso: string): Promise<void> {
    for (const other of others) if (other.recommended) await this.builds.put({ ...other, recommended: false, updatedAt: nowIso, updatedBy: by });
  }
}

function definedOf(patch: BuildPatch): Partial<Build> {
  return Object.fromEntries(Object.entries(patch).filter(([, value]) => value !== undefined)) as Partial<Build>;
}

function toBuild(doc: StoredBuild): Build {
  const { _id: _ignored, ...build } = doc;
  return build;
}
