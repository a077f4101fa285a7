/** Instance record schemas (spec document 1, "Instance record"). */
import { Type, type Static } from "@sinclair/typebox";

/** Instance states of spec document 1. */
export const INSTANCE_STATES = ["SCHEDULED", "PREPARING", "STARTING", "RUNNING", "STOPPING", "STOPPED", "CRASHED", "DRAINING"] as const;
/** One of {@link INSTANCE_STATES}. */
export type InstanceState = (typeof INSTANCE_STATES)[number];

/** States whose process serves players: they count towards runningInstances and totalPlayers. */
export const SERVING_STATES: ReadonlySet<string> = new Set<InstanceState>(["RUNNING", "DRAINING"]);
/** States with no process and none coming: excluded from the overview's instance count. */
export const FINISHED_STATES: ReadonlySet<string> = new Set<InstanceState>(["STOPPED", "CRASHED"]);

/** One of {@link INSTANCE_STATES}. */
export const InstanceStateSchema = Type.Union(INSTANCE_STATES.map((s) => Type.Literal(s)));

/** The single-instance form (GET /api/v1/services/{id}). */
export const InstanceSchema = Type.Object({
  id: Type.String(),
  group: Type.String(),
  node: Type.String(),
  state: InstanceStateSchema,
  port: Type.Integer(),
  playerCount: Type.Integer(),
  memoryMb: Type.Integer(),
  /** Milliseconds since startedAt (until stoppedAt once stopped); 0 before the process started. */
  uptimeMs: Type.Integer(),
  startedAt: Type.Union([Type.String({ format: "date-time" }), Type.Null()]),
  deploymentRevision: Type.Integer(),
});
/** An instance in single form. */
export type Instance = Static<typeof InstanceSchema>;

/** The list form (GET /api/v1/services): the single form without memoryMb. */
export const InstanceListItemSchema = Type.Omit(InstanceSchema, ["memoryMb"]);
/** An instance in list form. */
export type InstanceListItem = Static<typeof InstanceListItemSchema>;
