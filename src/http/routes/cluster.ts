/**
 * Cluster routes (spec document 2, "Endpoints → Cluster"): the cluster record, members, eject,
 * leave, join tokens, seed rotation, singleton leases and config versions. Reads need
 * CLUSTER_VIEW, changes CLUSTER_MANAGE; every change is audited as a `cluster.*` action.
 */
import type { Hono } from "hono";
import { Type } from "@sinclair/typebox";
import type { AuditRecorder } from "../../audit/types.js";
import { HOST_PORT_PATTERN } from "../../cluster/state/cluster-commands.js";
import {
  ClusterRecordSchema,
  ConfigVersionListSchema,
  CreatedJoinTokenSchema,
  EjectionSchema,
  JoinTokenListSchema,
  joinTokenTtlSecondsDefault,
  joinTokenTtlSecondsMax,
  LeaseListSchema,
  LeaveResponseSchema,
  MemberListSchema,
  RecoveryResultSchema,
  SeedRotationSchema,
} from "../../cluster/state/cluster-schemas.js";
import type { ClusterService } from "../../cluster/cluster-service.js";
import { badRequest, validationError } from "../../shared/errors.js";
import { audited } from "../audited.js";
import { addRoute, type RouteRegistry } from "../route.js";
import type { AppEnv } from "../types.js";

const tag = "Cluster";
const VIEW = "CLUSTER_VIEW";
const MANAGE = "CLUSTER_MANAGE";
/** Join addresses one token may carry. */
export const joinAddrsMax = 64;

const NodeIdParams = Type.Object({ nodeId: Type.String({ minLength: 1, maxLength: 128 }) });
const JtiParams = Type.Object({ jti: Type.String({ minLength: 1, maxLength: 128 }) });
const EjectQuery = Type.Object({ reason: Type.Optional(Type.String({ maxLength: 500 })) });
const EmptyBody = Type.Object({}, { additionalProperties: false });
const RecoverBody = Type.Object(
  {
    eject: Type.Array(Type.String({ minLength: 1, maxLength: 128 }), {
      minItems: 1,
      maxItems: 64,
      description: "Every other member: all must be gone (not answering)",
    }),
    reason: Type.Optional(Type.String({ maxLength: 500 })),
  },
  { additionalProperties: false },
);
/** How long recovery waits for an answer from each named member before calling it gone. */
export const recoveryProbeTimeoutMs = 3_000;
/**
 * `joinAddrs` and `ttlSeconds` are checked by the handler so that their failures carry the spec's
 * codes (400 MISSING_JOIN_ADDRS, 400 BAD_TTL) rather than the generic 422.
 */
const JoinTokenBody = Type.Object(
  {
    joinAddrs: Type.Optional(
      Type.Unknown({ description: `Required: a non-empty array (at most ${joinAddrsMax}) of host:port controller gRPC endpoints (400 MISSING_JOIN_ADDRS)` }),
    ),
    ttlSeconds: Type.Optional(
      Type.Unknown({ description: `Integer seconds, 1 to ${joinTokenTtlSecondsMax}; default ${joinTokenTtlSecondsDefault} (400 BAD_TTL)` }),
    ),
    label: Type.Optional(Type.String({ maxLength: 128 })),
  },
  { additionalProperties: false },
);

const hostPort = new RegExp(HOST_PORT_PATTERN);

/** The checked join addresses: 400 MISSING_JOIN_ADDRS when absent or empty, 422 naming a bad entry. */
export function checkJoinAddrs(value: unknown): string[] {
  if (value === undefined || value === null || (Array.isArray(value) && value.length === 0)) {
    throw badRequest("joinAddrs is required: a non-empty array of host:port controller gRPC endpoints", "MISSING_JOIN_ADDRS");
  }
  if (!Array.isArray(value)) throw badRequest("joinAddrs must be a non-empty array of host:port controller gRPC endpoints", "MISSING_JOIN_ADDRS");
  if (value.length > joinAddrsMax) throw validationError(`joinAddrs: at most ${joinAddrsMax} addresses`);
  value.forEach((address, i) => {
    const port = typeof address === "string" && hostPort.test(address) ? Number(address.slice(address.lastIndexOf(":") + 1)) : 0;
    if (port < 1 || port > 65535) throw validationError(`joinAddrs.${i}: expected host:port with a port from 1 to 65535`);
  });
  return value as string[];
}

/** The checked TTL: 400 BAD_TTL unless an integer from 1 to 30 days in seconds. */
export function checkTtlSeconds(value: unknown): number {
  if (value === undefined) return joinTokenTtlSecondsDefault;
  if (typeof value !== "number" || !Number.isInteger(value) || value < 1 || value > joinTokenTtlSecondsMax) {
    throw badRequest(`ttlSeconds must be an integer from 1 to ${joinTokenTtlSecondsMax} (30 days)`, "BAD_TTL");
  }
  return value;
}

const actor = (principal: { username: string } | null) => principal?.username ?? "system";

/** Mounts the cluster routes. */
export function clusterRoutes(cluster: ClusterService, audit: AuditRecorder): (app: Hono<AppEnv>, registry: RouteRegistry) => void {
  return (app, registry) => {
    addRoute(
      app,
      registry,
      { method: "get", path: "/api/v1/cluster", summary: "The cluster record", tag, permission: VIEW, response: ClusterRecordSchema },
      () => cluster.cluster(),
    );

    addRoute(
      app,
      registry,
      { method: "get", path: "/api/v1/cluster/members", summary: "The cluster's members", tag, permission: VIEW, response: MemberListSchema },
      () => cluster.members(),
    );

    addRoute(
      app,
      registry,
      {
        method: "delete",
        path: "/api/v1/cluster/members/:nodeId",
        summary: "Eject a member (meant for a controller that is gone for good); 404 MEMBER_NOT_FOUND for an unknown id",
        tag,
        permission: MANAGE,
        params: NodeIdParams,
        query: EjectQuery,
        response: EjectionSchema,
      },
      async ({ params, query, principal, c }) => {
        const reason = query.reason ?? "";
        const ejected = await cluster.ejectMember(params.nodeId, reason, actor(principal));
        await audited(audit, c, { action: "cluster.member.ejected", resourceType: "cluster-member", resourceId: params.nodeId, details: { reason } });
        return ejected;
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "post",
        path: "/api/v1/cluster/leave",
        summary: "This controller leaves the cluster (a leader hands leadership off first) and then shuts down",
        tag,
        permission: MANAGE,
        body: EmptyBody,
        response: LeaveResponseSchema,
      },
      async ({ principal, c }) => {
        const left = await cluster.leave(actor(principal));
        await audited(audit, c, { action: "cluster.leave", resourceType: "cluster-member", resourceId: left.nodeId, details: { clusterId: left.clusterId } });
        return left;
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "post",
        path: "/api/v1/cluster/join-tokens",
        summary: "Issue a single-use controller join token carrying the members' gRPC join addresses; the value is shown once",
        tag,
        permission: MANAGE,
        body: JoinTokenBody,
        response: CreatedJoinTokenSchema,
        successStatus: 201,
      },
      async ({ body, principal, c }) => {
        const joinAddrs = checkJoinAddrs(body.joinAddrs);
        const ttlSeconds = checkTtlSeconds(body.ttlSeconds);
        const created = await cluster.issueJoinToken({ joinAddrs, ttlSeconds, label: body.label }, actor(principal));
        await audited(audit, c, {
          action: "cluster.join_token.issued",
          resourceType: "cluster-join-token",
          resourceId: created.jti,
          details: { label: body.label ?? "", joinAddrs, expiresAt: created.expiresAt },
        });
        return c.json(created, 201);
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "get",
        path: "/api/v1/cluster/join-tokens",
        summary: "List join tokens (never their values)",
        tag,
        permission: VIEW,
        response: JoinTokenListSchema,
      },
      () => cluster.listJoinTokens(),
    );

    addRoute(
      app,
      registry,
      {
        method: "delete",
        path: "/api/v1/cluster/join-tokens/:jti",
        summary: "Revoke an ACTIVE join token (404 JOIN_TOKEN_NOT_FOUND, 409 JOIN_TOKEN_NOT_ACTIVE)",
        tag,
        permission: MANAGE,
        params: JtiParams,
        successStatus: 204,
      },
      async ({ params, principal, c }) => {
        const revoked = await cluster.revokeJoinToken(params.jti, actor(principal));
        await audited(audit, c, {
          action: "cluster.join_token.revoked",
          resourceType: "cluster-join-token",
          resourceId: params.jti,
          details: { label: revoked.label },
        });
        return c.body(null, 204);
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "post",
        path: "/api/v1/cluster/seed/rotate",
        summary: "Rotate the seed secret: every outstanding join token becomes invalid",
        tag,
        permission: MANAGE,
        body: EmptyBody,
        response: SeedRotationSchema,
      },
      async ({ principal, c }) => {
        const rotation = await cluster.rotateSeed(actor(principal));
        await audited(audit, c, { action: "cluster.seed.rotated", resourceType: "cluster", resourceId: rotation.clusterId });
        return rotation;
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "post",
        path: "/api/v1/cluster/recover",
        summary:
          "After the quorum is lost: this controller continues as the only member, the named members are removed. Every other member must be named and none may answer (409 MEMBERS_REACHABLE)",
        tag,
        permission: MANAGE,
        body: RecoverBody,
        response: RecoveryResultSchema,
      },
      async ({ body, principal, c }) => {
        const reason = body.reason ?? "";
        const result = await cluster.recover(body.eject, reason, actor(principal), recoveryProbeTimeoutMs);
        await audited(audit, c, {
          action: "cluster.recovered",
          resourceType: "cluster",
          resourceId: result.clusterId,
          details: { ejected: result.ejected, reason },
        });
        for (const nodeId of result.ejected) {
          await audited(audit, c, {
            action: "cluster.member.ejected",
            resourceType: "cluster-member",
            resourceId: nodeId,
            details: { reason, recovery: true },
          });
        }
        return result;
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "get",
        path: "/api/v1/cluster/leases",
        summary: "Current holders of the Raft singleton leases",
        tag,
        permission: VIEW,
        response: LeaseListSchema,
      },
      () => cluster.leases(),
    );

    addRoute(
      app,
      registry,
      {
        method: "get",
        path: "/api/v1/cluster/config/versions",
        summary: "Cluster-shared config version history",
        tag,
        permission: VIEW,
        response: ConfigVersionListSchema,
      },
      () => cluster.configVersions(),
    );
  };
}
