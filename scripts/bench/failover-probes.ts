// What the failover benchmark watches after a kill, each as a poll with a deadline that answers
// the wall-clock time (ms) at which the condition was first seen, or null when the deadline
// passed: a new Raft leader reported by a survivor, a Raft write accepted, the group lease held by
// another controller under a higher fencing token, a daemon's node ONLINE again through another
// controller. A sampler of the group's server processes counts instance ids seen running twice.
import type { Redis } from "ioredis";
import type { ClusterMemberProcess } from "../../test/e2e/cluster-harness.js";
import { serverProcessesOf } from "./failover-fleet.js";

/** Time between two reads of Redis (cheap: one GET). */
export const KV_POLL_MS = 25;
/** Time between two rounds of REST reads on the survivors. */
export const REST_POLL_MS = 50;
/** Time between two scans of /proc for the group's server processes. */
export const PROCESS_SAMPLE_MS = 200;
/** Pause between two refused Raft write attempts on one controller. */
const WRITE_RETRY_PAUSE_MS = 50;
/** Attempts to revoke a join token issued by the write probe. */
const REVOKE_ATTEMPTS_MAX = 20;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Calls `check` every `pollMs` until it answers non-null; a throwing check counts as not yet. */
export async function pollUntil<T>(check: () => Promise<T | null>, timeoutMs: number, pollMs: number): Promise<{ value: T; atMs: number } | null> {
  const deadlineMs = Date.now() + timeoutMs;
  for (;;) {
    try {
      const value = await check();
      if (value !== null) return { value, atMs: Date.now() };
    } catch {
      // not answering yet
    }
    if (Date.now() > deadlineMs) return null;
    await sleep(pollMs);
  }
}

/** The group lease as stored: a claim in progress has no token yet. */
export interface LeaseValue {
  controllerId: string;
  fencingToken: number | null;
}

export const groupLeaseKey = (group: string) => `cloud:v1:lease:group:${group}`;
export const nodeSessionKey = (nodeId: string) => `cloud:v1:session:node:${nodeId}`;

export async function readLease(redis: Redis, group: string): Promise<LeaseValue | null> {
  const value = await redis.get(groupLeaseKey(group));
  if (value === null) return null;
  const [controllerId, token] = value.split("|");
  return { controllerId, fencingToken: /^[1-9][0-9]*$/.test(token ?? "") ? Number(token) : null };
}

/** The controller id the node's session entry names, or null without an entry. */
export async function readSessionHolder(redis: Redis, nodeId: string): Promise<string | null> {
  const value = await redis.get(nodeSessionKey(nodeId));
  if (value === null) return null;
  return (JSON.parse(value) as { controllerId: string }).controllerId;
}

export interface MemberView {
  nodeId: string;
  role: string;
  leader: boolean;
}

export async function membersSeenBy(member: ClusterMemberProcess): Promise<MemberView[]> {
  const reply = await member.call("GET", "/api/v1/cluster/members");
  if (reply.status !== 200) throw new Error(`members on ${member.name}: ${reply.status}`);
  return reply.json.members as MemberView[];
}

/** The first survivor report of a leader other than `victimId`: its id. */
export async function newLeaderProbe(survivors: readonly ClusterMemberProcess[], victimId: string, timeoutMs: number) {
  return pollUntil(
    async () => {
      const views = await Promise.allSettled(survivors.map(membersSeenBy));
      for (const view of views) {
        if (view.status !== "fulfilled") continue;
        const leader = view.value.find((m) => m.leader);
        if (leader && leader.nodeId !== victimId) return leader.nodeId;
      }
      return null;
    },
    timeoutMs,
    REST_POLL_MS,
  );
}

/** The outcome of the write probe. */
export interface WriteProbeResult {
  /** When the first join token was issued; null when none was before the deadline. */
  atMs: number | null;
  /** Attempts answered with something else than 201, by status ("error": no answer). */
  refused: Record<string, number>;
  issued: number;
  revoked: number;
}

/**
 * Issues join tokens on every survivor, one attempt at a time per survivor, until one is issued
 * (a Raft commit through the leader); then revokes what was issued. At most one token per survivor.
 */
export async function raftWriteProbe(survivors: readonly ClusterMemberProcess[], timeoutMs: number): Promise<WriteProbeResult> {
  const deadlineMs = Date.now() + timeoutMs;
  const result: WriteProbeResult = { atMs: null, refused: {}, issued: 0, revoked: 0 };
  const issued: { member: ClusterMemberProcess; jti: string }[] = [];
  const attempt = async (member: ClusterMemberProcess) => {
    while (result.atMs === null && Date.now() < deadlineMs) {
      let status = "error";
      try {
        const reply = await member.call("POST", "/api/v1/cluster/join-tokens", { joinAddrs: [member.grpcAddr], ttlSeconds: 600, label: "failover-bench" });
        status = String(reply.status);
        if (reply.status === 201) {
          result.atMs ??= Date.now();
          issued.push({ member, jti: reply.json.jti as string });
          return;
        }
      } catch {
        // no answer: counted as "error"
      }
      result.refused[status] = (result.refused[status] ?? 0) + 1;
      await sleep(WRITE_RETRY_PAUSE_MS);
    }
  };
  await Promise.all(survivors.map(attempt));
  result.issued = issued.length;
  for (const { member, jti } of issued) {
    for (let i = 0; i < REVOKE_ATTEMPTS_MAX; i++) {
      const reply = await member.call("DELETE", `/api/v1/cluster/join-tokens/${jti}`).catch(() => null);
      if (reply?.status === 204) {
        result.revoked++;
        break;
      }
      await sleep(250);
    }
  }
  return result;
}

/** The lease held (granted, not a claim) by another controller than `victimId` under a higher token. */
export async function leaseTakeoverProbe(redis: Redis, group: string, victimId: string, tokenBefore: number, timeoutMs: number) {
  return pollUntil(
    async () => {
      const lease = await readLease(redis, group);
      return lease && lease.controllerId !== victimId && lease.fencingToken !== null && lease.fencingToken > tokenBefore ? lease : null;
    },
    timeoutMs,
    KV_POLL_MS,
  );
}

/** The outcome of the reconnect probe of one node. */
export interface ReconnectResult {
  nodeId: string;
  /** The session entry names another controller. */
  sessionAtMs: number | null;
  /** That controller's record of the node: ONLINE, connected after the kill. */
  onlineAtMs: number | null;
  controllerId: string | null;
}

/**
 * For a node whose stream the victim held: first the session entry naming another controller,
 * then that controller answering the node ONLINE with a connection time after the kill.
 */
export async function reconnectProbe(
  redis: Redis,
  nodeId: string,
  victimId: string,
  killedAtMs: number,
  memberById: (controllerId: string) => ClusterMemberProcess | undefined,
  timeoutMs: number,
): Promise<ReconnectResult> {
  const deadlineMs = Date.now() + timeoutMs;
  const session = await pollUntil(
    async () => {
      const holder = await readSessionHolder(redis, nodeId);
      return holder !== null && holder !== victimId ? holder : null;
    },
    timeoutMs,
    KV_POLL_MS,
  );
  if (session === null) return { nodeId, sessionAtMs: null, onlineAtMs: null, controllerId: null };
  const online = await pollUntil(
    async () => {
      const member = memberById(session.value);
      if (!member?.process) return null;
      const reply = await member.call("GET", `/api/v1/nodes/${nodeId}`);
      const node = reply.json as { state?: string; connectedAt?: string | null };
      return reply.status === 200 && node.state === "ONLINE" && node.connectedAt && Date.parse(node.connectedAt) >= killedAtMs ? true : null;
    },
    Math.max(0, deadlineMs - Date.now()),
    REST_POLL_MS,
  );
  return { nodeId, sessionAtMs: session.atMs, onlineAtMs: online?.atMs ?? null, controllerId: session.value };
}

/**
 * Scans the group's server processes every {@link PROCESS_SAMPLE_MS} while started and remembers
 * every instance id seen with more than one process at the same moment.
 */
export class TwiceRunningSampler {
  private twice = new Set<string>();
  private samples = 0;
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly group: string) {}

  start(): void {
    this.timer ??= setInterval(() => this.sample(), PROCESS_SAMPLE_MS);
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** Ids seen running twice and the number of scans since the last call. */
  take(): { twice: string[]; samples: number } {
    this.sample();
    const taken = { twice: [...this.twice].sort(), samples: this.samples };
    this.twice = new Set();
    this.samples = 0;
    return taken;
  }

  private sample(): void {
    this.samples++;
    for (const [id, pids] of serverProcessesOf(this.group)) if (pids.length > 1) this.twice.add(id);
  }
}
