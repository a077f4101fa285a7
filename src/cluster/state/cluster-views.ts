/**
 * The cluster records as the REST API shows them (ISO times, the spec's field names), built from
 * the replicated state's records: one record at a time, and the lists the read routes answer with.
 */
import { certificateFingerprintSha256 } from "../identity/ca.js";
import type { ClusterRecord, ConfigVersionList, JoinToken, LeaseList, Member } from "./cluster-schemas.js";
import type { ClusterMeta, ClusterStateMachine, JoinTokenRecord, LeaseRecord, MemberRecord } from "./cluster-state-machine.js";

/** The CA fingerprint a join token carries: SHA-256 of the certificate, lower-case hex. */
export function caFingerprint(caCertPem: string): string {
  return certificateFingerprintSha256(caCertPem).replaceAll(":", "").toLowerCase();
}

export function iso(ms: number): string {
  return new Date(ms).toISOString();
}

export function memberView(m: MemberRecord, leader: string | null): Member {
  return {
    nodeId: m.nodeId,
    raftAddr: m.raftAddr,
    restAddr: m.restAddr,
    gRPCAddr: m.grpcAddr,
    label: m.label,
    joinedAt: m.joinedAtMs > 0 ? iso(m.joinedAtMs) : null,
    role: m.role,
    leader: m.nodeId === leader,
  };
}

export function joinTokenView(t: JoinTokenRecord, nowMs: number): JoinToken {
  const status = t.status === "ACTIVE" && t.expiresAtMs <= nowMs ? "EXPIRED" : t.status;
  return { jti: t.jti, label: t.label, status, createdAt: iso(t.createdAtMs), expiresAt: iso(t.expiresAtMs) };
}

export function leaseView(l: LeaseRecord) {
  return { name: l.name, holder: l.holder, fencingToken: l.fencingToken, grantedAt: iso(l.grantedAtMs), expiresAt: iso(l.expiresAtMs) };
}

/** What the read views need of the applied cluster state. */
export type ClusterStateReader = Pick<ClusterStateMachine, "members" | "tokens" | "leases" | "configVersions" | "activeConfigVersion">;

/** `GET /api/v1/cluster`: the cluster as this controller applied it, with the leader it knows. Pure. */
export function clusterRecordView(
  meta: Pick<ClusterMeta, "clusterId" | "createdAtMs">,
  state: ClusterStateReader,
  nodeId: string,
  leaderId: string | null,
): ClusterRecord {
  return {
    clusterId: meta.clusterId,
    memberCount: state.members().length,
    activeConfigVersion: state.activeConfigVersion(),
    createdAt: iso(meta.createdAtMs),
    nodeId,
    leaderId,
  };
}

/** `GET /api/v1/cluster/members`: every member record, the leader marked. Pure. */
export function memberListView(state: ClusterStateReader, leaderId: string | null): { members: Member[] } {
  return { members: state.members().map((m) => memberView(m, leaderId)) };
}

/** The join tokens, an ACTIVE one past its expiry at `nowMs` shown EXPIRED. Pure. */
export function joinTokenListView(state: ClusterStateReader, nowMs: number): { tokens: JoinToken[] } {
  return { tokens: state.tokens().map((t) => joinTokenView(t, nowMs)) };
}

/** Current singleton holders: leases not yet expired at `nowMs` (this controller's clock). Pure. */
export function leaseListView(state: ClusterStateReader, nowMs: number): LeaseList {
  return {
    leases: state
      .leases()
      .filter((l) => l.expiresAtMs > nowMs)
      .map(leaseView),
  };
}

/** Every stored config version, the active one marked. Pure. */
export function configVersionListView(state: ClusterStateReader): ConfigVersionList {
  const active = state.activeConfigVersion();
  return {
    activeVersion: active,
    versions: state.configVersions().map((v) => ({
      version: v.version,
      createdAt: iso(v.createdAtMs),
      createdBy: v.createdBy,
      comment: v.comment,
      active: v.version === active,
      parentVersion: v.parentVersion ?? null,
      config: v.config,
    })),
  };
}
