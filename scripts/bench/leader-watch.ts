// Three controllers on the production profile (a PostgreSQL and a Redis of their own, one Raft
// cluster joined with join tokens through test/e2e/cluster-harness.ts, the Raft timing a controller
// uses by default) and what watches their leadership from outside while work runs on the leader:
//
// - LeaderSampler: GET /api/v1/cluster on every controller every `intervalMs`; each answer's
//   `leaderId` is one sample, and a sample naming another leader than the previous one of the same
//   controller (or none) is a change;
// - raftTermOf: the Raft term a controller has made durable, read from a copy of its Raft log
//   directory (the term is not on the REST API; LevelDB cannot be opened twice, so the directory
//   is copied and the copy opened with the controller's own LevelStorage);
// - LoopDelayScraper: GET /metrics of one controller every `intervalMs`; prom-client's
//   nodejs_eventloop_lag_max_seconds covers the time since the previous scrape (its histogram,
//   10 ms resolution, is reset at every scrape), so the largest of all scrapes is the loop's max
//   over the run, and their 99th percentile says how long the loop stood still at most in 99 of
//   100 windows. (The gauge's p99 of one window of about 10 measurements is its max, so it is not
//   read.)
import { access, cp, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { ClusterIdentityStore } from "../../src/cluster/identity/cluster-identity.js";
import { LevelStorage } from "../../src/cluster/raft-host/level-storage.js";
import { ClusterHarness, type ClusterMemberProcess } from "../../test/e2e/cluster-harness.js";
import { eventually } from "../../test/support/wait.js";
import { startPostgresServer, type PostgresServer } from "../../test/support/postgres-server.js";
import { startRedisServer, type RedisServer } from "../../test/support/redis-server.js";
import { membersSeenBy } from "./failover-probes.js";

/** Attempts to copy a Raft log directory that LevelDB is changing (a compaction can remove a file mid-copy). */
const TERM_READ_ATTEMPTS_MAX = 5;

/** Three production controllers, their stores and Raft node ids; `close` stops and removes everything. */
export interface ProductionTrio {
  readonly members: readonly ClusterMemberProcess[];
  /** Raft node id by member name. */
  readonly ids: ReadonlyMap<string, string>;
  memberById(nodeId: string): ClusterMemberProcess | undefined;
  close(): Promise<void>;
}

/** Starts PostgreSQL, Redis and three controllers a, b, c (b joins through a, c through a and b). */
export async function startProductionTrio(log: (line: string) => void = () => {}): Promise<ProductionTrio> {
  let postgres: PostgresServer | null = null;
  let redis: RedisServer | null = null;
  let harness: ClusterHarness | null = null;
  const close = async () => {
    await harness?.close().catch(() => undefined);
    await redis?.stop().catch(() => undefined);
    await postgres?.stop().catch(() => undefined);
  };
  try {
    [postgres, redis] = await Promise.all([startPostgresServer(), startRedisServer()]);
    log("PostgreSQL and Redis up");
    harness = new ClusterHarness({ runtime: { profile: "production" }, database: { uri: postgres.uri }, kvstore: { uri: redis.uri } });
    const a = await harness.start("a");
    log("controller a up");
    const b = await harness.start("b", { joinToken: await harness.joinToken(a, [a]) });
    log("controller b up");
    const c = await harness.start("c", { joinToken: await harness.joinToken(b, [a, b]) });
    log("controller c up");
    const members = [a, b, c];
    const ids = new Map<string, string>();
    for (const m of members) {
      const reply = await m.call("GET", "/api/v1/cluster");
      if (reply.status !== 200) throw new Error(`cluster record of ${m.name}: ${reply.status} ${reply.text}`);
      ids.set(m.name, reply.json.nodeId as string);
    }
    return { members, ids, memberById: (nodeId) => members.find((m) => ids.get(m.name) === nodeId), close };
  } catch (err) {
    await close();
    throw err;
  }
}

/** The leader every controller names, with three voters in every view; null while they disagree. */
export async function agreedLeader(members: readonly ClusterMemberProcess[]): Promise<string | null> {
  const views = await Promise.all(members.map(membersSeenBy));
  const leaders = new Set(
    views.map((v) =>
      v
        .filter((m) => m.leader)
        .map((m) => m.nodeId)
        .join(","),
    ),
  );
  const stable = views.every((v) => v.length === 3 && v.every((m) => m.role === "voter"));
  const [leader] = leaders;
  return stable && leaders.size === 1 && leader !== "" && !leader.includes(",") ? leader : null;
}

/** Waits until the three controllers agree on one leader; answers its node id. */
export function waitForAgreedLeader(members: readonly ClusterMemberProcess[], timeoutMs = 60_000): Promise<string> {
  return eventually(() => agreedLeader(members), "one leader seen by all three controllers", timeoutMs);
}

/** The Raft term `member` has made durable (its hard state), from a copy of its Raft log directory. */
export async function raftTermOf(member: ClusterMemberProcess): Promise<number> {
  const source = new ClusterIdentityStore(join(member.dataDir, "raft")).logDir;
  let lastError: unknown;
  for (let attempt = 1; attempt <= TERM_READ_ATTEMPTS_MAX; attempt++) {
    const copy = await mkdtemp(join(tmpdir(), "cloud-raft-term-"));
    try {
      await cp(source, copy, { recursive: true, filter: (path) => !path.endsWith("/LOCK") });
      await access(join(copy, "CURRENT")); // not a LevelDB directory otherwise (opening it would create an empty one)
      const storage = await LevelStorage.open(copy);
      try {
        return storage.initialState().hardState.term;
      } finally {
        await storage.close();
      }
    } catch (err) {
      lastError = err;
    } finally {
      await rm(copy, { recursive: true, force: true });
    }
  }
  throw new Error(`the Raft term of ${member.name} could not be read: ${String(lastError)}`);
}

/** The terms of every member, by member name. */
export async function raftTerms(members: readonly ClusterMemberProcess[]): Promise<Record<string, number>> {
  const terms = await Promise.all(members.map(raftTermOf));
  return Object.fromEntries(members.map((m, i) => [m.name, terms[i]!]));
}

/** One answer (or failure) of GET /api/v1/cluster. */
export interface LeaderSample {
  atMs: number;
  member: string;
  /** The leader the member named; null when it named none; undefined when it did not answer. */
  leaderId: string | null | undefined;
}

/** What the leader samples say. */
export interface LeaderSummary {
  samples: number;
  /** Samples without an answer. */
  failed: number;
  /** Answers naming no leader. */
  withoutLeader: number;
  /** Answers naming another leader (or none) than the previous answer of the same member. */
  changes: number;
  /** Every leader id named. */
  leaders: string[];
}

/** Samples every member's view of the leader; see the module comment. */
export class LeaderSampler {
  readonly samples: LeaderSample[] = [];
  private running = true;
  private readonly loop: Promise<void>;

  constructor(
    private readonly members: readonly ClusterMemberProcess[],
    intervalMs: number,
  ) {
    this.loop = (async () => {
      while (this.running) {
        const started = Date.now();
        await Promise.all(this.members.map((m) => this.sample(m)));
        await sleep(Math.max(0, intervalMs - (Date.now() - started)));
      }
    })();
  }

  private async sample(member: ClusterMemberProcess): Promise<void> {
    let leaderId: string | null | undefined;
    try {
      const reply = await member.call("GET", "/api/v1/cluster");
      leaderId = reply.status === 200 ? ((reply.json.leaderId as string | null) ?? null) : undefined;
    } catch {
      leaderId = undefined;
    }
    this.samples.push({ atMs: Date.now(), member: member.name, leaderId });
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
  }

  /** The summary of the samples taken from `fromMs` to `toMs` (all by default). */
  summary(fromMs = 0, toMs = Infinity): LeaderSummary {
    const last = new Map<string, string | null>();
    const leaders = new Set<string>();
    let samples = 0;
    let failed = 0;
    let withoutLeader = 0;
    let changes = 0;
    for (const s of this.samples) {
      if (s.leaderId === undefined) {
        if (s.atMs >= fromMs && s.atMs <= toMs) {
          samples++;
          failed++;
        }
        continue;
      }
      const previous = last.get(s.member);
      last.set(s.member, s.leaderId);
      if (s.atMs < fromMs || s.atMs > toMs) continue;
      samples++;
      if (s.leaderId === null) withoutLeader++;
      else leaders.add(s.leaderId);
      if (previous !== undefined && previous !== s.leaderId) changes++;
    }
    return { samples, failed, withoutLeader, changes, leaders: [...leaders].sort() };
  }
}

/** One scrape of the loop delay gauge: the largest delay since the previous scrape, in ms. */
export interface LoopDelaySample {
  atMs: number;
  maxMs: number;
}

function gauge(text: string, name: string): number | null {
  const line = text.split("\n").find((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`));
  if (line === undefined) return null;
  const value = Number(line.slice(line.lastIndexOf(" ") + 1));
  return Number.isFinite(value) ? value : null;
}

/** The loop delay over some scrapes, in ms. */
export interface LoopDelaySummary {
  scrapes: number;
  /** Percentiles of the windows' max delays. */
  windowMaxP50Ms: number;
  windowMaxP99Ms: number;
  maxMs: number;
}

/** Reads the loop delay of the controller at `url` from its /metrics; see the module comment. */
export class LoopDelayScraper {
  readonly samples: LoopDelaySample[] = [];
  failures = 0;
  private running = true;
  private readonly loop: Promise<void>;

  private constructor(
    private readonly url: string,
    intervalMs: number,
  ) {
    this.loop = (async () => {
      while (this.running) {
        const started = Date.now();
        await this.scrape();
        await sleep(Math.max(0, intervalMs - (Date.now() - started)));
      }
    })();
  }

  /** Starts scraping after one scrape that resets the histogram; null when /metrics has no loop delay gauges. */
  static async start(url: string, intervalMs: number): Promise<LoopDelayScraper | null> {
    const res = await fetch(`${url}/metrics`);
    const text = await res.text();
    if (res.status !== 200 || gauge(text, "nodejs_eventloop_lag_max_seconds") === null) return null;
    return new LoopDelayScraper(url, intervalMs);
  }

  private async scrape(): Promise<void> {
    try {
      const text = await (await fetch(`${this.url}/metrics`)).text();
      const max = gauge(text, "nodejs_eventloop_lag_max_seconds");
      if (max === null) throw new Error("no loop delay gauge");
      this.samples.push({ atMs: Date.now(), maxMs: max * 1000 });
    } catch {
      this.failures++;
    }
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
  }

  /**
   * Over the scrapes answered from `fromMs` to `toMs`: the 50th and 99th percentile of the windows'
   * max delays, and the largest (the loop's max delay then). A window lands where its scrape answered.
   */
  summary(fromMs = 0, toMs = Infinity): LoopDelaySummary {
    const maxima = this.samples
      .filter((s) => s.atMs >= fromMs && s.atMs <= toMs)
      .map((s) => s.maxMs)
      .sort((a, b) => a - b);
    const at = (p: number) => (maxima.length === 0 ? Number.NaN : maxima[Math.min(maxima.length - 1, Math.ceil((p / 100) * maxima.length) - 1)]!);
    return { scrapes: maxima.length, windowMaxP50Ms: at(50), windowMaxP99Ms: at(99), maxMs: maxima[maxima.length - 1] ?? Number.NaN };
  }
}
