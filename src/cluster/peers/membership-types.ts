/**
 * Types shared by the cluster service, its parts and the adapters around it: the addresses a
 * controller advertises, the membership change a controller asks the leader for, how a controller
 * that does not lead reaches the leader, and the port the `ClusterMembership` gRPC adapter serves
 * through. Kept apart so that the service, its parts, the member clients and the adapter import
 * these instead of each other.
 */
import type { ConfChangeSingle } from "../../../raft/types.js";
import type { LogQuery } from "../../logs/log-query.js";
import type { NodeLogRead } from "../../logs/node-log-buffers.js";
import type { CommandResult, InstanceCommand } from "../../wire/daemon-proto.js";
import type { CertificateAndKey } from "../identity/ca.js";
import type { AppliedCommand, MembershipContext, UnstampedCommand } from "../state/cluster-commands.js";
import type { JoinClusterRequest, JoinClusterResponse } from "./cluster-proto.js";
import type { ClusterMaterial, JoinTokenRecord, MemberRecord, SeedState } from "../state/cluster-state-machine.js";

/** Addresses this controller advertises in its member record. */
export interface AdvertisedAddresses {
  raftAddr: string;
  restAddr: string;
  grpcAddr: string;
}

/** Membership change a controller asks the leader for. */
export interface MembershipRequest {
  readonly changes: readonly ConfChangeSingle[];
  readonly context: DistributiveOmit<MembershipContext, "atMs">;
}

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

/**
 * How a controller that does not lead reaches the leader (controller-to-controller gRPC). Absent
 * on a controller that cannot forward; its writes then need it to lead.
 */
export interface LeaderLink {
  propose(leaderId: string, command: UnstampedCommand): Promise<AppliedCommand>;
  changeMembership(leaderId: string, request: MembershipRequest): Promise<void>;
}

/**
 * What the `ClusterMembership` gRPC adapter (`cluster-grpc-service.ts`) needs of this controller's
 * cluster service: its applied state, writes on the leader, the join relay and the daemon commands
 * other members forward. The cluster service implements it and knows nothing of the adapter.
 */
export interface ClusterMembershipPort {
  readonly clusterId: string;
  readonly nodeId: string;
  /** True once the cluster meta is stamped in this controller's applied state. */
  isReady(): boolean;
  /** The cluster CA as this controller applied it (null before the stamp). */
  material(): ClusterMaterial | null;
  /** The Raft leader as this controller knows it. */
  leaderId(): string | null;
  isLeader(): boolean;
  /** This controller's Raft role and applied index. */
  raftStatus(): { role: string; applied: number };
  /** The applied Raft configuration (voters and learners). */
  configuration(): { voters: readonly string[]; learners: readonly string[] };
  /** True when `nodeId` is a voter, a learner or has a member record. */
  isMemberId(nodeId: string): boolean;
  /** The member records as applied here. */
  memberRecords(): readonly MemberRecord[];
  /** Where a member's controller gRPC port is, or null when not known. */
  grpcAddressOf(nodeId: string): string | null;
  joinTokenRecord(jti: string): JoinTokenRecord | undefined;
  seed(): SeedState | null;
  /** Applies `command` on this controller, which must lead; 409 NOT_LEADER otherwise. */
  commitOnLeader(command: UnstampedCommand): Promise<AppliedCommand>;
  /** Commits a membership change on this controller, which must lead; 409 NOT_LEADER otherwise. */
  changeMembershipOnLeader(request: MembershipRequest): Promise<void>;
  /** Issues a certificate for a member with the cluster CA. */
  issueMemberCertificate(nodeId: string, hosts: readonly string[]): CertificateAndKey;
  /** Hands a join this controller cannot take to the leader at `address` (bounded by the service). */
  relayJoin(address: string, request: JoinClusterRequest): Promise<JoinClusterResponse>;
  /** Runs a daemon command another member forwarded for a daemon whose stream this controller holds. */
  runForwardedCommand(nodeId: string, command: InstanceCommand): Promise<CommandResult>;
  /** Reads the daemon log records this controller holds for `nodeId`, for another member. */
  readForwardedNodeLogs(nodeId: string, query: LogQuery): NodeLogRead;
}
