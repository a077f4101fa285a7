/**
 * The cluster service: what the REST routes and the controller's singleton jobs use of the
 * replicated cluster state. Reads answer from this controller's applied state (so a controller cut
 * off from the quorum still answers them); writes go through Raft on the leader — proposed here
 * when this controller leads, otherwise handed to the leader by the {@link LeaderLink} — and wait at
 * most `commitTimeoutMs` for an outcome (503 RAFT_UNAVAILABLE beyond). Every write is refused with
 * 409 CLUSTER_NOT_READY until the cluster meta is stamped.
 *
 * This module coordinates: start and stop, this controller's own membership, and the ports it
 * serves. The parts: `leader-writes.ts` (writes and membership changes through the leader),
 * `join-token-admin.ts` (join tokens and the seed), `member-removal.ts` (eject, leave, recover),
 * `cluster-upkeep.ts` (background upkeep), `cluster-views.ts` (the read views) and
 * `singleton-leases.ts` ({@link ClusterService.runUnderLease}).
 */
import type { AuditRecorder } from "../audit/types.js";
import type { LogQuery } from "../logs/log-query.js";
import type { NodeLogRead } from "../logs/node-log-buffers.js";
import type { Logger } from "../logs/types.js";
import { systemClock, sleep, nextTurn, type Clock, type Timer } from "../shared/clock.js";
import { assert } from "../shared/errors.js";
import type { CommandResult, InstanceCommand } from "../wire/daemon-proto.js";
import { issueNodeCertificate, type CertificateAndKey } from "./identity/ca.js";
import type { AppliedCommand, UnstampedCommand } from "./state/cluster-commands.js";
import type { ClusterDocuments } from "./identity/cluster-documents.js";
import { clusterNotReady } from "./state/cluster-errors.js";
import type { ClusterIdentityStore, MemberIdentity, PendingBootstrap } from "./identity/cluster-identity.js";
import type { JoinClusterRequest, JoinClusterResponse } from "./peers/cluster-proto.js";
import type {
  ClusterRecord,
  ConfigVersionList,
  CreatedJoinToken,
  Ejection,
  JoinToken,
  LeaseList,
  LeaveResponse,
  Member,
  SeedRotation,
} from "./state/cluster-schemas.js";
import type { ClusterMaterial, ClusterStateMachine, JoinTokenRecord, MemberRecord, SeedState } from "./state/cluster-state-machine.js";
import { ClusterUpkeep } from "./membership/cluster-upkeep.js";
import { clusterRecordView, configVersionListView, joinTokenListView, leaseListView, memberListView } from "./state/cluster-views.js";
import { JoinTokenAdmin } from "./state/join-token-admin.js";
import { LeaderWrites } from "./membership/leader-writes.js";
import type { MemberClients } from "./peers/member-clients.js";
import { MemberRemoval, type RecoveryResult } from "./membership/member-removal.js";
import type { AdvertisedAddresses, ClusterMembershipPort, LeaderLink, MembershipRequest } from "./peers/membership-types.js";
import { ForwardedCommands, MemberCommandLink } from "./peers/node-commands.js";
import { ForwardedLogReads, MemberLogLink } from "./peers/node-logs.js";
import type { RaftMember, RaftTuning } from "./membership/raft-member.js";
import { SingletonLeases, type HeldLease } from "./state/singleton-leases.js";

export type { HeldLease } from "./state/singleton-leases.js";
export type { AdvertisedAddresses } from "./peers/membership-types.js";

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

/** Raft progress is polled on the system clock the Raft host ticks on; the injected clock only stamps commands (tests hold it still). */
const pollRaft = (ms: number) => sleep(systemClock, ms, { unref: true });

/** See the module comment. */
export class ClusterService implements ClusterMembershipPort {
  private readonly log: Logger;
  private member: RaftMember;
  private readonly addresses: AdvertisedAddresses;
  private leaderLink: LeaderLink | null = null;
  private readonly forwardedCommands = new ForwardedCommands();
  private readonly forwardedLogReads = new ForwardedLogReads();
  private readonly singletonLeases: SingletonLeases;
  private readonly writes: LeaderWrites;
  private readonly joinTokens: JoinTokenAdmin;
  private readonly removal: MemberRemoval;
  private readonly upkeep: ClusterUpkeep;
  private upkeepTimer: Timer | null = null;
  private identity: MemberIdentity;
  private wasMember = false;
  private left = false;
  private stopped = false;
  private readonly unsubscribe: () => void;

  constructor(private readonly options: ClusterServiceOptions) {
    this.log = options.logger;
    this.member = options.member;
    this.singletonLeases = new SingletonLeases(this, options.logger);
    this.identity = options.identity;
    this.addresses = { raftAddr: `${options.advertisedHost}:${options.member.port}`, restAddr: "", grpcAddr: "" };
    const member = () => this.member;
    const clusterId = () => this.clusterId;
    this.writes = new LeaderWrites({
      member,
      leaderLink: () => this.leaderLink,
      closedReason: () => (this.left ? "this controller left the cluster" : this.stopped ? "this controller is stopping" : null),
      isStopped: () => this.stopped,
      clock: options.clock,
      tuning: options.tuning,
    });
    this.joinTokens = new JoinTokenAdmin({
      state: options.machine,
      clock: options.clock,
      clusterId,
      commit: (command) => this.writes.commit(command),
      waitApplied: (index) => this.writes.waitApplied(index),
    });
    this.removal = new MemberRemoval({
      nodeId: options.nodeId,
      clusterId,
      state: options.machine,
      member,
      restartMember: async (port) => {
        this.member = await options.restartMember(port);
      },
      isMemberId: (nodeId) => this.isMemberId(nodeId),
      changeMembership: (request) => this.writes.changeMembership(request),
      markLeft: () => this.markLeft(),
      clients: options.clients,
      logDir: options.identityStore.logDir,
      clock: options.clock,
      commitTimeoutMs: options.tuning.commitTimeoutMs,
      log: options.logger,
    });
    this.upkeep = new ClusterUpkeep({
      nodeId: options.nodeId,
      label: options.label,
      state: options.machine,
      member,
      identityStore: options.identityStore,
      documents: options.documents,
      clock: options.clock,
      log: options.logger,
      addresses: this.addresses,
      pendingBootstrap: options.pendingBootstrap,
      paused: () => this.stopped || this.left || this.removal.recovering,
      proposeAsLeader: (command) => this.writes.proposeAsLeader(command),
      commit: (command) => this.writes.commit(command),
      changeMembershipAsLeader: (request) => this.writes.changeMembershipAsLeader(request),
    });
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

  /** Reads the daemon log records this controller holds for `nodeId`, for another member (`ReadNodeLogs`). */
  readForwardedNodeLogs(nodeId: string, query: LogQuery): NodeLogRead {
    return this.forwardedLogReads.run(nodeId, query);
  }

  /**
   * Daemon log reads to and from the other members (`ReadNodeLogs`): read from a member's gRPC
   * port from its member record, on clients of the link's own that its owner closes.
   */
  memberLogLink(): MemberLogLink {
    return new MemberLogLink(this.options.clients.withOwnChannels(), (id) => this.grpcAddressOf(id), this.forwardedLogReads);
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
    // Upkeep follows Raft's pace, on the system clock like the polls above.
    this.upkeepTimer = systemClock.setInterval(() => void this.upkeep.run(), upkeepIntervalMs, { unref: true });
    const started = systemClock.nowMs();
    while (!this.stopped && systemClock.nowMs() - started < waitMs) {
      await this.upkeep.run();
      if (this.isReady() && this.upkeep.gatewayCaSynced) return true;
      await pollRaft(this.options.tuning.tickIntervalMs);
    }
    return false;
  }

  /** Records the REST and gRPC addresses this controller serves on (its member record follows). */
  announce(addresses: { httpPort: number; grpcPort: number }): void {
    this.addresses.restAddr = `${this.options.advertisedHost}:${addresses.httpPort}`;
    this.addresses.grpcAddr = `${this.options.advertisedHost}:${addresses.grpcPort}`;
    void this.upkeep.run();
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
    this.upkeepTimer?.cancel();
    while (this.upkeep.running || this.removal.recovering) await pollRaft(10);
    await this.member.stop();
    this.options.clients.close();
  }

  // ---- reads ----

  cluster(): ClusterRecord {
    return clusterRecordView(this.requireMeta(), this.options.machine, this.nodeId, this.leaderId());
  }

  members(): { members: Member[] } {
    this.requireMeta();
    return memberListView(this.options.machine, this.leaderId());
  }

  listJoinTokens(): { tokens: JoinToken[] } {
    this.requireMeta();
    return joinTokenListView(this.options.machine, this.options.clock.nowMs());
  }

  /** Current singleton holders: leases not yet expired by this controller's clock. */
  leases(): LeaseList {
    this.requireMeta();
    return leaseListView(this.options.machine, this.options.clock.nowMs());
  }

  configVersions(): ConfigVersionList {
    this.requireMeta();
    return configVersionListView(this.options.machine);
  }

  /** The active cluster-shared config as applied here (version null: none yet); no meta needed. */
  activeConfig(): { version: number | null; config: Readonly<Record<string, unknown>> } {
    const version = this.options.machine.activeConfigVersion();
    const record = version === null ? undefined : this.options.machine.configVersions().find((v) => v.version === version);
    return { version, config: record?.config ?? {} };
  }

  /** Calls `listener` whenever the active config version applied here changes; returns the unsubscribe. */
  onConfigChange(listener: (active: { version: number | null; config: Readonly<Record<string, unknown>> }) => void): () => void {
    let seen = this.options.machine.activeConfigVersion();
    return this.options.machine.onChange(() => {
      const now = this.options.machine.activeConfigVersion();
      if (now === seen) return;
      seen = now;
      listener(this.activeConfig());
    });
  }

  /** Waits (bounded) until this controller applied the log up to `index`. */
  waitApplied(index: number): Promise<void> {
    return this.writes.waitApplied(index);
  }

  // ---- writes ----

  /** Issues a join token carrying `joinAddrs`; the value is returned here only. */
  issueJoinToken(input: { joinAddrs: readonly string[]; ttlSeconds?: number; label?: string }, by: string): Promise<CreatedJoinToken> {
    return this.whenReady(() => this.joinTokens.issue(input, by));
  }

  /** Revokes an ACTIVE join token. */
  revokeJoinToken(jti: string, by: string): Promise<JoinToken> {
    return this.whenReady(() => this.joinTokens.revoke(jti, by));
  }

  /** Rotates the seed secret: every outstanding join token becomes invalid. */
  rotateSeed(by: string): Promise<SeedRotation> {
    return this.whenReady(() => this.joinTokens.rotateSeed(by));
  }

  /** Removes another member from the Raft group (it is meant to be gone for good). */
  ejectMember(nodeId: string, reason: string, by: string): Promise<Ejection> {
    return this.whenReady(() => this.removal.eject(nodeId, reason, by));
  }

  /**
   * Leaves the cluster: a leader first hands leadership to another voter; the removal is then
   * committed and the controller shuts down (through `onLeft`) once the answer is sent.
   */
  leave(by: string): Promise<LeaveResponse> {
    return this.whenReady(() => this.removal.leave(by));
  }

  /** Recovery after the quorum is lost (see {@link MemberRemoval.recover}). */
  recover(eject: readonly string[], reason: string, by: string, probeTimeoutMs: number): Promise<RecoveryResult> {
    return this.whenReady(() => this.removal.recover(eject, reason, by, probeTimeoutMs));
  }

  /**
   * Runs `fn` while this controller holds the singleton lease `name`; false without running it
   * when another controller holds it or Raft cannot commit. See {@link SingletonLeases}.
   */
  runUnderLease(name: string, ttlMs: number, fn: (lease: HeldLease) => Promise<void> | void): Promise<boolean> {
    return this.singletonLeases.runUnderLease(name, ttlMs, fn);
  }

  /** Applies `command` through the leader; the raw result, for callers that map refusals themselves. */
  commit<T>(command: UnstampedCommand, timeoutMs = this.options.tuning.commitTimeoutMs): Promise<AppliedCommand<T>> {
    return this.writes.commit<T>(command, timeoutMs);
  }

  /** Proposes `command` on this controller, which must lead: the leader's clock stamps it. */
  proposeAsLeader(command: UnstampedCommand): Promise<AppliedCommand> {
    return this.writes.proposeAsLeader(command);
  }

  /** Commits a membership change through the leader. */
  changeMembership(request: MembershipRequest, timeoutMs = this.options.tuning.commitTimeoutMs): Promise<void> {
    return this.writes.changeMembership(request, timeoutMs);
  }

  /** Proposes a membership change on this controller, which must lead. */
  changeMembershipAsLeader(request: MembershipRequest): Promise<void> {
    return this.writes.changeMembershipAsLeader(request);
  }

  /** Issues a certificate for a member with the cluster CA (the Raft-held material). */
  issueMemberCertificate(nodeId: string, hosts: readonly string[]): CertificateAndKey {
    const material = this.options.machine.material();
    assert(material, "cluster material is known once the meta is stamped");
    return issueNodeCertificate({ certPem: material.caCertPem, keyPem: material.caKeyPem }, { nodeId, hosts, clock: this.options.clock });
  }

  /** Applies `command` on this controller, which must lead (a write relayed by another member); 409 NOT_LEADER otherwise. */
  commitOnLeader(command: UnstampedCommand): Promise<AppliedCommand> {
    return this.writes.commitOnLeader(command);
  }

  /** Commits a membership change on this controller, which must lead; 409 NOT_LEADER otherwise. */
  changeMembershipOnLeader(request: MembershipRequest): Promise<void> {
    return this.writes.changeMembershipOnLeader(request);
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

  // ---- internals ----

  private requireMeta() {
    const meta = this.options.machine.meta();
    if (!meta) throw clusterNotReady();
    return meta;
  }

  /** Runs `write` once the cluster meta is stamped; 409 CLUSTER_NOT_READY (as a rejection) before. */
  private async whenReady<T>(write: () => Promise<T>): Promise<T> {
    this.requireMeta();
    return write();
  }

  /** Wait for the local log to be applied, then campaign when this controller is the only voter. */
  private async campaignIfSoleVoter(waitMs: number): Promise<void> {
    const host = this.member.host;
    const started = systemClock.nowMs();
    while (host.applied() < host.status().hardState.commit && systemClock.nowMs() - started < waitMs) await pollRaft(5);
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
    nextTurn(() => this.options.onLeft());
  }
}
