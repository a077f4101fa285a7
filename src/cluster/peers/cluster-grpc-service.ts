/**
 * The `ClusterMembership` gRPC service every controller serves on its gRPC port (beside the daemon
 * gateway): the cluster CA for joining controllers, joins authenticated by the join token alone,
 * and — for callers presenting a member certificate — writes relayed to the leader, status, and
 * daemon commands and daemon log reads for the streams this controller holds.
 */
import * as grpc from "@grpc/grpc-js";
import { Type } from "@sinclair/typebox";
import { Value } from "@sinclair/typebox/value";
import type { AuditRecorder } from "../../audit/types.js";
import type { Logger } from "../../logs/types.js";
import type { Clock } from "../../shared/clock.js";
import { ApiError } from "../../shared/errors.js";
import { SpanKind, SpanStatusCode, type Tracing } from "../../shared/tracing.js";
import { ClusterCommandSchema, HOST_PORT_PATTERN, MEMBER_ID_PATTERN, MembershipContextSchema, type UnstampedCommand } from "../state/cluster-commands.js";
import { raftUnavailable } from "../state/cluster-errors.js";
import {
  fromGrpcError,
  loadClusterMembership,
  toGrpcError,
  type ForwardNodeCommandRequest,
  type ForwardNodeCommandResponse,
  type JoinClusterRequest,
  type JoinClusterResponse,
  type ReadNodeLogsRequest,
  type ReadNodeLogsResponse,
  type StatusResponse,
} from "./cluster-proto.js";
import { RaftHostError } from "../raft-host/host-errors.js";
import { hashJoinToken, joinTokenCharsMax, verifyJoinToken, readJoinTokenClaims } from "../identity/join-token.js";
import { relayedJoinMetadataKey } from "./member-clients.js";
import type { ClusterMembershipPort, MembershipRequest } from "./membership-types.js";
import { readForwardNodeCommand } from "./node-commands.js";
import { nodeLogsResponse, readReadNodeLogs } from "./node-logs.js";

export interface ClusterGrpcServiceOptions {
  /** The cluster service, seen through the port it serves the adapter. */
  readonly cluster: ClusterMembershipPort;
  readonly audit: AuditRecorder;
  readonly clock: Clock;
  readonly logger: Logger;
  /** This controller's tracer: a forwarded command runs in a span of its own (none without). */
  readonly tracing?: Tracing;
}

const memberId = new RegExp(MEMBER_ID_PATTERN);
const hostPort = new RegExp(HOST_PORT_PATTERN);
const hostName = /^[A-Za-z0-9.:-]{1,253}$/;
/** Extra certificate names a joining controller may ask for. */
const joinHostsMax = 16;

const MembershipRequestSchema = Type.Object(
  {
    changes: Type.Array(
      Type.Object(
        {
          type: Type.Union([Type.Literal("add-voter"), Type.Literal("add-learner"), Type.Literal("remove-node")]),
          nodeId: Type.String({ pattern: MEMBER_ID_PATTERN }),
        },
        { additionalProperties: false },
      ),
      { minItems: 1, maxItems: 8 },
    ),
    context: Type.Unknown(),
  },
  { additionalProperties: false },
);

const invalid = (message: string) => new ApiError(400, "INVALID_ARGUMENT", message);
const unauthenticated = (code: string, message: string) => new ApiError(401, code, message);

/** A gRPC service and its handlers, in the shape a gRPC server adds (the gateway's serves this one). */
export interface ClusterGrpcBinding {
  definition: grpc.ServiceDefinition;
  implementation: grpc.UntypedServiceImplementation;
}

/**
 * The service definition and its handlers, for the gateway's server. The composition root builds
 * it over the cluster service; the service itself does not know this adapter.
 */
export function clusterMembershipService(options: ClusterGrpcServiceOptions): ClusterGrpcBinding {
  const { cluster, logger } = options;

  const unary =
    <Req, Res>(handler: (call: grpc.ServerUnaryCall<Req, Res>) => Promise<Res>) =>
    (call: grpc.ServerUnaryCall<Req, Res>, callback: grpc.sendUnaryData<Res>): void => {
      handler(call).then(
        (response) => callback(null, response),
        (err: unknown) => {
          if (err instanceof ApiError) return callback(toGrpcError(err));
          if (err instanceof RaftHostError) return callback(toGrpcError(raftUnavailable(err.message)));
          logger.error("A cluster membership call failed", err);
          callback({ code: grpc.status.INTERNAL, details: "internal error" });
        },
      );
    };

  /** The calling member's id (its certificate's common name); refuses callers that are not members. */
  const requireMember = (call: grpc.ServerUnaryCall<unknown, unknown>): string => {
    const name = call.getAuthContext()?.sslPeerCertificate?.subject?.CN;
    const id = typeof name === "string" ? name : null;
    if (!id || !cluster.isMemberId(id)) throw new ApiError(403, "NOT_A_MEMBER", "A client certificate of a cluster member is required");
    return id;
  };

  const requireReady = () => {
    if (!cluster.isReady()) throw new ApiError(503, "CLUSTER_NOT_READY", "The cluster meta is not stamped on this controller yet");
  };

  return {
    definition: loadClusterMembership().service,
    implementation: {
      GetClusterCa: unary<object, { ca_certificate_pem: string }>(async () => {
        requireReady();
        return { ca_certificate_pem: cluster.material()!.caCertPem };
      }),

      Join: unary<JoinClusterRequest, JoinClusterResponse>(async (call) => {
        requireReady();
        const relayed = call.metadata.get(relayedJoinMetadataKey).length > 0;
        return join(options, call.request, relayed, call.getPeer());
      }),

      Propose: unary<{ command_json: string }, { result_json: string }>(async (call) => {
        requireMember(call);
        const command = parseJson(call.request.command_json, "command_json") as UnstampedCommand;
        if (!Value.Check(ClusterCommandSchema, { ...command, atMs: 0 })) throw invalid("command_json is not a cluster command");
        const result = await cluster.commitOnLeader(command);
        return { result_json: JSON.stringify(result) };
      }),

      ChangeMembership: unary<{ request_json: string }, object>(async (call) => {
        requireMember(call);
        const request = parseJson(call.request.request_json, "request_json") as MembershipRequest;
        if (!Value.Check(MembershipRequestSchema, request) || !Value.Check(MembershipContextSchema, { ...(request.context as object), atMs: 0 })) {
          throw invalid("request_json is not a membership change");
        }
        await cluster.changeMembershipOnLeader(request);
        return {};
      }),

      Status: unary<object, StatusResponse>(async (call) => {
        requireMember(call);
        const status = cluster.raftStatus();
        return { cluster_id: cluster.clusterId, node_id: cluster.nodeId, leader_id: cluster.leaderId() ?? "", role: status.role, applied: status.applied };
      }),

      ForwardNodeCommand: unary<ForwardNodeCommandRequest, ForwardNodeCommandResponse>(async (call) => {
        const caller = requireMember(call);
        const { nodeId, command } = readForwardNodeCommand(call.request);
        const tracing = options.tracing;
        if (!tracing?.enabled) return { result: await cluster.runForwardedCommand(nodeId, command) };
        // The server side of the hop: a child of the forwarding controller's command span, and the
        // parent of the daemon's (docs/decisions/tracing.md).
        return tracing.inSpan(
          `forwarded ${command.type}`,
          {
            kind: SpanKind.SERVER,
            traceparent: command.traceparent,
            attributes: { "cloud.node.id": nodeId, "cloud.command": command.type, "cloud.forwarded_by": caller },
          },
          async (span) => {
            const result = await cluster.runForwardedCommand(nodeId, { ...command, traceparent: tracing.traceparent() || command.traceparent });
            if (!result.ok) {
              span.setAttribute("cloud.error_code", result.error_code);
              span.setStatus({ code: SpanStatusCode.ERROR, message: result.error_code });
            }
            return { result };
          },
        );
      }),

      ReadNodeLogs: unary<ReadNodeLogsRequest, ReadNodeLogsResponse>(async (call) => {
        requireMember(call);
        const { nodeId, query } = readReadNodeLogs(call.request);
        return nodeLogsResponse(cluster.readForwardedNodeLogs(nodeId, query));
      }),
    },
  };
}

function parseJson(text: string, field: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw invalid(`${field} is not JSON`);
  }
}

function checkJoinRequest(request: JoinClusterRequest): void {
  if (request.token === "") throw unauthenticated("MISSING_TOKEN", "A cluster join token is required");
  if (request.token.length > joinTokenCharsMax) throw unauthenticated("JOIN_TOKEN_INVALID", "Invalid cluster join token");
  if (!memberId.test(request.node_id)) throw invalid(`node_id must match ${MEMBER_ID_PATTERN}`);
  if (request.label.length > 128) throw invalid("label: at most 128 characters");
  for (const [field, value] of [
    ["raft_addr", request.raft_addr],
    ["rest_addr", request.rest_addr],
    ["grpc_addr", request.grpc_addr],
  ] as const) {
    if (value !== "" && !hostPort.test(value)) throw invalid(`${field}: expected host:port`);
  }
  if (request.hosts.length > joinHostsMax || request.hosts.some((h) => !hostName.test(h)))
    throw invalid(`hosts: at most ${joinHostsMax} host names or addresses`);
}

/** Refuses a token this controller can already tell is unusable; returns its id. */
function checkToken(cluster: ClusterMembershipPort, token: string, nowMs: number): string {
  const claims = readJoinTokenClaims(token);
  const record = claims ? cluster.joinTokenRecord(claims.jti) : undefined;
  const seed = cluster.seed()!;
  if (!claims || claims.cid !== cluster.clusterId || !record || record.hash !== hashJoinToken(token)) {
    throw unauthenticated("JOIN_TOKEN_INVALID", "Invalid cluster join token");
  }
  if (record.status === "INVALIDATED" || claims.sg !== seed.generation) {
    throw unauthenticated("JOIN_TOKEN_INVALIDATED", "Cluster join token was invalidated by a seed rotation");
  }
  if (!verifyJoinToken(token, seed.secret)) throw unauthenticated("JOIN_TOKEN_INVALID", "Invalid cluster join token");
  if (record.status === "REVOKED") throw unauthenticated("JOIN_TOKEN_REVOKED", "Cluster join token has been revoked");
  if (record.expiresAtMs <= nowMs) throw unauthenticated("JOIN_TOKEN_EXPIRED", "Cluster join token has expired");
  return claims.jti;
}

async function join(options: ClusterGrpcServiceOptions, request: JoinClusterRequest, relayed: boolean, peer: string): Promise<JoinClusterResponse> {
  const { cluster, logger } = options;
  checkJoinRequest(request);
  const jti = checkToken(cluster, request.token, options.clock.nowMs());

  if (!cluster.isLeader()) {
    const leaderId = cluster.leaderId();
    if (relayed) throw new ApiError(409, "NOT_LEADER", `This controller does not lead; the leader is ${leaderId ?? "not known"}`);
    const address = leaderId ? cluster.grpcAddressOf(leaderId) : null;
    if (!leaderId || !address) throw raftUnavailable("no leader to take the join is known");
    try {
      return await cluster.relayJoin(address, request);
    } catch (err) {
      const expected = fromGrpcError(err as grpc.ServiceError);
      if (expected) throw expected;
      throw raftUnavailable(`the leader ${leaderId} cannot be reached: ${(err as grpc.ServiceError).details ?? String(err)}`);
    }
  }

  const consumed = await cluster.commitOnLeader({ op: "token.consume", jti, hash: hashJoinToken(request.token), nodeId: request.node_id });
  if (!consumed.ok) throw unauthenticated(consumed.code, consumed.message);
  const configuration = cluster.configuration();
  const alreadyMember = configuration.voters.includes(request.node_id) || configuration.learners.includes(request.node_id);
  if (!alreadyMember) {
    await cluster.changeMembershipOnLeader({
      changes: [{ type: "add-learner", nodeId: request.node_id }],
      context: {
        kind: "join",
        member: { nodeId: request.node_id, label: request.label, raftAddr: request.raft_addr, restAddr: request.rest_addr, grpcAddr: request.grpc_addr },
      },
    });
    const token = cluster.joinTokenRecord(jti);
    logger.info(`Controller ${request.node_id} joined the cluster as a learner (join token ${jti}${token?.label ? `, ${token.label}` : ""})`);
    await options.audit.record(
      {
        action: "cluster.member.joined",
        resourceType: "cluster-member",
        resourceId: request.node_id,
        details: { jti, tokenLabel: token?.label ?? "", label: request.label, raftAddr: request.raft_addr, grpcAddr: request.grpc_addr },
      },
      { username: "system", ipAddress: peerHost(peer) },
    );
  }
  const issued = cluster.issueMemberCertificate(request.node_id, request.hosts);
  const material = cluster.material()!;
  return {
    cluster_id: cluster.clusterId,
    node_id: request.node_id,
    certificate_pem: issued.certPem,
    private_key_pem: issued.keyPem,
    ca_certificate_pem: material.caCertPem,
    ca_private_key_pem: material.caKeyPem,
    members: cluster.memberRecords().map((m) => ({ node_id: m.nodeId, raft_addr: m.raftAddr, grpc_addr: m.grpcAddr })),
    leader_id: cluster.nodeId,
  };
}

/** The host part of a gRPC peer string (`ipv4:1.2.3.4:5`, `ipv6:[::1]:5`). */
function peerHost(peer: string): string {
  const withoutScheme = peer.replace(/^ipv[46]:/, "");
  const colon = withoutScheme.lastIndexOf(":");
  return (colon > 0 ? withoutScheme.slice(0, colon) : withoutScheme).replace(/^\[|\]$/g, "") || "unknown";
}
