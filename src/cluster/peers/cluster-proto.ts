/**
 * The cluster membership wire contract (`proto/cluster.proto`) loaded at runtime with
 * @grpc/proto-loader, the shapes of its messages as proto-loader decodes them, and how expected
 * failures travel: a gRPC status whose details are the JSON error `{code, message, status}`.
 */
import { dirname } from "node:path";
import { fileURLToPath } from "node:url";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import type { CommandPayloads, CommandResult, LogRecordMessage } from "../../wire/daemon-proto.js";
import { ApiError } from "../../shared/errors.js";
import { CONTROLLER_CERTIFICATE_NAME } from "../../wire/certificate-names.js";
import { systemClock } from "../../shared/clock.js";

export const clusterProtoPath = fileURLToPath(new URL("../../../proto/cluster.proto", import.meta.url));

/** Largest message either side accepts (a join answer carries a few certificates). */
export const clusterGrpcMessageBytesMax = 4 * 1024 * 1024;

/** Common name of every controller's gateway certificate (the daemon stream's, `src/wire/certificate-names.ts`). */
export const controllerServerName = CONTROLLER_CERTIFICATE_NAME;

export interface JoinClusterRequest {
  token: string;
  node_id: string;
  label: string;
  raft_addr: string;
  rest_addr: string;
  grpc_addr: string;
  hosts: string[];
}

export interface ClusterPeer {
  node_id: string;
  raft_addr: string;
  grpc_addr: string;
}

export interface JoinClusterResponse {
  cluster_id: string;
  node_id: string;
  certificate_pem: string;
  private_key_pem: string;
  ca_certificate_pem: string;
  ca_private_key_pem: string;
  members: ClusterPeer[];
  leader_id: string;
}

export interface StatusResponse {
  cluster_id: string;
  node_id: string;
  leader_id: string;
  role: string;
  applied: number;
}

/**
 * A daemon command on its way to the controller holding the daemon's stream: the node and one
 * command case, named in `command` as proto-loader decodes a oneof.
 */
export type ForwardNodeCommandRequest = {
  [K in keyof CommandPayloads]: { node_id: string; command?: K; traceparent?: string } & { [P in K]: CommandPayloads[K] };
}[keyof CommandPayloads];

export interface ForwardNodeCommandResponse {
  /** Null only from a peer that answered nothing (never from this build). */
  result: CommandResult | null;
}

/** A read of the daemon log records a member holds for a node (`ReadNodeLogs`). */
export interface ReadNodeLogsRequest {
  node_id: string;
  /** Empty for every level. */
  level: string;
  /** Empty for every logger. */
  logger: string;
  /** 0 for every matching record. */
  limit: number;
  /** 0 for every record. */
  after_seq: number;
}

export interface ReadNodeLogsResponse {
  records: LogRecordMessage[];
  size: number;
  capacity: number;
  last_seq: number;
  dropped_on_daemon: number;
}

export type UnaryCallback<T> = (error: grpc.ServiceError | null, response?: T) => void;

/** The generated-at-runtime client of `ClusterMembership`. */
export interface ClusterMembershipClient extends grpc.Client {
  GetClusterCa(request: object, options: grpc.CallOptions, callback: UnaryCallback<{ ca_certificate_pem: string }>): grpc.ClientUnaryCall;
  Join(request: JoinClusterRequest, options: grpc.CallOptions, callback: UnaryCallback<JoinClusterResponse>): grpc.ClientUnaryCall;
  Propose(request: { command_json: string }, options: grpc.CallOptions, callback: UnaryCallback<{ result_json: string }>): grpc.ClientUnaryCall;
  ChangeMembership(request: { request_json: string }, options: grpc.CallOptions, callback: UnaryCallback<object>): grpc.ClientUnaryCall;
  Status(request: object, options: grpc.CallOptions, callback: UnaryCallback<StatusResponse>): grpc.ClientUnaryCall;
  ForwardNodeCommand(request: ForwardNodeCommandRequest, options: grpc.CallOptions, callback: UnaryCallback<ForwardNodeCommandResponse>): grpc.ClientUnaryCall;
  ReadNodeLogs(request: ReadNodeLogsRequest, options: grpc.CallOptions, callback: UnaryCallback<ReadNodeLogsResponse>): grpc.ClientUnaryCall;
}

type ClusterMembershipConstructor = grpc.ServiceClientConstructor;

let loaded: ClusterMembershipConstructor | null = null;

/** The `ClusterMembership` service (loaded once). */
export function loadClusterMembership(): ClusterMembershipConstructor {
  if (!loaded) {
    const definition = protoLoader.loadSync(clusterProtoPath, {
      keepCase: true,
      longs: Number,
      defaults: true,
      arrays: true,
      oneofs: true,
      includeDirs: [dirname(clusterProtoPath)],
    });
    const pkg = grpc.loadPackageDefinition(definition) as unknown as { cloud: { cluster: { v1: { ClusterMembership: ClusterMembershipConstructor } } } };
    loaded = pkg.cloud.cluster.v1.ClusterMembership;
  }
  return loaded;
}

const grpcCodeByStatus: Record<number, grpc.status> = {
  400: grpc.status.INVALID_ARGUMENT,
  401: grpc.status.UNAUTHENTICATED,
  403: grpc.status.PERMISSION_DENIED,
  404: grpc.status.NOT_FOUND,
  409: grpc.status.FAILED_PRECONDITION,
  422: grpc.status.INVALID_ARGUMENT,
  503: grpc.status.UNAVAILABLE,
};

/** The gRPC status for an expected failure; its details carry the error as JSON. */
export function toGrpcError(error: ApiError): Partial<grpc.StatusObject> {
  return {
    code: grpcCodeByStatus[error.status] ?? grpc.status.INTERNAL,
    details: JSON.stringify({ code: error.code, message: error.message, status: error.status }),
  };
}

/** The expected failure a gRPC error carries, or null when it carries none (a transport failure). */
export function fromGrpcError(error: grpc.ServiceError): ApiError | null {
  try {
    const parsed = JSON.parse(error.details) as { code?: unknown; message?: unknown; status?: unknown };
    if (typeof parsed.code === "string" && typeof parsed.message === "string" && typeof parsed.status === "number") {
      return new ApiError(parsed.status, parsed.code, parsed.message);
    }
  } catch {
    // Details that are not our JSON envelope come from gRPC itself: a transport failure, null.
  }
  return null;
}

/** Calls a unary method and resolves with its answer. */
export function callUnary<Req, Res>(
  invoke: (request: Req, options: grpc.CallOptions, callback: UnaryCallback<Res>) => grpc.ClientUnaryCall,
  request: Req,
  timeoutMs: number,
): Promise<Res> {
  return new Promise((resolve, reject) => {
    invoke(request, { deadline: systemClock.nowMs() + timeoutMs }, (error, response) => (error ? reject(error) : resolve(response as Res)));
  });
}
