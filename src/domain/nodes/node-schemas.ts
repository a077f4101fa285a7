/**
 * Node record schema. The spec fixes only the id and the state (ONLINE, DRAINING, UNREACHABLE,
 * OFFLINE); the other fields are decided in docs/decisions/domain.md.
 */
import { Type, type Static } from "@sinclair/typebox";

/** Node states of spec document 1. */
export const NODE_STATES = ["ONLINE", "DRAINING", "UNREACHABLE", "OFFLINE"] as const;
/** One of {@link NODE_STATES}. */
export type NodeState = (typeof NODE_STATES)[number];
/** One of {@link NODE_STATES}. */
export const NodeStateSchema = Type.Union(NODE_STATES.map((s) => Type.Literal(s)));

/** The node record as the REST routes return it. */
export const NodeSchema = Type.Object({
  id: Type.String(),
  state: NodeStateSchema,
  /** Address the daemon reported; instances of this node are reached there. */
  host: Type.String(),
  labels: Type.Record(Type.String(), Type.String()),
  /** Daemon software version, null before the first handshake. */
  version: Type.Union([Type.String(), Type.Null()]),
  totalMemoryMb: Type.Integer(),
  usedMemoryMb: Type.Integer(),
  /** Host CPU usage in [0, 1]. */
  cpuUsage: Type.Number(),
  /** Instances on the node that are neither STOPPED nor CRASHED (computed). */
  instanceCount: Type.Integer(),
  /** Excluded from placement by an operator (cordon); independent of draining. */
  cordoned: Type.Boolean(),
  /**
   * True from the moment the node's daemon announced a graceful shutdown until its next session:
   * placement skips the node while its instances stop. Absent in records written before it existed.
   */
  shuttingDown: Type.Optional(Type.Boolean()),
  registeredAt: Type.String({ format: "date-time" }),
  connectedAt: Type.Union([Type.String({ format: "date-time" }), Type.Null()]),
  lastHeartbeatAt: Type.Union([Type.String({ format: "date-time" }), Type.Null()]),
  /** When the current drain was requested; null unless DRAINING. */
  drainRequestedAt: Type.Union([Type.String({ format: "date-time" }), Type.Null()]),
  /** True while the node's certificate is revoked: its daemon cannot open a stream (computed). */
  certificateRevoked: Type.Boolean(),
  /** When the certificate was revoked; null unless revoked (computed). */
  certificateRevokedAt: Type.Union([Type.String({ format: "date-time" }), Type.Null()]),
});
/** A node record. */
export type NodeRecord = Static<typeof NodeSchema>;
