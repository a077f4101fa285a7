/**
 * The replicated cluster metadata (spec document 2, "Cluster records"): the cluster meta (id and
 * creation time, stamped once), the cluster material (the cluster CA), the seed secret that signs
 * join tokens, the member records, the join tokens (only a hash of each value), the singleton
 * leases and the cluster-shared config versions.
 *
 * Applying is deterministic: every decision uses the command's fields and the entry's index only
 * (time is the leader's `atMs`, a lease's fencing token is the log index of its grant), so every
 * member reaches the same state. A refused command changes nothing and returns a refusal value.
 * Member records follow the Raft configuration: {@link ClusterStateMachine.applyMembership} runs
 * for every applied membership change, so the records always name exactly the voters and learners.
 */
import type { ConfChange, ConfState, Entry } from "../../../raft/types.js";
import type { StateMachine } from "../raft-host/raft-host-ports.js";
import {
  CommandRefusal,
  configBytesMax,
  configVersionsMax,
  decodeCommand,
  decodeMembershipContext,
  joinTokenRetentionAfterExpiryMs,
  joinTokensMax,
  leasesMax,
  removedMembersMax,
  type AppliedCommand,
  type ClusterCommand,
  type CommandResult,
} from "./cluster-commands.js";

export interface ClusterMeta {
  readonly clusterId: string;
  readonly createdAtMs: number;
}

/** What a controller needs to act for the cluster: the cluster CA (certificate and key, PEM). */
export interface ClusterMaterial {
  readonly caCertPem: string;
  readonly caKeyPem: string;
}

export interface SeedState {
  /** base64url; signs join tokens. */
  readonly secret: string;
  /** 1 for the first seed, +1 per rotation; a token names the generation it was signed with. */
  readonly generation: number;
  readonly rotatedAtMs: number;
  readonly rotatedBy: string;
}

export type MemberRole = "voter" | "learner";

export interface MemberRecord {
  readonly nodeId: string;
  readonly raftAddr: string;
  readonly restAddr: string;
  readonly grpcAddr: string;
  readonly label: string;
  readonly joinedAtMs: number;
  readonly role: MemberRole;
}

/** ACTIVE until used, revoked or invalidated by a seed rotation; expiry is judged at use. */
export type JoinTokenStatus = "ACTIVE" | "USED" | "REVOKED" | "INVALIDATED";

export interface JoinTokenRecord {
  readonly jti: string;
  readonly label: string;
  /** sha256 (hex) of the token value; the value itself is never stored. */
  readonly hash: string;
  readonly seedGeneration: number;
  readonly joinAddrs: readonly string[];
  readonly createdAtMs: number;
  readonly expiresAtMs: number;
  readonly createdBy: string;
  readonly status: JoinTokenStatus;
  readonly usedAtMs: number | null;
  readonly usedBy: string | null;
  readonly revokedAtMs: number | null;
}

export interface LeaseRecord {
  readonly name: string;
  readonly holder: string;
  /** The Raft log index of the grant. */
  readonly fencingToken: number;
  readonly grantedAtMs: number;
  readonly expiresAtMs: number;
}

export interface ConfigVersionRecord {
  readonly version: number;
  readonly config: Record<string, unknown>;
  readonly comment: string;
  readonly createdAtMs: number;
  readonly createdBy: string;
  /** The version active when this one was proposed; absent in versions from before it was recorded. */
  readonly parentVersion?: number | null;
}

export interface RemovedMemberRecord {
  readonly nodeId: string;
  readonly kind: "eject" | "leave" | "recover";
  readonly reason: string;
  readonly by: string;
  readonly removedAtMs: number;
}

/** Everything the cluster state holds; the snapshot is this object as JSON. */
export interface ClusterStateData {
  meta: ClusterMeta | null;
  material: ClusterMaterial | null;
  seed: SeedState | null;
  members: MemberRecord[];
  tokens: JoinTokenRecord[];
  leases: LeaseRecord[];
  configVersions: ConfigVersionRecord[];
  activeConfigVersion: number | null;
  removed: RemovedMemberRecord[];
}

const snapshotFormatVersion = 1;

function emptyState(): ClusterStateData {
  return { meta: null, material: null, seed: null, members: [], tokens: [], leases: [], configVersions: [], activeConfigVersion: null, removed: [] };
}

const ok = <T>(value: T): CommandResult<T> => ({ ok: true, value });
const refuse = (code: CommandRefusal, message: string): CommandResult<never> => ({ ok: false, code, message });

const textEncoder = new TextEncoder();
const textDecoder = new TextDecoder();

/** The cluster state machine; see the module comment. */
export class ClusterStateMachine implements StateMachine {
  private state: ClusterStateData = emptyState();
  private readonly listeners = new Set<() => void>();

  /** Called after every apply, membership change and restore; returns an unsubscribe function. */
  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  meta(): ClusterMeta | null {
    return this.state.meta;
  }

  material(): ClusterMaterial | null {
    return this.state.material;
  }

  seed(): SeedState | null {
    return this.state.seed;
  }

  members(): readonly MemberRecord[] {
    return this.state.members;
  }

  member(nodeId: string): MemberRecord | undefined {
    return this.state.members.find((m) => m.nodeId === nodeId);
  }

  tokens(): readonly JoinTokenRecord[] {
    return this.state.tokens;
  }

  leases(): readonly LeaseRecord[] {
    return this.state.leases;
  }

  lease(name: string): LeaseRecord | undefined {
    return this.state.leases.find((l) => l.name === name);
  }

  configVersions(): readonly ConfigVersionRecord[] {
    return this.state.configVersions;
  }

  activeConfigVersion(): number | null {
    return this.state.activeConfigVersion;
  }

  removedMembers(): readonly RemovedMemberRecord[] {
    return this.state.removed;
  }

  apply(entry: Entry): AppliedCommand {
    const command = decodeCommand(entry.data);
    const result = command ? this.applyCommand(command, entry.index) : refuse(CommandRefusal.InvalidCommand, "not a valid cluster command");
    this.notify();
    return { ...result, index: entry.index };
  }

  /**
   * Applies a committed membership change: records of added members are created (with the
   * addresses a join carries), removed ones are remembered with their reason, and every record's
   * role is set from the new configuration.
   */
  applyMembership(change: ConfChange, confState: ConfState): void {
    const context = decodeMembershipContext(change.context);
    const members = new Map(this.state.members.map((m) => [m.nodeId, m]));
    for (const single of change.changes) {
      if (single.type === "remove-node") {
        if (!members.has(single.nodeId)) continue;
        members.delete(single.nodeId);
        const removal =
          context && context.kind !== "join" && context.kind !== "promote"
            ? { kind: context.kind, reason: context.reason, by: context.by, removedAtMs: context.atMs }
            : { kind: "eject" as const, reason: "", by: "system", removedAtMs: 0 };
        this.state.removed = [...this.state.removed, { nodeId: single.nodeId, ...removal }].slice(-removedMembersMax);
        continue;
      }
      const existing = members.get(single.nodeId);
      if (context?.kind === "join" && context.member.nodeId === single.nodeId) {
        const { nodeId, label, raftAddr, restAddr, grpcAddr } = context.member;
        members.set(nodeId, { nodeId, label, raftAddr, restAddr, grpcAddr, joinedAtMs: existing?.joinedAtMs || context.atMs, role: "learner" });
      } else if (!existing) {
        members.set(single.nodeId, blankMember(single.nodeId));
      }
    }
    const voters = new Set([...confState.voters, ...confState.votersOutgoing]);
    const learners = new Set([...confState.learners, ...confState.learnersNext]);
    for (const id of [...voters, ...learners]) if (!members.has(id)) members.set(id, blankMember(id));
    const next: MemberRecord[] = [];
    for (const member of members.values()) {
      if (voters.has(member.nodeId)) next.push({ ...member, role: "voter" });
      else if (learners.has(member.nodeId)) next.push({ ...member, role: "learner" });
    }
    next.sort((a, b) => (a.nodeId < b.nodeId ? -1 : a.nodeId > b.nodeId ? 1 : 0));
    this.state.members = next;
    this.notify();
  }

  /**
   * The snapshot of a recovery: this state with `selfId` as the only member (a voter) and the
   * `ejected` members remembered as removed by recovery. The current state is not changed.
   */
  snapshotAsSoleMember(selfId: string, ejected: readonly string[], removal: { reason: string; by: string; atMs: number }): Uint8Array {
    const self = this.member(selfId) ?? blankMember(selfId);
    const removed = ejected.map((nodeId) => ({ nodeId, kind: "recover" as const, reason: removal.reason, by: removal.by, removedAtMs: removal.atMs }));
    const state: ClusterStateData = {
      ...this.state,
      members: [{ ...self, role: "voter" }],
      removed: [...this.state.removed, ...removed].slice(-removedMembersMax),
    };
    return textEncoder.encode(JSON.stringify({ format: snapshotFormatVersion, state }));
  }

  snapshot(): Uint8Array {
    return textEncoder.encode(JSON.stringify({ format: snapshotFormatVersion, state: this.state }));
  }

  restore(data: Uint8Array): void {
    if (data.byteLength === 0) {
      this.state = emptyState();
    } else {
      const parsed = JSON.parse(textDecoder.decode(data)) as { format: number; state: ClusterStateData };
      if (parsed.format !== snapshotFormatVersion) throw new Error(`cluster state snapshot format ${parsed.format} is not supported`);
      this.state = { ...emptyState(), ...parsed.state };
    }
    this.notify();
  }

  private notify(): void {
    for (const listener of this.listeners) listener();
  }

  private applyCommand(command: ClusterCommand, index: number): CommandResult {
    if (command.op === "cluster.stamp") return this.stamp(command);
    if (!this.state.meta) return refuse(CommandRefusal.NotReady, "the cluster meta is not stamped yet");
    switch (command.op) {
      case "member.update":
        return this.updateMember(command);
      case "token.issue":
        return this.issueToken(command);
      case "token.revoke":
        return this.revokeToken(command);
      case "token.consume":
        return this.consumeToken(command);
      case "seed.rotate":
        return this.rotateSeed(command);
      case "lease.acquire":
        return this.acquireLease(command, index);
      case "lease.renew":
        return this.renewLease(command);
      case "lease.release":
        return this.releaseLease(command);
      case "config.put":
        return this.putConfig(command);
      case "config.activate":
        return this.activateConfig(command);
    }
  }

  private stamp(command: Extract<ClusterCommand, { op: "cluster.stamp" }>): CommandResult<ClusterMeta> {
    if (this.state.meta) {
      if (this.state.meta.clusterId === command.clusterId) return ok(this.state.meta);
      return refuse(CommandRefusal.AlreadyStamped, `the cluster is already stamped as ${this.state.meta.clusterId}`);
    }
    const meta: ClusterMeta = { clusterId: command.clusterId, createdAtMs: command.atMs };
    this.state.meta = meta;
    this.state.material = { caCertPem: command.ca.certPem, caKeyPem: command.ca.keyPem };
    this.state.seed = { secret: command.seedSecret, generation: 1, rotatedAtMs: command.atMs, rotatedBy: "system" };
    const { nodeId, ...addresses } = command.member;
    this.state.members = this.state.members.map((m) => (m.nodeId === nodeId ? { ...m, ...addresses, joinedAtMs: command.atMs } : m));
    return ok(meta);
  }

  private updateMember(command: Extract<ClusterCommand, { op: "member.update" }>): CommandResult<MemberRecord> {
    const existing = this.member(command.nodeId);
    if (!existing) return refuse(CommandRefusal.MemberNotFound, `Member not found: ${command.nodeId}`);
    const updated: MemberRecord = {
      ...existing,
      raftAddr: command.raftAddr ?? existing.raftAddr,
      restAddr: command.restAddr ?? existing.restAddr,
      grpcAddr: command.grpcAddr ?? existing.grpcAddr,
      label: command.label ?? existing.label,
    };
    this.state.members = this.state.members.map((m) => (m.nodeId === command.nodeId ? updated : m));
    return ok(updated);
  }

  private issueToken(command: Extract<ClusterCommand, { op: "token.issue" }>): CommandResult<JoinTokenRecord> {
    const seed = this.state.seed!;
    if (command.seedGeneration !== seed.generation) return refuse(CommandRefusal.SeedRotated, "the seed secret was rotated while the token was signed");
    if (this.state.tokens.some((t) => t.jti === command.jti)) return refuse(CommandRefusal.JoinTokenExists, `Join token ${command.jti} exists`);
    const kept = this.state.tokens.filter((t) => t.status === "ACTIVE" || t.expiresAtMs + joinTokenRetentionAfterExpiryMs > command.atMs);
    if (kept.length >= joinTokensMax) return refuse(CommandRefusal.TooManyJoinTokens, `At most ${joinTokensMax} join tokens are kept; revoke some first`);
    const record: JoinTokenRecord = {
      jti: command.jti,
      label: command.label,
      hash: command.hash,
      seedGeneration: command.seedGeneration,
      joinAddrs: command.joinAddrs,
      createdAtMs: command.createdAtMs,
      expiresAtMs: command.expiresAtMs,
      createdBy: command.by,
      status: "ACTIVE",
      usedAtMs: null,
      usedBy: null,
      revokedAtMs: null,
    };
    this.state.tokens = [...kept, record];
    return ok(record);
  }

  private revokeToken(command: Extract<ClusterCommand, { op: "token.revoke" }>): CommandResult<JoinTokenRecord> {
    const token = this.state.tokens.find((t) => t.jti === command.jti);
    if (!token) return refuse(CommandRefusal.JoinTokenNotFound, `Join token not found: ${command.jti}`);
    if (token.status !== "ACTIVE") return refuse(CommandRefusal.JoinTokenNotActive, `Join token ${command.jti} is ${token.status}, not ACTIVE`);
    const revoked: JoinTokenRecord = { ...token, status: "REVOKED", revokedAtMs: command.atMs };
    this.replaceToken(revoked);
    return ok(revoked);
  }

  private consumeToken(command: Extract<ClusterCommand, { op: "token.consume" }>): CommandResult<JoinTokenRecord> {
    const token = this.state.tokens.find((t) => t.jti === command.jti);
    if (!token || token.hash !== command.hash) return refuse(CommandRefusal.JoinTokenNotFound, "Invalid cluster join token");
    // A join whose answer was lost is repeated with the same token by the same controller.
    if (token.status === "USED" && token.usedBy === command.nodeId) return ok(token);
    if (token.status === "USED") return refuse(CommandRefusal.JoinTokenUsed, "Cluster join token has already been used");
    if (token.status === "REVOKED") return refuse(CommandRefusal.JoinTokenRevoked, "Cluster join token has been revoked");
    if (token.status === "INVALIDATED" || token.seedGeneration !== this.state.seed!.generation) {
      return refuse(CommandRefusal.JoinTokenInvalidated, "Cluster join token was invalidated by a seed rotation");
    }
    if (token.expiresAtMs <= command.atMs) return refuse(CommandRefusal.JoinTokenExpired, "Cluster join token has expired");
    const used: JoinTokenRecord = { ...token, status: "USED", usedAtMs: command.atMs, usedBy: command.nodeId };
    this.replaceToken(used);
    return ok(used);
  }

  private rotateSeed(command: Extract<ClusterCommand, { op: "seed.rotate" }>): CommandResult<SeedState> {
    const seed: SeedState = { secret: command.secret, generation: this.state.seed!.generation + 1, rotatedAtMs: command.atMs, rotatedBy: command.by };
    this.state.seed = seed;
    this.state.tokens = this.state.tokens.map((t) => (t.status === "ACTIVE" ? { ...t, status: "INVALIDATED" } : t));
    return ok(seed);
  }

  private acquireLease(command: Extract<ClusterCommand, { op: "lease.acquire" }>, index: number): CommandResult<LeaseRecord> {
    const current = this.lease(command.name);
    if (current && current.expiresAtMs > command.atMs) {
      if (current.holder !== command.holder) {
        return refuse(CommandRefusal.LeaseHeld, `Lease ${command.name} is held by ${current.holder} until ${new Date(current.expiresAtMs).toISOString()}`);
      }
      const renewed: LeaseRecord = { ...current, expiresAtMs: command.atMs + command.ttlMs };
      this.replaceLease(renewed);
      return ok(renewed);
    }
    if (!current && this.state.leases.length >= leasesMax) return refuse(CommandRefusal.TooManyLeases, `At most ${leasesMax} singleton leases exist`);
    const granted: LeaseRecord = {
      name: command.name,
      holder: command.holder,
      fencingToken: index,
      grantedAtMs: command.atMs,
      expiresAtMs: command.atMs + command.ttlMs,
    };
    this.replaceLease(granted);
    return ok(granted);
  }

  private renewLease(command: Extract<ClusterCommand, { op: "lease.renew" }>): CommandResult<LeaseRecord> {
    const current = this.lease(command.name);
    if (!current || current.holder !== command.holder || current.fencingToken !== command.fencingToken || current.expiresAtMs <= command.atMs) {
      return refuse(
        CommandRefusal.WriteConflict,
        `ClusterWriteConflict: ${command.holder} does not hold lease ${command.name} with token ${command.fencingToken}`,
      );
    }
    const renewed: LeaseRecord = { ...current, expiresAtMs: command.atMs + command.ttlMs };
    this.replaceLease(renewed);
    return ok(renewed);
  }

  private releaseLease(command: Extract<ClusterCommand, { op: "lease.release" }>): CommandResult<LeaseRecord> {
    const current = this.lease(command.name);
    if (!current || current.holder !== command.holder || current.fencingToken !== command.fencingToken) {
      return refuse(
        CommandRefusal.WriteConflict,
        `ClusterWriteConflict: ${command.holder} does not hold lease ${command.name} with token ${command.fencingToken}`,
      );
    }
    this.state.leases = this.state.leases.filter((l) => l.name !== command.name);
    return ok(current);
  }

  private putConfig(command: Extract<ClusterCommand, { op: "config.put" }>): CommandResult<ConfigVersionRecord> {
    if (textEncoder.encode(JSON.stringify(command.config)).byteLength > configBytesMax) {
      return refuse(CommandRefusal.ConfigTooLarge, `A cluster config version holds at most ${configBytesMax} bytes of JSON`);
    }
    if (command.parentVersion !== undefined && command.parentVersion !== this.state.activeConfigVersion) {
      return refuse(
        CommandRefusal.WriteConflict,
        `Config version ${this.state.activeConfigVersion ?? "none"} is active, not ${command.parentVersion ?? "none"}`,
      );
    }
    const last = this.state.configVersions[this.state.configVersions.length - 1];
    const record: ConfigVersionRecord = {
      version: (last?.version ?? 0) + 1,
      config: command.config,
      comment: command.comment,
      createdAtMs: command.atMs,
      createdBy: command.by,
      parentVersion: this.state.activeConfigVersion,
    };
    this.state.configVersions = [...this.state.configVersions, record].slice(-configVersionsMax);
    this.state.activeConfigVersion = record.version;
    return ok(record);
  }

  private activateConfig(command: Extract<ClusterCommand, { op: "config.activate" }>): CommandResult<ConfigVersionRecord> {
    const record = this.state.configVersions.find((v) => v.version === command.version);
    if (!record) return refuse(CommandRefusal.ConfigVersionNotFound, `Config version not found: ${command.version}`);
    if (command.expectedActive !== undefined && command.expectedActive !== this.state.activeConfigVersion) {
      return refuse(
        CommandRefusal.WriteConflict,
        `Config version ${this.state.activeConfigVersion ?? "none"} is active, not ${command.expectedActive ?? "none"}`,
      );
    }
    this.state.activeConfigVersion = record.version;
    return ok(record);
  }

  private replaceToken(token: JoinTokenRecord): void {
    this.state.tokens = this.state.tokens.map((t) => (t.jti === token.jti ? token : t));
  }

  private replaceLease(lease: LeaseRecord): void {
    this.state.leases = [...this.state.leases.filter((l) => l.name !== lease.name), lease].sort((a, b) => (a.name < b.name ? -1 : 1));
  }
}

function blankMember(nodeId: string): MemberRecord {
  return { nodeId, raftAddr: "", restAddr: "", grpcAddr: "", label: "", joinedAtMs: 0, role: "voter" };
}
