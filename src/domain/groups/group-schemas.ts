/**
 * Group record schemas (spec document 1, "Group record"): the full form, the list form, the create
 * body and the PATCH body. The domain types are derived from them, so the REST contract and the
 * service speak the same shape.
 */
import { Type, type Static } from "@sinclair/typebox";

/** Group names: a letter or digit, then letters, digits, `_` or `-`; 64 characters at most. */
export const GROUP_NAME_PATTERN = "^[a-zA-Z0-9][a-zA-Z0-9_-]{0,63}$";
/** Template names as enforced on template import (spec document 1). */
export const TEMPLATE_NAME_PATTERN = "^[a-z0-9_][a-z0-9_-]{0,31}$";

/** How a group's instance count is decided. */
export const SCALING_MODES = ["STATIC", "DYNAMIC", "MANUAL"] as const;
/** How players are spread over a group's instances. */
export const ROUTING_STRATEGIES = ["LOWEST_PLAYERS", "HIGHEST_PLAYERS", "RANDOM", "ROUND_ROBIN"] as const;
/** Rollout styles of a group's update strategy. */
export const UPDATE_STRATEGY_TYPES = ["ROLLING", "RECREATE"] as const;

/** Lowest port a group's range may use. */
export const portMin = 1;
/** Highest port a group's range may use. */
export const portMax = 65535;
/** A group names at most this many template layers. */
export const templatesPerGroupMax = 32;
/** Upper bound of minInstances/maxInstances: far beyond any real network, low enough to stay an int. */
export const instancesPerGroupMax = 10_000;
/** Upper bound of memoryMb (1 TiB): a typo guard, not a capacity check. */
export const memoryMbMax = 1_048_576;

const literals = <T extends readonly string[]>(values: T) => Type.Union(values.map((v) => Type.Literal(v)));

/** One of {@link SCALING_MODES}. */
export const ScalingModeSchema = literals(SCALING_MODES);
/** One of {@link ROUTING_STRATEGIES}. */
export const RoutingSchema = literals(ROUTING_STRATEGIES);

/** Ports handed to the group's instances, both ends inclusive. */
export const PortRangeSchema = Type.Object(
  {
    start: Type.Integer({ minimum: portMin, maximum: portMax }),
    end: Type.Integer({ minimum: portMin, maximum: portMax }),
  },
  { additionalProperties: false },
);

/** Rollout defaults of a group; the deployments feature reads them. */
export const UpdateStrategySchema = Type.Object(
  {
    type: literals(UPDATE_STRATEGY_TYPES),
    /** Extra instances a rolling update may start above the target count. */
    maxSurge: Type.Integer({ minimum: 0, maximum: instancesPerGroupMax }),
    /** Instances a rolling update may take down at once. */
    maxUnavailable: Type.Integer({ minimum: 0, maximum: instancesPerGroupMax }),
  },
  { additionalProperties: false },
);

/** Highest TPS threshold accepted (Minecraft caps at 20; a modded platform may run faster). */
export const loadScalingTpsMax = 1_000;
/** Highest MSPT threshold accepted (one tick a minute: a typo guard). */
export const loadScalingMsptMax = 60_000;
/** Longest sustain and cooldown accepted: one day. */
export const loadScalingSecondsMax = 86_400;

/**
 * Scaling on reported load (DYNAMIC groups only; docs/decisions/scheduler.md, "Scaling on load"):
 * one more instance when the mean `tps1m` of the group's reporting RUNNING instances stays below
 * `minTps`, or their mean `msptAvg` above `maxMsptAvg`, for `sustainSeconds`; at most one such
 * start per `cooldownSeconds`; never above maxInstances. At least one threshold is required.
 */
export const LoadScalingSchema = Type.Object(
  {
    /** Scale up while the group's mean 1-minute TPS is below this. */
    minTps: Type.Optional(Type.Number({ exclusiveMinimum: 0, maximum: loadScalingTpsMax })),
    /** Scale up while the group's mean milliseconds per tick are above this. */
    maxMsptAvg: Type.Optional(Type.Number({ exclusiveMinimum: 0, maximum: loadScalingMsptMax })),
    /** How long the breach must last, seen by every evaluation in between, before a start. */
    sustainSeconds: Type.Integer({ minimum: 0, maximum: loadScalingSecondsMax }),
    /** Time after a load-triggered start before the next one. */
    cooldownSeconds: Type.Integer({ minimum: 0, maximum: loadScalingSecondsMax }),
  },
  { additionalProperties: false },
);
/** The load thresholds of a group, as stored and returned (defaults filled in). */
export type LoadScaling = Static<typeof LoadScalingSchema>;

/** The load thresholds as a create or PATCH body gives them: the durations may be left out. */
export const LoadScalingInputSchema = Type.Object(
  {
    minTps: Type.Optional(Type.Number({ exclusiveMinimum: 0, maximum: loadScalingTpsMax })),
    maxMsptAvg: Type.Optional(Type.Number({ exclusiveMinimum: 0, maximum: loadScalingMsptMax })),
    sustainSeconds: Type.Optional(Type.Integer({ minimum: 0, maximum: loadScalingSecondsMax })),
    cooldownSeconds: Type.Optional(Type.Integer({ minimum: 0, maximum: loadScalingSecondsMax })),
  },
  { additionalProperties: false },
);
/** The load thresholds of a create or PATCH body. */
export type LoadScalingInput = Static<typeof LoadScalingInputSchema>;

/** Why a group's instances cannot be placed (placement failure codes of src/scheduler/placement.ts). */
export const SchedulingIssueSchema = Type.Object({
  code: Type.String(),
  message: Type.String(),
  /** When the scheduler first hit this issue (ISO 8601); kept while the issue persists. */
  since: Type.String({ format: "date-time" }),
});
/** A scheduling issue on a group record. */
export type SchedulingIssue = Static<typeof SchedulingIssueSchema>;

/** The full group document as returned by GET /api/v1/groups/{name}. */
export const GroupSchema = Type.Object({
  name: Type.String(),
  platform: Type.String(),
  platformVersion: Type.Union([Type.String(), Type.Null()]),
  jarFile: Type.String(),
  templates: Type.Array(Type.String()),
  scalingMode: ScalingModeSchema,
  minInstances: Type.Integer(),
  maxInstances: Type.Integer(),
  maxPlayers: Type.Integer(),
  memoryMb: Type.Integer(),
  routing: RoutingSchema,
  portRange: PortRangeSchema,
  priority: Type.Integer(),
  maintenance: Type.Boolean(),
  static: Type.Boolean(),
  updateStrategy: UpdateStrategySchema,
  parent: Type.Union([Type.String(), Type.Null()]),
  /** Scaling on reported TPS / MSPT; null when the group scales on player fill only. */
  loadScaling: Type.Union([LoadScalingSchema, Type.Null()]),
  /** Paused by the crash-loop detector; `POST /api/v1/groups/{group}/resume` or leaving maintenance clears it. */
  paused: Type.Boolean(),
  /** Why the scheduler cannot start the instances the group needs; null when nothing blocks it. */
  schedulingIssue: Type.Union([SchedulingIssueSchema, Type.Null()]),
  /**
   * STATIC: instances an operator stopped (`POST /api/v1/services/{id}/stop`). Their slots stay
   * STOPPED, nothing replaces them, until `POST /api/v1/groups/{group}/start`.
   */
  stoppedInstances: Type.Array(Type.String()),
  runningInstances: Type.Integer(),
  totalPlayers: Type.Integer(),
  createdAt: Type.String({ format: "date-time" }),
  updatedAt: Type.String({ format: "date-time" }),
});
/** A group in full form. */
export type Group = Static<typeof GroupSchema>;

/** The list form (GET /api/v1/groups). */
export const GroupListItemSchema = Type.Pick(GroupSchema, [
  "name",
  "platform",
  "platformVersion",
  "scalingMode",
  "minInstances",
  "maxInstances",
  "maxPlayers",
  "runningInstances",
  "totalPlayers",
  "maintenance",
  "static",
]);
/** A group in list form. */
export type GroupListItem = Static<typeof GroupListItemSchema>;

const nonBlank = { minLength: 1, maxLength: 256, pattern: "\\S" };

/** POST /api/v1/groups body. Unknown keys are rejected; read-only aggregates are not accepted. */
export const GroupCreateSchema = Type.Object(
  {
    name: Type.String({ pattern: GROUP_NAME_PATTERN }),
    platform: Type.String(nonBlank),
    platformVersion: Type.Optional(Type.Union([Type.String({ maxLength: 64 }), Type.Null()])),
    jarFile: Type.Optional(Type.String(nonBlank)),
    templates: Type.Optional(Type.Array(Type.String({ pattern: TEMPLATE_NAME_PATTERN }), { maxItems: templatesPerGroupMax })),
    scalingMode: Type.Optional(ScalingModeSchema),
    minInstances: Type.Optional(Type.Integer({ minimum: 0, maximum: instancesPerGroupMax })),
    maxInstances: Type.Optional(Type.Integer({ minimum: 0, maximum: instancesPerGroupMax })),
    maxPlayers: Type.Optional(Type.Integer({ minimum: 0, maximum: 1_000_000 })),
    memoryMb: Type.Optional(Type.Integer({ minimum: 1, maximum: memoryMbMax })),
    routing: Type.Optional(RoutingSchema),
    portRange: Type.Optional(PortRangeSchema),
    priority: Type.Optional(Type.Integer({ minimum: -1_000_000, maximum: 1_000_000 })),
    maintenance: Type.Optional(Type.Boolean()),
    updateStrategy: Type.Optional(UpdateStrategySchema),
    parent: Type.Optional(Type.Union([Type.String({ pattern: GROUP_NAME_PATTERN }), Type.Null()])),
    loadScaling: Type.Optional(Type.Union([LoadScalingInputSchema, Type.Null()])),
  },
  { additionalProperties: false },
);
/** The create body. */
export type GroupCreate = Static<typeof GroupCreateSchema>;

/** PATCH /api/v1/groups/{name} body: only these keys; omitted keys stay unchanged. */
export const GroupPatchSchema = Type.Object(
  {
    minInstances: Type.Optional(Type.Integer({ minimum: 0, maximum: instancesPerGroupMax })),
    maxInstances: Type.Optional(Type.Integer({ minimum: 0, maximum: instancesPerGroupMax })),
    memoryMb: Type.Optional(Type.Integer({ minimum: 1, maximum: memoryMbMax })),
    routing: Type.Optional(RoutingSchema),
    scalingMode: Type.Optional(ScalingModeSchema),
    maintenance: Type.Optional(Type.Boolean()),
    /** Replaces the load thresholds as a whole; null removes them. */
    loadScaling: Type.Optional(Type.Union([LoadScalingInputSchema, Type.Null()])),
  },
  { additionalProperties: false },
);
/** The PATCH body. */
export type GroupPatch = Static<typeof GroupPatchSchema>;

/** Defaults applied on create: the command-line client's defaults where it has one. */
export const GROUP_DEFAULTS = {
  platformVersion: null,
  jarFile: "server.jar",
  templates: [] as string[],
  scalingMode: "DYNAMIC",
  minInstances: 1,
  maxInstances: 10,
  maxPlayers: 100,
  memoryMb: 1024,
  routing: "LOWEST_PLAYERS",
  portRange: { start: 30000, end: 30100 },
  priority: 0,
  maintenance: false,
  updateStrategy: { type: "ROLLING", maxSurge: 1, maxUnavailable: 0 },
  parent: null,
  loadScaling: null,
} as const;

/** Defaults of the load thresholds' durations: a breach lasting 30 s (three evaluations in a row at the 15 s interval), then 2 min between starts. */
export const LOAD_SCALING_DEFAULTS = { sustainSeconds: 30, cooldownSeconds: 120 } as const;

/** The stored form of given thresholds: the durations filled in, the keys in a fixed order. */
export function resolveLoadScaling(input: LoadScalingInput | null | undefined): LoadScaling | null {
  if (!input) return null;
  return {
    ...(input.minTps !== undefined ? { minTps: input.minTps } : {}),
    ...(input.maxMsptAvg !== undefined ? { maxMsptAvg: input.maxMsptAvg } : {}),
    sustainSeconds: input.sustainSeconds ?? LOAD_SCALING_DEFAULTS.sustainSeconds,
    cooldownSeconds: input.cooldownSeconds ?? LOAD_SCALING_DEFAULTS.cooldownSeconds,
  };
}
