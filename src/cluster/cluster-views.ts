/**
 * The cluster records as the REST API shows them (ISO times, the spec's field names), built from
 * the replicated state's records.
 */
import { certificateFingerprintSha256 } from "./ca.js";
import type { JoinToken, Member } from "./cluster-schemas.js";
import type { JoinTokenRecord, LeaseRecord, MemberRecord } from "./cluster-state-machine.js";

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
