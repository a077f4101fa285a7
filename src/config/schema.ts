/**
 * controller.yml schema (typebox). Every key of spec document 2's configuration table plus the
 * controller's own listener, storage, auth and rate-limit settings. Defaults here are the documented
 * ones and this is their only home: code that needs a default reads {@link configDefaults}, which is
 * computed from the schema. `load.ts` applies the fallbacks and clamps, and rejects unknown or
 * removed keys.
 */
import { Kind, Type, type Static, type TSchema } from "@sinclair/typebox";

const obj = <T extends Parameters<typeof Type.Object>[0]>(props: T) => Type.Object(props, { additionalProperties: false });

export const ControllerConfigSchema = obj({
  runtime: obj({ profile: Type.Union([Type.Literal("development"), Type.Literal("production")], { default: "development" }) }),
  kvstore: obj({ uri: Type.Optional(Type.String({ default: "redis://localhost:6379" })) }),
  database: obj({ uri: Type.Optional(Type.String()) }),
  cluster: obj({ id: Type.Optional(Type.String()) }),
  raft: obj({
    host: Type.String({ default: "0.0.0.0" }),
    port: Type.Integer({ minimum: 0, maximum: 65535, default: 9190 }),
    dataDir: Type.String({ default: "data/raft" }),
    joinAddrs: Type.Array(Type.String(), { default: [] }),
  }),
  scheduler: obj({
    evaluationIntervalSeconds: Type.Number({ exclusiveMinimum: 0, default: 15 }),
    auditRetentionDays: Type.Integer({ minimum: 1, default: 90 }),
    maxStartingPerNode: Type.Integer({ minimum: 0, default: 16 }),
    reconcileIntervalSeconds: Type.Number({ exclusiveMinimum: 0, maximum: 300, default: 30 }),
  }),
  deployments: obj({
    /** Seconds between steps of the active deployments (and between the group owners' checks of their intents). */
    reconcileIntervalSeconds: Type.Number({ exclusiveMinimum: 0, maximum: 60, default: 1 }),
    /** TTL of the Raft singleton lease `deployment-reconciler`: how long a dead holder keeps it. */
    leaseTtlSeconds: Type.Number({ minimum: 1, maximum: 3600, default: 15 }),
  }),
  logging: obj({
    level: Type.String({ default: "INFO" }),
    format: Type.String({ default: "HUMAN" }),
  }),
  metrics: obj({
    enabled: Type.Boolean({ default: true }),
    retentionHours: Type.Number({ default: 168 }),
    collectionIntervalSeconds: Type.Number({ default: 30 }),
  }),
  crashes: obj({
    crashLoopThreshold: Type.Integer({ minimum: 1, default: 3 }),
    crashLoopWindowSeconds: Type.Integer({ minimum: 1, default: 300 }),
  }),
  backup: obj({ retentionCount: Type.Integer({ minimum: 1, default: 10 }) }),
  catalog: obj({
    /** A build's whole download from its downloadUrl may take this long. */
    downloadTimeoutSeconds: Type.Integer({ minimum: 1, maximum: 86_400, default: 600 }),
    /** A download that delivers nothing for this long is given up. */
    stallTimeoutSeconds: Type.Integer({ minimum: 1, maximum: 3_600, default: 60 }),
    /** Largest build accepted, in MiB. */
    downloadMbMax: Type.Integer({ minimum: 1, maximum: 65_536, default: 2_048 }),
    /** After a failed download, the group's schedulingIssue stays this long before the next attempt. */
    retryAfterSeconds: Type.Integer({ minimum: 1, maximum: 3_600, default: 60 }),
  }),
  share: obj({
    enabled: Type.Boolean({ default: false }),
    defaultPrivate: Type.Boolean({ default: true }),
    /** The PrivateBin instance shares are uploaded to (its JSON API at this URL). */
    serviceUrl: Type.String({ pattern: "^https?://[^\\s]+$", default: "https://privatebin.net/" }),
  }),
  modules: obj({
    /** Registry index URLs (http or https), each a static `index.json` (docs/decisions/modules.md). */
    registries: Type.Array(Type.String({ pattern: "^https?://[^\\s]+$" }), { default: [] }),
    signing: obj({
      required: Type.Boolean({ default: true }),
      /** Trusted Ed25519 public keys: PEM text, or the path of a PEM file. */
      publicKeys: Type.Array(Type.String({ minLength: 1 }), { default: [] }),
    }),
    /** Each module's worker thread: its heap limit and how long it may block its thread before it is ended. */
    worker: obj({
      heapMb: Type.Integer({ minimum: 16, maximum: 8192, default: 128 }),
      hangTimeoutMs: Type.Integer({ minimum: 100, maximum: 60_000, default: 500 }),
    }),
    /** Advisory soft quotas, only counted (`cloud_module_quota_exceeded_total`). */
    quotas: obj({
      cpuPercent: Type.Number({ exclusiveMinimum: 0, maximum: 100, default: 50 }),
      heapPercent: Type.Number({ exclusiveMinimum: 0, maximum: 100, default: 75 }),
    }),
  }),
  telemetry: obj({
    enabled: Type.Boolean({ default: false }),
    otlpEndpoint: Type.String({ default: "" }),
    samplerRatio: Type.Number({ minimum: 0, maximum: 1, default: 1 }),
    traceUiTemplate: Type.String({ default: "" }),
  }),
  http: obj({
    port: Type.Integer({ minimum: 0, maximum: 65535, default: 8080 }),
    host: Type.String({ default: "0.0.0.0" }),
    /** CIDRs allowed to reach /api; empty means allow all. */
    allowedCidrs: Type.Array(Type.String(), { default: [] }),
    corsOrigins: Type.Array(Type.String(), { default: ["*"] }),
  }),
  grpc: obj({ port: Type.Integer({ minimum: 0, maximum: 65535, default: 9090 }) }),
  data: obj({ dir: Type.String({ default: "data" }) }),
  auth: obj({
    adminUsername: Type.String({ default: "admin", minLength: 1 }),
    /** Initial admin password; CLOUD_ADMIN_PASSWORD overrides; generated and logged once when empty. */
    adminPassword: Type.String({ default: "" }),
    tokenTtlSeconds: Type.Integer({ minimum: 60, default: 43200 }),
  }),
  rateLimit: obj({
    perIpPerMinute: Type.Integer({ minimum: 1, default: 6000 }),
    perUserPerMinute: Type.Integer({ minimum: 1, default: 3000 }),
  }),
});

export type ControllerConfig = Static<typeof ControllerConfigSchema>;

type DeepReadonly<T> = T extends readonly (infer E)[] ? readonly DeepReadonly<E>[] : T extends object ? { readonly [K in keyof T]: DeepReadonly<T[K]> } : T;

/** The schema's defaults as a value: every section, and every key that has a default. */
function defaultsOf(schema: TSchema): unknown {
  if (schema[Kind] === "Object") {
    const out: Record<string, unknown> = {};
    for (const [key, child] of Object.entries(schema.properties as Record<string, TSchema>)) {
      const value = defaultsOf(child);
      if (value !== undefined) out[key] = value;
    }
    return Object.freeze(out);
  }
  const value: unknown = structuredClone(schema.default);
  return Array.isArray(value) ? Object.freeze(value) : value;
}

/**
 * Every key's default, read from {@link ControllerConfigSchema} once (frozen). Keys without a default
 * (`database.uri`, `cluster.id`) are absent. `raft.dataDir` is the schema's `data/raft`; the loader
 * derives it from `data.dir` when the file does not set it.
 */
export const configDefaults = defaultsOf(ControllerConfigSchema) as DeepReadonly<ControllerConfig>;

/** Keys removed from the schema in earlier releases: present in controller.yml, they block startup. */
export const REMOVED_CONFIG_KEYS: readonly string[] = ["raft.bindHost", "scheduler.leaseTtlSeconds", "logging.file"];
