/**
 * The software catalog (spec document 2, audit actions `catalog.add`, `catalog.update`,
 * `catalog.remove`, `catalog.recommend`): platform builds that groups reference through
 * `platform` and `platformVersion`. docs/decisions/catalog.md.
 */
import { Type, type Static } from "@sinclair/typebox";

/** Platform names as groups spell them (lower case in the catalog). */
export const CATALOG_PLATFORM_PATTERN = "^[a-z][a-z0-9-]{0,31}$";
/** A build's version: `1.21.1`, `1.20.4-R0.1`, `build-123`. */
export const CATALOG_VERSION_PATTERN = "^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$";
/** A sha256 in lower-case hex. */
export const SHA256_PATTERN = "^[0-9a-f]{64}$";
/** Builds one platform keeps at most (a catalog, not an archive of every nightly). */
export const buildsPerPlatformMax = 200;

const DownloadUrl = Type.String({ maxLength: 2048, pattern: "^https?://[^\\s]+$" });

/** A build as the catalog routes return it. */
export const BuildSchema = Type.Object({
  platform: Type.String(),
  version: Type.String(),
  downloadUrl: Type.String(),
  sha256: Type.String(),
  /** The default `platformVersion` of new groups on this platform; at most one per platform. */
  recommended: Type.Boolean(),
  createdAt: Type.String({ format: "date-time" }),
  updatedAt: Type.String({ format: "date-time" }),
  updatedBy: Type.String(),
});
export type Build = Static<typeof BuildSchema>;

/** `POST /api/v1/catalog/builds`. */
export const BuildCreateSchema = Type.Object(
  {
    platform: Type.String({ pattern: CATALOG_PLATFORM_PATTERN }),
    version: Type.String({ pattern: CATALOG_VERSION_PATTERN }),
    downloadUrl: DownloadUrl,
    sha256: Type.String({ pattern: SHA256_PATTERN }),
    recommended: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
export type BuildCreate = Static<typeof BuildCreateSchema>;

/** `PATCH /api/v1/catalog/builds/{platform}/{version}`: a new source or digest of the same version. */
export const BuildPatchSchema = Type.Object(
  {
    downloadUrl: Type.Optional(DownloadUrl),
    sha256: Type.Optional(Type.String({ pattern: SHA256_PATTERN })),
  },
  { additionalProperties: false },
);
export type BuildPatch = Static<typeof BuildPatchSchema>;

/** What a revision freezes of a build: later catalog changes reach instances only through a deployment. */
export const FrozenBuildSchema = Type.Object({
  version: Type.String(),
  sha256: Type.String(),
  downloadUrl: Type.String(),
});
export type FrozenBuild = Static<typeof FrozenBuildSchema>;
