/**
 * The backup bundle: one tar.gz whose entries are, in this order,
 *
 *   documents/                       documents/<collection>.ndjson   one JSON document per line, `_id` order
 *   kv/                              kv/<part>.ndjson                one {"key","value"[,"ttlMs"]} per line
 *   blobs/                           blobs/index.txt                 the hash of every blob, one per line
 *                                    blobs/<sha256>                  a template blob, named by its content
 *   manifest.json                    what the bundle holds, with the sha256 and size of every part
 *   authentication.json              the cluster's HMAC of manifest.json (bundle-auth.ts)
 *
 * Documents are kept store-neutral (the JSON the store ports read and write), so a bundle from one
 * document store restores into another. The manifest comes last because it names what was written
 * before it (blob bytes are only counted while they are packed); readers verify everything against
 * it once they have read the whole bundle. docs/decisions/backup.md gives the reasons.
 */
import { Type, type Static } from "@sinclair/typebox";

/** The format tag of manifest.json; a reader refuses any other. */
export const BUNDLE_FORMAT = "cloud-backup/1";
export const MANIFEST_ENTRY = "manifest.json";
/** The cluster's authentication of manifest.json (bundle-auth.ts); the entry after the manifest. */
export const AUTHENTICATION_ENTRY = "authentication.json";
export const BLOB_INDEX_ENTRY = "blobs/index.txt";
/** Directories every bundle has. */
export const BUNDLE_DIRECTORIES = ["documents/", "kv/", "blobs/"] as const;

/**
 * Collections never bundled: the cluster's identity (which cluster a database belongs to and its
 * CA, both owned by Raft), the signing secrets and the fencing tokens' high-water marks. A bundle
 * restored elsewhere must not make a database claim another cluster, a bundle must not carry keys
 * that sign tokens, and a restore must never lower a fencing token the daemons have seen. Nor the
 * credential cut-offs of deleted nodes and the workload tokens' rotations and revocations: a
 * restore never brings a cut-off or revoked credential back to life.
 * A bundle that names one is refused, like any collection outside {@link BUNDLED_COLLECTIONS}.
 */
export const NEVER_BUNDLED_COLLECTIONS: ReadonlySet<string> = new Set([
  "cluster_meta",
  "cluster_ca",
  "system_secrets",
  "fencing_tokens",
  "node_credential_cutoffs",
  "workload_token_families",
  "workload_token_revocations",
]);

/**
 * The one allowlist of collections a bundle may hold, shared by the writer (it writes only these),
 * the reader (an entry of another collection stops the read), the validator (a manifest naming
 * another is a problem) and the restore (it imports only these). Anything else in a bundle, known
 * or not, is refused rather than skipped. A collection a service adds is backed up once it is
 * listed here (test/backup/collection-allowlist.test.ts fails until it is, or until it is listed
 * in {@link NEVER_BUNDLED_COLLECTIONS}).
 */
export const BUNDLED_COLLECTIONS: ReadonlySet<string> = new Set([
  "audit_log",
  "catalog_builds",
  "catalog_mirror",
  "crashes",
  "deployment_locks",
  "deployment_progress",
  "deployments",
  "group_revisions",
  "groups",
  "instances",
  "maintenance",
  "metrics_history",
  "minecraft_links",
  "node_certificate_revocations",
  "node_token_claims",
  "node_tokens",
  "nodes",
  "platform_modules",
  "roles",
  "shares",
  "template_versions",
  "templates",
  "users",
]);

/**
 * The document collections of platform modules, one per module (`module_<id>`, see
 * src/modules/host/module-storage.ts): bundled like the listed ones. The installed bundles
 * themselves are blobs of the shared blob store, and their signatures are in `platform_modules`;
 * their key-value keys are the `module-kv` part of {@link KV_PARTS}.
 */
export const MODULE_COLLECTION_PATTERN = /^module_[a-z0-9_]{1,43}$/;

/** True when a bundle may hold the collection `name` (see {@link BUNDLED_COLLECTIONS}). */
export const isBundledCollection = (name: string): boolean => BUNDLED_COLLECTIONS.has(name) || MODULE_COLLECTION_PATTERN.test(name);

/** Collections every bundle holds (empty or not): without users nobody could sign in after a restore. */
export const REQUIRED_COLLECTIONS: readonly string[] = ["users", "roles", "groups", "instances", "templates", "template_versions", "audit_log"];

/** Required collections that may not be empty: a bundle without a user would lock everyone out. */
export const NON_EMPTY_COLLECTIONS: readonly string[] = ["users"];

/** Prefix of platform modules' key-value keys (`MODULE_KV_PREFIX` of src/modules/host/module-storage.ts; a test holds the two equal). */
export const MODULE_KV_PREFIX = "cloud:v1:module-kv:";

/** One key-value part of a bundle: its keys, how a restore applies them, and whether a valid bundle must hold it. */
export interface KvPart {
  part: string;
  prefix: string;
  /**
   * `raise`: a monotonic counter; a restore only ever raises it. `replace`: data; a restore makes the
   * keys under the prefix exactly the bundle's (others deleted), each with the time to live it had left.
   */
  restore: "raise" | "replace";
  /** False for parts added after bundles existed: a bundle without one is still valid, and its restore leaves those keys alone. */
  required: boolean;
}

/**
 * Key-value prefixes worth keeping, each in its own part: the fencing-token counters of leases
 * (daemons refuse a token lower than one they saw) and the event sequence (clients hold positions
 * in it), which a restore only ever raises; and the platform modules' own keys (their data, like
 * their `module_<id>` collections), which a restore puts back as they were. Leases, sessions,
 * tickets, login streaks and the event journal are moments of a running cluster, not state to bring
 * back.
 */
export const KV_PARTS: readonly KvPart[] = [
  { part: "lease-tokens", prefix: "cloud:v1:lease-token:", restore: "raise", required: true },
  { part: "event-sequence", prefix: "cloud:v1:events:sequence", restore: "raise", required: true },
  { part: "module-kv", prefix: MODULE_KV_PREFIX, restore: "replace", required: false },
];

/** A backup id: the UTC creation time to the millisecond and eight random hex digits (sorts by time). */
export const BACKUP_ID_PATTERN = /^[0-9]{8}T[0-9]{9}Z-[0-9a-f]{8}$/;
export const COLLECTION_NAME_PATTERN = /^[A-Za-z][A-Za-z0-9_]{0,49}$/;
const SHA256_PATTERN = "^[0-9a-f]{64}$";

export const documentsEntry = (collection: string): string => `documents/${collection}.ndjson`;
export const kvEntry = (part: string): string => `kv/${part}.ndjson`;
export const blobEntry = (hash: string): string => `blobs/${hash}`;

/** The group a collection belongs to: its name up to the first underscore (`template_versions` → `template`). */
export const prefixGroupOf = (collection: string): string => collection.split("_")[0];

const Part = { file: Type.String(), sizeBytes: Type.Integer({ minimum: 0 }), sha256: Type.String({ pattern: SHA256_PATTERN }) };

/** manifest.json, checked with this schema before any of it is believed. */
export const BundleManifestSchema = Type.Object(
  {
    format: Type.Literal(BUNDLE_FORMAT),
    id: Type.String({ pattern: BACKUP_ID_PATTERN.source }),
    createdAt: Type.String({ pattern: "^[0-9]{4}-[0-9]{2}-[0-9]{2}T" }),
    /** The cluster that made the bundle (absent in bundles written before bundles were authenticated). */
    clusterId: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    /** The controller (cluster member id) and software version that made it. */
    controller: Type.Object({ nodeId: Type.String(), softwareVersion: Type.String() }),
    profile: Type.String(),
    /** embedded, postgres or mongodb. */
    documentStore: Type.String(),
    /** Documents of every collection together, whatever the store (the spec's name). */
    mongoDocumentCount: Type.Integer({ minimum: 0 }),
    collections: Type.Array(
      Type.Object({ name: Type.String({ pattern: COLLECTION_NAME_PATTERN.source }), documentCount: Type.Integer({ minimum: 0 }), ...Part }),
    ),
    /** Collection name groups and how many collections each has. */
    collectionPrefixGroups: Type.Array(Type.Object({ prefix: Type.String(), collectionCount: Type.Integer({ minimum: 1 }) })),
    kv: Type.Array(
      Type.Object({ part: Type.String({ pattern: "^[a-z0-9-]{1,40}$" }), prefix: Type.String(), keyCount: Type.Integer({ minimum: 0 }), ...Part }),
    ),
    blobs: Type.Object({ count: Type.Integer({ minimum: 0 }), totalBytes: Type.Integer({ minimum: 0 }), index: Type.Object(Part) }),
  },
  { additionalProperties: false },
);
export type BundleManifest = Static<typeof BundleManifestSchema>;

/**
 * The record the API answers with: the bundle's manifest, except that `createdAt` is when this
 * controller recorded the bundle (its own clock: an uploaded manifest's date orders nothing), plus
 * the bundle file's own size and sha256 and whether the bundle was foreign when it was recorded.
 */
export interface BackupRecord extends BundleManifest {
  sizeBytes: number;
  sha256: string;
  /** True when this cluster did not authenticate the bundle (made by another cluster, or changed since). */
  foreign?: boolean;
  /** The `createdAt` the bundle's manifest states: information only. */
  manifestCreatedAt?: string;
}

/** A record file as it must read back (anything else is a damaged record). */
export const BackupRecordSchema = Type.Object(
  {
    ...BundleManifestSchema.properties,
    sizeBytes: Type.Integer({ minimum: 0 }),
    sha256: Type.String({ pattern: SHA256_PATTERN }),
    foreign: Type.Optional(Type.Boolean()),
    manifestCreatedAt: Type.Optional(Type.String()),
  },
  { additionalProperties: false },
);

/** The validation report (spec document 2, "Backup records"), plus the checksum and archive findings. */
export interface ValidationReport {
  id: string;
  valid: boolean;
  missingFiles: string[];
  missingDirectories: string[];
  missingMongoCollections: string[];
  missingMongoCollectionPrefixes: string[];
  missingRedisPrefixes: string[];
  emptyRequiredFiles: string[];
  /** Parts whose sha256, size or count differs from the manifest, and blobs whose bytes differ from their name. */
  checksumMismatches: string[];
  /** What makes the archive itself unacceptable: unsafe or unexpected entries, bombs, malformed parts, no authentication. */
  problems: string[];
  /** True when this cluster's key authenticates the manifest (bundle-auth.ts). */
  authenticated: boolean;
}

/** Ids named per list of a restore diff; the count says how many there are in all. */
export const restoreDiffIdsMax = 20;

/** Some ids and how many there are in all. */
export interface IdList {
  count: number;
  /** At most {@link restoreDiffIdsMax}, the first read. */
  ids: string[];
}

/** What a restore would do to one collection. */
export interface CollectionDiff {
  name: string;
  added: IdList;
  replaced: IdList;
  removed: IdList;
  unchanged: number;
}

/** The dry run's diff (RestoreReport.diff). */
export interface RestoreDiff {
  /** The bundled collections, in the bundle's order; empty when the datastores are not restored. */
  collections: CollectionDiff[];
  /** Blobs (template files, by sha256) stored and set aside; null when the files are not restored. */
  blobs: { added: IdList; removed: IdList } | null;
}

/** The restore report (spec document 2, "Backup records"). */
export interface RestoreReport {
  id: string;
  dryRun: boolean;
  /** True when the bundle is not authenticated by this cluster and was taken with `foreign: true`. */
  foreign: boolean;
  filesystem: { applied: boolean; entryCount: number; rollbackRoot: string | null };
  datastores: { applied: boolean; mongoCollections: string[]; mongoPrefixGroups: string[]; redisPrefixes: string[] };
  /** A dry run's diff (restore-diff.ts); null on a restore that ran. */
  diff: RestoreDiff | null;
}
