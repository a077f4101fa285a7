/**
 * The cluster records as the REST API shows them (spec document 2, "Cluster records"), with the
 * fields this controller adds: the answering controller's id and the leader on the cluster
 * record, each member's Raft role, and the lease and config-version lists.
 */
import { Type, type Static } from "@sinclair/typebox";

const DateTime = Type.String({ format: "date-time" });

export const ClusterRecordSchema = Type.Object({
  clusterId: Type.String(),
  memberCount: Type.Integer({ minimum: 0 }),
  activeConfigVersion: Type.Union([Type.Integer(), Type.Null()]),
  createdAt: DateTime,
  /** The controller that answered. */
  nodeId: Type.String(),
  /** The Raft leader as this controller knows it. */
  leaderId: Type.Union([Type.String(), Type.Null()]),
});
export type ClusterRecord = Static<typeof ClusterRecordSchema>;

export const MemberSchema = Type.Object({
  nodeId: Type.String(),
  raftAddr: Type.String(),
  restAddr: Type.String(),
  gRPCAddr: Type.String(),
  label: Type.String(),
  joinedAt: Type.Union([DateTime, Type.Null()]),
  role: Type.Union([Type.Literal("voter"), Type.Literal("learner")]),
  leader: Type.Boolean(),
});
export type Member = Static<typeof MemberSchema>;

export const MemberListSchema = Type.Object({ members: Type.Array(MemberSchema) });

export const EjectionSchema = Type.Object({ nodeId: Type.String(), clusterId: Type.String(), reason: Type.String() });
export type Ejection = Static<typeof EjectionSchema>;

export const LeaveResponseSchema = Type.Object({ nodeId: Type.String(), clusterId: Type.String() });
export type LeaveResponse = Static<typeof LeaveResponseSchema>;

export const RecoveryResultSchema = Type.Object({
  clusterId: Type.String(),
  nodeId: Type.String(),
  ejected: Type.Array(Type.String()),
  memberCount: Type.Integer({ minimum: 1 }),
});

/** Statuses a join token is listed with: the stored ones, and EXPIRED for an ACTIVE one past its expiry. */
export const JOIN_TOKEN_STATUSES = ["ACTIVE", "USED", "REVOKED", "INVALIDATED", "EXPIRED"] as const;

export const CreatedJoinTokenSchema = Type.Object({ jti: Type.String(), token: Type.String(), expiresAt: DateTime });
export type CreatedJoinToken = Static<typeof CreatedJoinTokenSchema>;

export const JoinTokenSchema = Type.Object({
  jti: Type.String(),
  label: Type.String(),
  status: Type.Union(JOIN_TOKEN_STATUSES.map((s) => Type.Literal(s))),
  createdAt: DateTime,
  expiresAt: DateTime,
});
export type JoinToken = Static<typeof JoinTokenSchema>;
export const JoinTokenListSchema = Type.Object({ tokens: Type.Array(JoinTokenSchema) });

export const SeedRotationSchema = Type.Object({ clusterId: Type.String(), rotatedBy: Type.String(), rotatedAt: DateTime });
export type SeedRotation = Static<typeof SeedRotationSchema>;

export const LeaseSchema = Type.Object({
  name: Type.String(),
  holder: Type.String(),
  fencingToken: Type.Integer(),
  grantedAt: DateTime,
  expiresAt: DateTime,
});
export const LeaseListSchema = Type.Object({ leases: Type.Array(LeaseSchema) });
export type LeaseList = Static<typeof LeaseListSchema>;

export const ConfigVersionSchema = Type.Object({
  version: Type.Integer(),
  createdAt: DateTime,
  createdBy: Type.String(),
  comment: Type.String(),
  active: Type.Boolean(),
  /** The version that was active when this one was proposed (what it changed); null for the first. */
  parentVersion: Type.Union([Type.Integer(), Type.Null()]),
  config: Type.Record(Type.String(), Type.Unknown()),
});
export const ConfigVersionListSchema = Type.Object({
  activeVersion: Type.Union([Type.Integer(), Type.Null()]),
  versions: Type.Array(ConfigVersionSchema),
});
export type ConfigVersionList = Static<typeof ConfigVersionListSchema>;

/** Join token TTL bounds (spec document 2, "Limits"). */
export const joinTokenTtlSecondsDefault = 86_400;
export const joinTokenTtlSecondsMax = 30 * 86_400;
