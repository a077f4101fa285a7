/**
 * Controller-to-controller calls on the members' gRPC ports: this controller presents its member
 * certificate and accepts only a server certificate of the cluster CA naming `cloud-controller`.
 * {@link GrpcLeaderLink} hands writes to the leader; {@link MemberClients.status} tells a live
 * member from a dead one; {@link MemberClients.forwardNodeCommand} hands a daemon command to the
 * member holding the daemon's stream (`node-commands.ts`); {@link MemberClients.readNodeLogs} reads
 * the daemon log records that member holds (`node-logs.ts`).
 */
import * as grpc from "@grpc/grpc-js";
import { HostErrorCode, RaftHostError } from "../raft-host/host-errors.js";
import type { AppliedCommand, UnstampedCommand } from "../state/cluster-commands.js";
import type { NodeTls } from "../identity/cluster-identity.js";
import {
  callUnary,
  clusterGrpcMessageBytesMax,
  controllerServerName,
  fromGrpcError,
  loadClusterMembership,
  type ClusterMembershipClient,
  type ForwardNodeCommandRequest,
  type ForwardNodeCommandResponse,
  type JoinClusterRequest,
  type JoinClusterResponse,
  type ReadNodeLogsRequest,
  type ReadNodeLogsResponse,
  type StatusResponse,
} from "./cluster-proto.js";
import type { LeaderLink, MembershipRequest } from "./membership-types.js";
import { systemClock } from "../../shared/clock.js";

/** Metadata key marking a join relayed by a member to the leader (relayed at most once). */
export const relayedJoinMetadataKey = "x-cloud-relayed-join";

/** One client per member address, with this controller's member certificate. */
export class MemberClients {
  private readonly clients = new Map<string, ClusterMembershipClient>();
  private closed = false;

  constructor(private readonly tls: NodeTls) {}

  client(address: string): ClusterMembershipClient {
    if (this.closed) throw new RaftHostError(HostErrorCode.Stopped, "member clients are closed");
    let client = this.clients.get(address);
    if (!client) {
      const Client = loadClusterMembership();
      const credentials = grpc.credentials.createSsl(Buffer.from(this.tls.caPem), Buffer.from(this.tls.keyPem), Buffer.from(this.tls.certPem), {
        checkServerIdentity: (_host, certificate) =>
          certificate.subject?.CN === controllerServerName ? undefined : new Error(`${address} presented ${String(certificate.subject?.CN)}, not a controller`),
      });
      const created = new Client(address, credentials, {
        "grpc.ssl_target_name_override": controllerServerName,
        "grpc.max_receive_message_length": clusterGrpcMessageBytesMax,
        "grpc.max_send_message_length": clusterGrpcMessageBytesMax,
        "grpc.initial_reconnect_backoff_ms": 100,
        "grpc.max_reconnect_backoff_ms": 1_000,
      }) as unknown as ClusterMembershipClient;
      this.clients.set(address, created);
      client = created;
    }
    return client;
  }

  /** The member's own account of itself; rejects when it cannot be reached within `timeoutMs`. */
  status(address: string, timeoutMs: number): Promise<StatusResponse> {
    const client = this.client(address);
    return callUnary(client.Status.bind(client), {}, timeoutMs);
  }

  /** Relays a join to the leader at `address`. */
  relayJoin(address: string, request: JoinClusterRequest, timeoutMs: number): Promise<JoinClusterResponse> {
    const client = this.client(address);
    const metadata = new grpc.Metadata();
    metadata.set(relayedJoinMetadataKey, "1");
    const join = client.Join as unknown as (
      request: JoinClusterRequest,
      metadata: grpc.Metadata,
      options: grpc.CallOptions,
      callback: (error: grpc.ServiceError | null, response?: JoinClusterResponse) => void,
    ) => grpc.ClientUnaryCall;
    return new Promise((resolve, reject) => {
      join.call(client, request, metadata, { deadline: systemClock.nowMs() + timeoutMs }, (error, response) => (error ? reject(error) : resolve(response!)));
    });
  }

  /** Forwards a daemon command to the member at `address`; aborting `signal` cancels the call. */
  forwardNodeCommand(
    address: string,
    request: ForwardNodeCommandRequest,
    options: { timeoutMs: number; signal: AbortSignal },
  ): Promise<ForwardNodeCommandResponse> {
    const client = this.client(address);
    return new Promise((resolve, reject) => {
      const cancel = () => call.cancel();
      const call = client.ForwardNodeCommand(request, { deadline: systemClock.nowMs() + options.timeoutMs }, (error, response) => {
        options.signal.removeEventListener("abort", cancel);
        if (error) reject(error);
        else resolve(response!);
      });
      options.signal.addEventListener("abort", cancel, { once: true });
    });
  }

  /** Reads the daemon log records the member at `address` holds for a node. */
  readNodeLogs(address: string, request: ReadNodeLogsRequest, timeoutMs: number): Promise<ReadNodeLogsResponse> {
    const client = this.client(address);
    return callUnary(client.ReadNodeLogs.bind(client), request, timeoutMs);
  }

  /** Another set of clients with the same member certificate and channels of their own, closed on their own. */
  withOwnChannels(): MemberClients {
    return new MemberClients(this.tls);
  }

  close(): void {
    this.closed = true;
    for (const client of this.clients.values()) client.close();
    this.clients.clear();
  }
}

/**
 * Hands writes to the leader over its gRPC port. A leader that moved, or a leader that cannot be
 * reached before the call was sent, is reported as NOT_LEADER so the caller looks again; an
 * expected failure the leader answered is rethrown as the same {@link ApiError}.
 */
export class GrpcLeaderLink implements LeaderLink {
  constructor(
    private readonly clients: MemberClients,
    /** The gRPC address of a member, or null when not known. */
    private readonly grpcAddressOf: (nodeId: string) => string | null,
    private readonly callTimeoutMs: number,
  ) {}

  async propose(leaderId: string, command: UnstampedCommand): Promise<AppliedCommand> {
    const client = this.clientFor(leaderId);
    const reply = await this.call(leaderId, () => callUnary(client.Propose.bind(client), { command_json: JSON.stringify(command) }, this.callTimeoutMs));
    return JSON.parse(reply.result_json) as AppliedCommand;
  }

  async changeMembership(leaderId: string, request: MembershipRequest): Promise<void> {
    const client = this.clientFor(leaderId);
    await this.call(leaderId, () => callUnary(client.ChangeMembership.bind(client), { request_json: JSON.stringify(request) }, this.callTimeoutMs));
  }

  private clientFor(leaderId: string): ClusterMembershipClient {
    const address = this.grpcAddressOf(leaderId);
    if (!address) throw new RaftHostError(HostErrorCode.NotLeader, `the gRPC address of the leader ${leaderId} is not known yet`, leaderId);
    return this.clients.client(address);
  }

  private async call<T>(leaderId: string, invoke: () => Promise<T>): Promise<T> {
    try {
      return await invoke();
    } catch (err) {
      const error = err as grpc.ServiceError;
      const expected = fromGrpcError(error);
      if (expected?.code === "NOT_LEADER") throw new RaftHostError(HostErrorCode.NotLeader, expected.message, null);
      if (expected) throw expected;
      if (error.code === grpc.status.UNAVAILABLE)
        throw new RaftHostError(HostErrorCode.NotLeader, `the leader ${leaderId} cannot be reached: ${error.details}`, leaderId);
      throw new RaftHostError(HostErrorCode.Timeout, `the leader ${leaderId} did not answer: ${error.details ?? String(err)}`, leaderId);
    }
  }
}
