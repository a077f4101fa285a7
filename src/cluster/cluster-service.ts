/**
 * The cluster service: what the REST routes and the controller's singleton jobs use of the
 * replicated cluster state. Reads answer from this controller's applied state (so a controller cut
 * off from the quorum still answers them); writes go through Raft on the leader — proposed here
 * when this controller leads, otherwise handed to the leader by the {@link LeaderLink} — and wait at
 * most `commitTimeoutMs` for an outcome (503 RAFT_UNAVAILABLE beyond). Every write is refused with
 * 409 CLUSTER_NOT_READY until the cluster meta is stamped.
 *
 * Singleton leases: {@link ClusterService.runUnderLease} (see `singleton-leases.ts`).
 */
import { performance } from "node:perf_hooks";
import { ConfChangeType } from "../../raft/types.js";
import type { AuditRecorder } from "../audit/types.js";
import type { Logger } from "../logs/types.js";
import type { Clock } from "../shared/clock.js";
import { assert, conflict, notFound } from "../shared/errors.js";
import type { CommandResult, InstanceCommand } from "../wire/daemon-proto.js";
import { issueNodeCertificate, type CertificateAndKey } from "./ca.js";
import {
  encodeCommand,
  encodeMembershipContext,
  type AppliedCommand,
  type ClusterCommand,
  type MembershipContext,
  type UnstampedCommand,
} from "./cluster-commands.js";
import type { ClusterDocuments } from "./cluster-documents.js";
import { clusterNotReady, raftUnavailable, refusalError } from "./cluster-errors.js";
import type { ClusterIdentityStore, MemberIdentity, PendingBootstrap } from "./cluster-identity.js";
import type { JoinClusterRequest, JoinClusterResponse } from "./cluster-proto.js";
import {
  joinTokenTtlSecondsDefault,
  type ClusterRecord,
  type ConfigVersionList,
  type CreatedJoinToken,
  type Ejection,
  type JoinToken,
  type LeaseList,
  type LeaveResponse,
  type Member,
  type SeedRotation,
} from "./cluster-schemas.js";
import type { ClusterMaterial, ClusterStateMachine, JoinTokenRecord, MemberRecord, SeedState } from "./cluster-state-machine.js";
import { caFingerprint, iso, joinTokenView, leaseView, memberView } from "./cluster-views.js";
import { RaftHostError } from "./host-errors.js";
import { hashJoinToken, newJoinTokenId, newSeedSecret, signJoinToken } from "./join-token.js";
import type { MemberClients } from "./member-clients.js";
import type { ClusterMembershipPort, LeaderLink, MembershipRequest } from "./membership-types.js";
import { ForwardedCommands, MemberCommandLink } from "./node-commands.js";
import type { RaftMember, RaftTuning } from "./raft-member.js";
import { probeMembers, rewriteLogAsSoleMember } from "./recovery.js";
import { SingletonLeases, type HeldLease } from "./singleton-leases.js";

export type { HeldLease } from "./singleton-leases.js";

/** Addresses this controller advertises in its member record. */
export interface AdvertisedAddresses {
  raftAddr: string;
  restAddr: string;
  grpcAddr: string;
}

export interface ClusterServiceOptions {
  readonly nodeId: string;
  readonly identity: MemberIdentity;
  readonly identityStore: ClusterIdentityStore;
  readonly machine: ClusterStateMachine;
  readonly member: RaftMember;
  /** Starts the Raft member again on `port` from what its log holds (after a recovery rewrote it). */
  readonly restartMember: (port: number) => Promise<RaftMember>;
  /** Clients of the other members' gRPC ports (forwarding, probes, relayed joins). */
  readonly clients: MemberClients;
  readonly documents: ClusterDocuments;
  readonly audit: AuditRecorder;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly tuning: RaftTuning;
  /** Host name or address peers reach this controller on (`raft.host`). */
  readonly advertisedHost: string;
  readonly label: string;
  /** The cluster being created by this controller, until its stamp is in the log. */
  readonly pendingBootstrap: PendingBootstrap | null;
  /** Called once this controller is no longer a member (it left or was ejected). */
  readonly onLeft: () => void;
}

/** How long stopping waits for each held singleton lease to be released. */
const leaseReleaseTimeoutMs = 1_000;

/** How often the background upkeep runs (pending stamp, own member record, CA document). */
export const upkeepIntervalMs = 1_000;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref());

/** See the module comment. */
export class ClusterService implements ClusterMembershipPort {
  private readonly log: Logger;
  private member: RaftMember;
  private readonly addresses: AdvertisedAddresses;
  private leaderLink: LeaderLink | null = null;
  private readonly forwardedCommands = new ForwardedCommands();
  private readonly singletonLeases: SingletonLeases;
  private upkeepTimer: NodeJS.Timeout | null = null;
  private upkeepRunning = false;
  private pendingBootstrap: PendingBootstrap | null;
  private identity: MemberIdentity;
  private gatewayCaSynced = false;
  private wasMember = false;
  private recovering = false;
  private left = false;
  private stopped = false;
  private readonly unsubscribe: () => void;

  constructor(private readonly options: ClusterServiceOptions) {
    this.log = options.logger;
    this.member = options.member;
    this.singletonLeases = new SingletonLeases(this, options.logger);
    this.identity = options.identity;
    this.pendingBootstrap = options.pendingBootstrap;
    this.addresses = { raftAddr: `${options.advertisedHost}:${options.member.port}`, restAddr: "", grpcAddr: "" };
    this.unsubscribe = options.machine.onChange(() => this.watchOwnMembership());
  }

  get nodeId(): string {
    return this.options.nodeId;
  }

  get clusterId(): string {
    return this.identity.clusterId;
  }

  /** True once the cluster meta is stamped in this controller's applied state. */
  isReady(): boolean {
    return this.options.machine.meta() !== null;
  }

  /** The cluster CA as this controller applied it (null before the stamp). */
  material(): ClusterMaterial | null {
    return this.options.machine.material();
  }

  /** The Raft leader as this controller knows it. */
  leaderId(): string | null {
    return this.member.host.leaderId();
  }

  /** Relays a join to the leader at `address`, bounded by three commit timeouts (the leader's own work is bounded by one). */
  relayJoin(address: string, request: JoinClusterRequest): Promise<JoinClusterResponse> {
    return this.options.clients.relayJoin(address, request, 3 * this.options.tuning.commitTimeoutMs);
  }

  /** Runs a daemon command another member forwarded (`ForwardNodeCommand`) for a stream this controller holds. */
  runForwardedCommand(nodeId: string, command: InstanceCommand): Promise<CommandResult> {
    return this.forwardedCommands.run(nodeId, command);
  }

  /**
   * Daemon commands to and from the other members (`ForwardNodeCommand`): forwarded to a member's
   * gRPC port from its member record, on clients of the link's own that its owner closes.
   */
  memberCommandLink(): MemberCommandLink {
    return new MemberCommandLink(this.options.clients.withOwnChannels(), (id) => this.grpcAddressOf(id), this.forwardedCommands);
  }

  /** Sets the link to the leader used by writes on a controller that does not lead. */
  setLeaderLink(link: LeaderLink): void {
    this.leaderLink = link;
  }

  /**
   * Starts the background upkeep and waits (at most `waitMs`) until the cluster meta is stamped
   * and the gateway's CA document holds the cluster CA. Returns whether that happened in time.
   */
  async start(waitMs: number): Promise<boolean> {
    await this.campaignIfSoleVoter(waitMs);
    this.upkeepTimer = setInterval(() => void this.upkeep(), upkeepIntervalMs);
    this.upkeepTimer.unref();
    const started = performance.now();
    while (!this.stopped && performance.now() - started < waitMs) {
      await this.upkeep();
      if (this.isReady() && this.gatewayCaSynced) return true;
      await sleep(this.options.tuning.tickIntervalMs);
    }
    return false;
  }

  /** Records the REST and gRPC addresses this controller serves on (its member record follows). */
  announce(addresses: { httpPort: number; grpcPort: number }): void {
    this.addresses.restAddr = `${this.options.advertisedHost}:${addresses.httpPort}`;
    this.addresses.grpcAddr = `${this.options.advertisedHost}:${addresses.grpcPort}`;
    void this.upkeep();
  }

  /** The addresses this controller advertises. */
  advertised(): Readonly<AdvertisedAddresses> {
    return this.addresses;
  }

  /** Stops the upkeep and the Raft member; held singleton leases are released first (best effort). */
  async stop(): Promise<void> {
    if (this.stopped) return;
    await this.singletonLeases.releaseAll(leaseReleaseTimeoutMs);
    this.stopped = true;
    this.unsubscribe();
    if (this.upkeepTimer) clearInterval(this.upkeepTimer);
    while (this.upkeepRunning || this.recovering) await sleep(10);
    await this.member.stop();
    this.options.clients.close();
  }

  // ---- reads ----

  cluster(): ClusterRecord {
    const meta = this.requireMeta();
    const machine = this.options.machine;
    return {
      clusterId: meta.clusterId,
      memberCount: machine.members().length,
      activeConfigVersion: machine.activeConfigVersion(),
      createdAt: iso(meta.createdAtMs),
      nodeId: this.nodeId,
      leaderId: this.leaderId(),
    };
  }

  members(): { members: Member[] } {
    this.requireMeta();
    const leader = this.leaderId();
    return { members: this.options.machine.members().map((m) => memberView(m, leader)) };
  }

  listJoinTokens(): { tokens: JoinToken[] } {
    this.requireMeta();
    const nowMs = this.options.clock.nowMs();
    return { tokens: this.options.machine.tokens().map((t) => joinTokenView(t, nowMs)) };
  }

  /** Current singleton holders: leases not yet expired by this controller's clock. */
  leases(): LeaseList {
    this.requireMeta();
    const nowMs = this.options.clock.nowMs();
    return { leases: this.options.machine.leases().filter((l) => l.expiresAtMs > nowMs).map(leaseView) };
  }

  configVersions(): ConfigVersionList {
    this.requireMeta();
    const machine = this.options.machine;
    const active = machine.activeConfigVersion();
    return {
      activeVersion: active,
      versions: machine.configVersions().map((v) => ({
        version: v.version,
        createdAt: iso(v.createdAtMs),
        createdBy: v.createdBy,
        comment: v.comment,
        active: v.version === active,
        config: v.config,
      })),
    };
  }

  // ---- writes ----

  /** Issues a join token carrying `joinAddrs`; the value is returned here only. */
  async issueJoinToken(input: { joinAddrs: readonly string[]; ttlSeconds?: number; label?: string }, by: string): Promise<CreatedJoinToken> {
    this.requireMeta();
    const ttlMs = (input.ttlSeconds ?? joinTokenTtlSecondsDefault) * 1000;
    for (let attempt = 0; ; attempt++) {
      const seed = this.options.machine.seed()!;
      const material = this.options.machine.material()!;
      const jti = newJoinTokenId();
      const createdAtMs = this.options.clock.nowMs();
      const expiresAtMs = createdAtMs + ttlMs;
      const token = signJoinToken(
        { jti, cid: this.clusterId, addrs: [...input.joinAddrs], exp: expiresAtMs, sg: seed.generation, caf: caFingerprint(material.caCertPem) },
        seed.secret,
      );
      const result = await this.commit<JoinTokenRecord>({
        op: "token.issue",
        jti,
        label: input.label ?? "",
        hash: hashJoinToken(token),
        seedGeneration: seed.generation,
        joinAddrs: [...input.joinAddrs],
        createdAtMs,
        expiresAtMs,
        by,
      });
      // The seed rotated between reading it and committing: sign again with the new one.
      if (!result.ok && result.code === "SEED_ROTATED" && attempt === 0) {
        await this.waitApplied(result.index);
        continue;
      }
      if (!result.ok) throw refusalError(result.code, result.message);
      return { jti, token, expiresAt: iso(expiresAtMs) };
    }
  }

  /** Revokes an ACTIVE join token. */
  async revokeJoinToken(jti: string, by: string): Promise<JoinToken> {
    this.requireMeta();
    if (!this.options.machine.tokens().some((t) => t.jti === jti)) throw notFound(`Join token not found: ${jti}`, "JOIN_TOKEN_NOT_FOUND");
    const result = await this.commit<JoinTokenRecord>({ op: "token.revoke", jti, by });
    if (!result.ok) throw refusalError(result.code, result.message);
    return joinTokenView(result.value, this.options.clock.nowMs());
  }

  /** Rotates the seed secret: every outstanding join token becomes invalid. */
  async rotateSeed(by: string): Promise<SeedRotation> {
    this.requireMeta();
    const result = await this.commit<SeedState>({ op: "seed.rotate", secret: newSeedSecret(), by });
    if (!result.ok) throw refusalError(result.code, result.message);
    return { clusterId: this.clusterId, rotatedBy: result.value.rotatedBy, rotatedAt: iso(result.value.rotatedAtMs) };
  }

  /** Removes another member from the Raft group (it is meant to be gone for good). */
  async ejectMember(nodeId: string, reason: string, by: string): Promise<Ejection> {
    this.requireMeta();
    if (!this.options.machine.member(nodeId)) throw notFound(`Member not found: ${nodeId}`, "MEMBER_NOT_FOUND");
    if (nodeId === this.nodeId) throw conflict("A controller cannot eject itself; use POST /api/v1/cluster/leave", "CANNOT_EJECT_SELF");
    await this.changeMembership({ changes: [{ type: ConfChangeType.RemoveNode, nodeId }], context: { kind: "eject", reason, by } });
    this.log.info(`Member ${nodeId} ejected by ${by}${reason ? `: ${reason}` : ""}`);
    return { nodeId, clusterId: this.clusterId, reason };
  }

  /**
   * Leaves the cluster: a leader first hands leadership to another voter; the removal is then
   * committed and the controller shuts down (through `onLeft`) once the answer is sent.
   */
  async leave(by: string): Promise<LeaveResponse> {
    this.requireMeta();
    const config = this.member.confState();
    const otherVoters = config.voters.filter((id) => id !== this.nodeId);
    if (otherVoters.length === 0) {
      throw conflict("This controller is the only voting member; a cluster cannot lose its last member", "LAST_MEMBER");
    }
    const host = this.member.host;
    if (host.isLeader()) {
      const transferee = this.mostCaughtUpVoter(otherVoters);
      this.log.info(`Leaving the cluster: handing leadership to ${transferee}`);
      if (!(await host.transferLeadership(transferee))) throw raftUnavailable(`leadership could not be handed to ${transferee}`);
    }
    await this.changeMembership({ changes: [{ type: ConfChangeType.RemoveNode, nodeId: this.nodeId }], context: { kind: "leave", reason: "", by } });
    this.markLeft();
    return { nodeId: this.nodeId, clusterId: this.clusterId };
  }

  /**
   * Runs `fn` while this controller holds the singleton lease `name`; false without running it
   * when another controller holds it or Raft cannot commit. See {@link SingletonLeases}.
   */
  runUnderLease(name: string, ttlMs: number, fn: (lease: HeldLease) => Promise<void> | void): Promise<boolean> {
    return this.singletonLeases.runUnderLease(name, ttlMs, fn);
  }

  /** Applies `command` through the leader; the raw result, for callers that map refusals themselves. */
  async commit<T>(command: UnstampedCommand, timeoutMs = this.options.tuning.commitTimeoutMs): Promise<AppliedCommand<T>> {
    const result = await this.onLeader(
      timeoutMs,
      () => this.proposeAsLeader(command),
      (leaderId, link) => link.propose(leaderId, command),
    );
    await this.waitApplied(result.index);
    return result as AppliedCommand<T>;
  }

  /** Proposes `command` on this controller, which must lead: the leader's clock stamps it. */
  async proposeAsLeader(command: UnstampedCommand): Promise<AppliedCommand> {
    const stamped = { ...command, atMs: this.options.clock.nowMs() } as ClusterCommand;
    return (await this.member.host.propose(encodeCommand(stamped))) as AppliedCommand;
  }

  /** Commits a membership change through the leader. */
  async changeMembership(request: MembershipRequest, timeoutMs = this.options.tuning.commitTimeoutMs): Promise<void> {
    await this.onLeader(
      timeoutMs,
      () => this.changeMembershipAsLeader(request),
      (leaderId, link) => link.changeMembership(leaderId, request),
    );
  }

  /** Proposes a membership change on this controller, which must lead. */
  async changeMembershipAsLeader(request: MembershipRequest): Promise<void> {
    const context = { ...request.context, atMs: this.options.clock.nowMs() } as MembershipContext;
    await this.member.host.proposeConfChange({ changes: request.changes, context: encodeMembershipContext(context) });
  }

  /** Issues a certificate for a member with the cluster CA (the Raft-held material). */
  issueMemberCertificate(nodeId: string, hosts: readonly string[]): CertificateAndKey {
    const material = this.options.machine.material();
    assert(material, "cluster material is known once the meta is stamped");
    return issueNodeCertificate({ certPem: material.caCertPem, keyPem: material.caKeyPem }, { nodeId, hosts, clock: this.options.clock });
  }

  /** Applies `command` on this controller, which must lead (a write relayed by another member); 409 NOT_LEADER otherwise. */
  async commitOnLeader(command: UnstampedCommand): Promise<AppliedCommand> {
    return this.onLeader(this.options.tuning.commitTimeoutMs, () => this.proposeAsLeader(command), null);
  }

  /** Commits a membership change on this controller, which must lead; 409 NOT_LEADER otherwise. */
  async changeMembershipOnLeader(request: MembershipRequest): Promise<void> {
    await this.onLeader(this.options.tuning.commitTimeoutMs, () => this.changeMembershipAsLeader(request), null);
  }

  isLeader(): boolean {
    return this.member.host.isLeader();
  }

  /** This controller's Raft role and applied index. */
  raftStatus(): { role: string; applied: number } {
    return { role: this.member.host.status().softState.role, applied: this.member.host.applied() };
  }

  /** The applied Raft configuration (voters and learners). */
  configuration(): { voters: readonly string[]; learners: readonly string[] } {
    const config = this.member.confState();
    return { voters: config.voters, learners: config.learners };
  }

  /** True when `nodeId` is a voter, a learner or has a member record. */
  isMemberId(nodeId: string): boolean {
    const config = this.member.confState();
    return config.voters.includes(nodeId) || config.learners.includes(nodeId) || this.options.machine.member(nodeId) !== undefined;
  }

  /** The member records as applied here. */
  memberRecords(): readonly MemberRecord[] {
    return this.options.machine.members();
  }

  /** Where a member's controller gRPC port is, or null when not known. */
  grpcAddressOf(nodeId: string): string | null {
    return this.options.machine.member(nodeId)?.grpcAddr || null;
  }

  joinTokenRecord(jti: string): JoinTokenRecord | undefined {
    return this.options.machine.tokens().find((t) => t.jti === jti);
  }

  seed(): SeedState | null {
    return this.options.machine.seed();
  }

  /**
   * Recovery after the quorum is lost: this controller becomes the only member, the named members
   * are removed. Every other member must be named, and none of them may answer (on its gRPC or its
   * Raft port). The log is rewritten as a snapshot of the applied state with this controller as
   * the only voter; entries not applied here are dropped.
   */
  async recover(eject: readonly string[], reason: string, by: string, probeTimeoutMs: number): Promise<{ clusterId: string; nodeId: string; ejected: string[]; memberCount: number }> {
    this.requireMeta();
    const machine = this.options.machine;
    const named = [...new Set(eject)];
    for (const nodeId of named) {
      if (nodeId === this.nodeId) throw conflict("A controller cannot eject itself", "CANNOT_EJECT_SELF");
      if (!this.isMemberId(nodeId)) throw notFound(`Member not found: ${nodeId}`, "MEMBER_NOT_FOUND");
    }
    const others = machine.members().map((m) => m.nodeId).filter((id) => id !== this.nodeId);
    const unnamed = others.filter((id) => !named.includes(id));
    if (unnamed.length > 0) {
      throw conflict(`Recovery leaves this controller as the only member: name every other member too (${unnamed.join(", ")}); survivors rejoin with join tokens`, "RECOVERY_INCOMPLETE");
    }
    if (this.recovering) throw conflict("A recovery is already running", "RECOVERY_RUNNING");
    this.recovering = true;
    try {
      const reachable = await probeMembers(
        named.map((nodeId) => machine.member(nodeId) ?? { nodeId, raftAddr: "", grpcAddr: "" }),
        this.options.clients,
        probeTimeoutMs,
      );
      if (reachable.length > 0) {
        throw conflict(`These members still answer; eject them with DELETE /api/v1/cluster/members/{nodeId} instead: ${reachable.join(", ")}`, "MEMBERS_REACHABLE");
      }
      const host = this.member.host;
      const waitStarted = performance.now();
      while (host.applied() < host.status().hardState.commit && performance.now() - waitStarted < this.options.tuning.commitTimeoutMs) await sleep(10);
      const applied = host.applied();
      const data = machine.snapshotAsSoleMember(this.nodeId, named, { reason, by, atMs: this.options.clock.nowMs() });
      const port = this.member.port;
      this.log.warn(`Recovering cluster ${this.clusterId} as its only member; ejecting ${named.join(", ")}${reason ? `: ${reason}` : ""}`);
      await this.member.stop();
      await rewriteLogAsSoleMember(this.options.identityStore.logDir, this.nodeId, applied, data);
      this.member = await this.options.restartMember(port);
      this.member.host.campaign();
      return { clusterId: this.clusterId, nodeId: this.nodeId, ejected: named, memberCount: machine.members().length };
    } finally {
      this.recovering = false;
    }
  }

  // ---- internals ----

  /**
   * Runs `asLeader` when this controller leads, else `viaLink` towards the leader; retries while
   * nothing was applied (no leader yet, a refused or dropped proposal) until `timeoutMs` passed.
   */
  private async onLeader<T>(timeoutMs: number, asLeader: () => Promise<T>, viaLink: ((leaderId: string, link: LeaderLink) => Promise<T>) | null): Promise<T> {
    const started = performance.now();
    let lastProblem = "no leader is known";
    for (;;) {
      if (this.stopped || this.left) throw raftUnavailable(this.left ? "this controller left the cluster" : "this controller is stopping");
      const host = this.member.host;
      const leaderId = host.leaderId();
      if (host.isLeader()) {
        try {
          return await asLeader();
        } catch (err) {
          if (!(err instanceof RaftHostError)) throw err;
          if (!err.outcomeKnown) throw raftUnavailable(err.message);
          lastProblem = err.message;
        }
      } else if (viaLink === null) {
        throw conflict(`This controller does not lead; the leader is ${leaderId ?? "not known"}`, "NOT_LEADER");
      } else if (leaderId !== null && this.leaderLink) {
        try {
          return await viaLink(leaderId, this.leaderLink);
        } catch (err) {
          if (!(err instanceof RaftHostError)) throw err;
          if (!err.outcomeKnown) throw raftUnavailable(err.message);
          lastProblem = err.message;
        }
      } else if (leaderId !== null) {
        lastProblem = `the leader is ${leaderId}, which this controller cannot reach`;
      }
      if (performance.now() - started >= timeoutMs) throw raftUnavailable(lastProblem);
      await sleep(this.options.tuning.tickIntervalMs);
    }
  }

  /** Waits (bounded) until this controller applied `index`, so a read after a write sees it. */
  private async waitApplied(index: number): Promise<void> {
    const started = performance.now();
    const host = this.member.host;
    while (host.applied() < index && !this.stopped && performance.now() - started < this.options.tuning.commitTimeoutMs) {
      await sleep(this.options.tuning.tickIntervalMs / 4);
    }
  }

  private requireMeta() {
    const meta = this.options.machine.meta();
    if (!meta) throw clusterNotReady();
    return meta;
  }

  private mostCaughtUpVoter(voters: readonly string[]): string {
    const progress = this.member.host.status().progress ?? {};
    return [...voters].sort((a, b) => (progress[b]?.match ?? 0) - (progress[a]?.match ?? 0))[0]!;
  }

  /** Wait for the local log to be applied, then campaign when this controller is the only voter. */
  private async campaignIfSoleVoter(waitMs: number): Promise<void> {
    const host = this.member.host;
    const started = performance.now();
    while (host.applied() < host.status().hardState.commit && performance.now() - started < waitMs) await sleep(5);
    const voters = this.member.confState().voters;
    if (voters.length === 1 && voters[0] === this.nodeId && !host.isLeader()) host.campaign();
  }

  /** Notices this controller's removal from the member records. */
  private watchOwnMembership(): void {
    if (!this.isReady() || this.left) return;
    const present = this.options.machine.member(this.nodeId) !== undefined;
    if (present) {
      this.wasMember = true;
      return;
    }
    if (this.wasMember) {
      this.log.warn("This controller was removed from the cluster");
      this.markLeft();
    }
  }

  private markLeft(): void {
    if (this.left) return;
    this.left = true;
    this.identity = { ...this.identity, state: "left" };
    this.options.identityStore.writeIdentity(this.identity);
    setImmediate(() => this.options.onLeft());
  }

  /** Background upkeep: the pending stamp, the gateway's CA document and this member's record. */
  private async upkeep(): Promise<void> {
    if (this.upkeepRunning || this.stopped || this.left || this.recovering) return;
    this.upkeepRunning = true;
    try {
      await this.stampPendingBootstrap();
      await this.syncGatewayCa();
      await this.updateOwnRecord();
      await this.promoteCaughtUpLearners();
    } catch (err) {
      this.log.debug("Cluster upkeep did not finish; it runs again shortly", err);
    } finally {
      this.upkeepRunning = false;
    }
  }

  private async stampPendingBootstrap(): Promise<void> {
    const pending = this.pendingBootstrap;
    if (!pending) return;
    if (!this.isReady()) {
      if (!this.member.host.isLeader()) return;
      const result = await this.proposeAsLeader({
        op: "cluster.stamp",
        clusterId: pending.clusterId,
        ca: pending.ca,
        seedSecret: pending.seedSecret,
        member: { nodeId: this.nodeId, label: this.options.label, ...this.addresses },
      });
      if (!result.ok) throw new Error(`the cluster stamp was refused: ${result.message}`);
      this.log.info(`Cluster ${pending.clusterId} created with this controller (${this.nodeId}) as its first member`);
    }
    this.pendingBootstrap = null;
    // Synchronous on purpose: one small file, once in a cluster's life, right after its first election.
    this.options.identityStore.deletePendingBootstrap();
  }

  private async syncGatewayCa(): Promise<void> {
    if (this.gatewayCaSynced) return;
    const material = this.options.machine.material();
    if (!material) return;
    const outcome = await this.options.documents.syncGatewayCa({ certPem: material.caCertPem, keyPem: material.caKeyPem }, this.options.clock.nowMs());
    if (outcome === "replaced") this.log.warn("The cluster_ca document held another CA; it now holds the Raft-held cluster CA");
    this.gatewayCaSynced = true;
  }

  /** On the leader: a learner whose log has caught up with the commit index becomes a voter. */
  private async promoteCaughtUpLearners(): Promise<void> {
    const host = this.member.host;
    if (!host.isLeader()) return;
    const status = host.status();
    for (const learner of status.config.learners) {
      const progress = status.progress?.[learner];
      if (!progress || progress.match < status.hardState.commit) continue;
      await this.changeMembershipAsLeader({ changes: [{ type: ConfChangeType.AddVoter, nodeId: learner }], context: { kind: "promote" } });
      this.log.info(`Member ${learner} caught up and became a voter`);
      return; // one membership change at a time
    }
  }

  private async updateOwnRecord(): Promise<void> {
    if (!this.isReady()) return;
    const record = this.options.machine.member(this.nodeId);
    if (!record) return;
    const update: { raftAddr?: string; restAddr?: string; grpcAddr?: string } = {};
    for (const key of ["raftAddr", "restAddr", "grpcAddr"] as const) {
      if (this.addresses[key] !== "" && this.addresses[key] !== record[key]) update[key] = this.addresses[key];
    }
    if (Object.keys(update).length === 0) return;
    const result = await this.commit({ op: "member.update", nodeId: this.nodeId, ...update });
    if (!result.ok) throw new Error(result.message);
  }
}
