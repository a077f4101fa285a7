/**
 * Deployment and revision schemas: the create body of `POST /api/v1/groups/{group}/deployments`,
 * the deployment record the routes return (with per-instance progress) and the revision record.
 * Decisions: docs/decisions/deployments.md.
 */
import { Type, type Static } from "@sinclair/typebox";
import { memoryMbMax, TEMPLATE_NAME_PATTERN, templatesPerGroupMax, UPDATE_STRATEGY_TYPES } from "../domain/groups/group-schemas.js";

const literals = <T extends readonly string[]>(values: T) => Type.Union(values.map((v) => Type.Literal(v)));

/** States of a deployment (issue 13; spec document 1 names ROLLED_BACK). */
export const DEPLOYMENT_STATES = ["IN_PROGRESS", "PAUSED", "COMPLETED", "ROLLED_BACK", "FAILED"] as const;
export type DeploymentState = (typeof DEPLOYMENT_STATES)[number];
/** States after which nothing more is rolled out. */
export const TERMINAL_DEPLOYMENT_STATES: ReadonlySet<DeploymentState> = new Set(["COMPLETED", "ROLLED_BACK", "FAILED"]);

/**
 * Where a deployment is: CANARY (the canaries run beside the old revision until promoted), ROLLING
 * (replacing the rest), RESTORING (after a rollback with restore: the previous revision replaces the
 * new one), DONE (nothing left to do).
 */
export const DEPLOYMENT_PHASES = ["CANARY", "ROLLING", "RESTORING", "DONE"] as const;
export type DeploymentPhase = (typeof DEPLOYMENT_PHASES)[number];

/** A deployment's batch is at most this many instances (the group bound). */
export const batchSizeMax = 10_000;
/** Longest minimum healthy time and promotion timeout: one day. */
export const healthSecondsMax = 86_400;
/** Default of minHealthySeconds: a new instance serves this long without a crash before it counts. */
export const minHealthySecondsDefault = 10;

/** Start-relevant group fields a deployment may change; omitted ones are taken from the group as it is. */
export const DeploymentChangesSchema = Type.Object(
  {
    platformVersion: Type.Optional(Type.Union([Type.String({ maxLength: 64 }), Type.Null()])),
    jarFile: Type.Optional(Type.String({ minLength: 1, maxLength: 256, pattern: "\\S" })),
    memoryMb: Type.Optional(Type.Integer({ minimum: 1, maximum: memoryMbMax })),
    templates: Type.Optional(Type.Array(Type.String({ pattern: TEMPLATE_NAME_PATTERN }), { maxItems: templatesPerGroupMax })),
  },
  { additionalProperties: false },
);
export type DeploymentChanges = Static<typeof DeploymentChangesSchema>;

/** `POST /api/v1/groups/{group}/deployments` body; every key optional (an empty body is a rolling restart). */
export const DeploymentCreateSchema = Type.Object(
  {
    /** ROLLING (default: the group's updateStrategy.type) or RECREATE (every old instance at once). */
    strategy: Type.Optional(literals(UPDATE_STRATEGY_TYPES)),
    /** Instances replaced at once (new ones not yet healthy plus old ones being retired); default 1. */
    batchSize: Type.Optional(Type.Integer({ minimum: 1, maximum: batchSizeMax })),
    canaryInstances: Type.Optional(Type.Integer({ minimum: 0, maximum: batchSizeMax })),
    canaryPercent: Type.Optional(Type.Integer({ minimum: 0, maximum: 100 })),
    /** On (default): a new instance counts once RUNNING for minHealthySeconds, and a crash fails the rollout. */
    healthGate: Type.Optional(Type.Boolean()),
    minHealthySeconds: Type.Optional(Type.Integer({ minimum: 0, maximum: healthSecondsMax })),
    /** A failed health gate returns the group to the previous revision (default false: the rollout FAILS). */
    autoRollback: Type.Optional(Type.Boolean()),
    /** Canaries healthy this long are promoted without an operator; absent: only an explicit promote. */
    promotionTimeoutSeconds: Type.Optional(Type.Integer({ minimum: 1, maximum: healthSecondsMax })),
    changes: Type.Optional(DeploymentChangesSchema),
  },
  { additionalProperties: false },
);
export type DeploymentCreate = Static<typeof DeploymentCreateSchema>;

/** `POST .../deployments/{revision}/rollback` body. */
export const DeploymentRollbackSchema = Type.Object(
  {
    /** false (default, spec): the rollout stops only. true: the previous revision also replaces the new one's instances. */
    restore: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
export type DeploymentRollback = Static<typeof DeploymentRollbackSchema>;

/** One template layer of a revision, pinned to a content hash ("" when the template did not exist). */
export const PinnedLayerSchema = Type.Object({ name: Type.String(), hash: Type.String() });

/** A frozen revision: what its instances start from. */
export const RevisionSchema = Type.Object({
  group: Type.String(),
  revision: Type.Integer({ minimum: 1 }),
  platform: Type.String(),
  platformVersion: Type.Union([Type.String(), Type.Null()]),
  jarFile: Type.String(),
  memoryMb: Type.Integer(),
  templates: Type.Array(PinnedLayerSchema),
  /** The catalog build of platformVersion when frozen (absent in revisions from before the catalog, null when none). */
  build: Type.Optional(Type.Union([Type.Object({ version: Type.String(), sha256: Type.String(), downloadUrl: Type.String() }), Type.Null()])),
  /** INITIAL: frozen from the group when its first instance was scheduled; DEPLOYMENT: by a deployment. */
  origin: literals(["INITIAL", "DEPLOYMENT"] as const),
  createdAt: Type.String({ format: "date-time" }),
});
export type Revision = Static<typeof RevisionSchema>;

/** Per-instance progress of a deployment. */
export const DeploymentInstanceSchema = Type.Object({
  id: Type.String(),
  node: Type.String(),
  state: Type.String(),
  deploymentRevision: Type.Integer(),
  /** NEW: of the deployment's revision; OLD: of another one. */
  role: literals(["NEW", "OLD"] as const),
  /** NEW: passed the health gate; OLD: false. */
  healthy: Type.Boolean(),
  /** OLD: retired by this deployment (drained, then stopped). */
  retired: Type.Boolean(),
  playerCount: Type.Integer(),
  /** NEW: when the rollout first saw it RUNNING (ISO); null before, and for OLD. */
  runningSince: Type.Union([Type.String({ format: "date-time" }), Type.Null()]),
  /** NEW: when it passes the health gate if it keeps running (runningSince + minHealthySeconds). */
  healthyAt: Type.Union([Type.String({ format: "date-time" }), Type.Null()]),
});
export type DeploymentInstance = Static<typeof DeploymentInstanceSchema>;

/** Settings of a deployment as created (resolved against the group's updateStrategy). */
export const DeploymentSettingsSchema = Type.Object({
  strategy: literals(UPDATE_STRATEGY_TYPES),
  batchSize: Type.Integer(),
  canaryInstances: Type.Union([Type.Integer(), Type.Null()]),
  canaryPercent: Type.Union([Type.Integer(), Type.Null()]),
  healthGate: Type.Boolean(),
  minHealthySeconds: Type.Integer(),
  autoRollback: Type.Boolean(),
  promotionTimeoutSeconds: Type.Union([Type.Integer(), Type.Null()]),
  maxSurge: Type.Integer(),
  maxUnavailable: Type.Integer(),
});
export type DeploymentSettings = Static<typeof DeploymentSettingsSchema>;

/** A deployment as the routes return it. */
export const DeploymentSchema = Type.Object({
  group: Type.String(),
  revision: Type.Integer(),
  previousRevision: Type.Integer(),
  state: literals(DEPLOYMENT_STATES),
  phase: literals(DEPLOYMENT_PHASES),
  settings: DeploymentSettingsSchema,
  changes: DeploymentChangesSchema,
  /** Instances the rollout steers to (frozen at its first step); null before it. */
  desiredInstances: Type.Union([Type.Integer(), Type.Null()]),
  /** Canary instances (canaryInstances, or canaryPercent of desiredInstances); 0 without a canary. */
  canaryCount: Type.Union([Type.Integer(), Type.Null()]),
  promoted: Type.Boolean(),
  /** COMPLETED, ROLLED_BACK or FAILED once finished; null before. */
  outcome: Type.Union([Type.String(), Type.Null()]),
  /** Why it failed or was rolled back. */
  reason: Type.Union([Type.String(), Type.Null()]),
  createdBy: Type.String(),
  createdAt: Type.String({ format: "date-time" }),
  updatedAt: Type.String({ format: "date-time" }),
  finishedAt: Type.Union([Type.String({ format: "date-time" }), Type.Null()]),
});
export type Deployment = Static<typeof DeploymentSchema>;

/** One deployment with its revision and per-instance progress (`GET .../deployments/{revision}`). */
export const DeploymentDetailSchema = Type.Composite([
  DeploymentSchema,
  Type.Object({
    revisionRecord: Type.Union([RevisionSchema, Type.Null()]),
    progress: Type.Object({
      newInstances: Type.Integer(),
      newHealthy: Type.Integer(),
      oldInstances: Type.Integer(),
      retired: Type.Integer(),
    }),
    instances: Type.Array(DeploymentInstanceSchema),
  }),
]);
export type DeploymentDetail = Static<typeof DeploymentDetailSchema>;
