// The system the failover benchmark kills parts of: a PostgreSQL and a Redis of its own, three
// controller processes on the production profile joined into one Raft cluster with join tokens
// (test/e2e/cluster-harness.ts), node daemons that know every controller (two unless `daemons`
// says otherwise; failover-daemon.ts) and one group of the `simulated` platform. Everything listens on 127.0.0.1
// on ports picked at start. `close` stops every process this module started and removes every
// directory it created, whatever state the start or the run left behind.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { stringify as toYaml } from "yaml";
import { ClusterHarness, type ClusterMemberProcess } from "../../test/e2e/cluster-harness.js";
import { eventually } from "../../test/support/wait.js";
import { startPostgresServer, type PostgresServer } from "../../test/support/postgres-server.js";
import { startRedisServer, type RedisServer } from "../../test/support/redis-server.js";

const ROOT_DIR = join(import.meta.dirname, "..", "..");
const DAEMON_ENTRY = "scripts/bench/failover-daemon.ts";
/** A daemon stops its instances within the slowest platform's stop sequence (20 s) and a margin. */
const DAEMON_STOP_TIMEOUT_MS = 30_000;
/** Daemon output kept for a failure report (the tail). */
const DAEMON_OUTPUT_KEPT_CHARS_MAX = 200_000;
/** Ports of the group's range; every instance of both daemons (one host) takes its own. */
const GROUP_PORTS_COUNT = 100;
/** Where a free block of group ports is looked for: below Linux's ephemeral port range. */
// Above the fixed port ranges the e2e tests use (up to 29100) and below the kernel's ephemeral ports
// (32768 and up: hundreds of servers' connections take those), so a bench and a test run side by side.
const GROUP_PORTS_SEARCH = { first: 30_200, last: 32_700 } as const;
const SETUP_WAIT_MS = 180_000;

/** What the fleet is started with. */
export interface FleetOptions {
  /** scheduler.evaluationIntervalSeconds of every controller; the group lease TTL is twice this. */
  evaluationIntervalSeconds: number;
  /** scheduler.reconcileIntervalSeconds of every controller; the controllers' default (30) when unset. */
  reconcileIntervalSeconds?: number;
  /** Instances of the group (min = max). */
  instances: number;
  /** Daemon reconnect back-off: first delay and cap. */
  daemonReconnectDelayMinMs: number;
  daemonReconnectDelayMaxMs: number;
  log: (line: string) => void;
  /** Node daemons (default 2); each starts on a different controller and knows all three. */
  daemons?: number;
  /** maxMemoryMb each daemon offers (default 4096). */
  daemonMaxMemoryMb?: number;
  /** Ports of the group's range (default 100); every instance of every daemon (one host) takes its own. */
  groupPortsCount?: number;
  /** Fields of the group's create body besides name, platform, ports and the instance counts (they override those defaults). */
  group?: Record<string, unknown>;
  /** The controllers' `deployments` section (the controllers' defaults when unset). */
  deployments?: { reconcileIntervalSeconds?: number; leaseTtlSeconds?: number };
  /** How the daemons' `simulated` platform is ready: the plugin's ready call (default) or the `Done (` console line. */
  simulatedReadiness?: "plugin" | "log-line";
  /** Prefix of the group's name (default `failover`). */
  groupPrefix?: string;
}

/** One `failover-daemon.ts` child. */
export interface DaemonChild {
  child: ChildProcess;
  dir: string;
  output(): string;
  stop(): Promise<void>;
}

/** A simulated server process of the group. */
export type ServerProcesses = Map<string, number[]>;

/** Every process whose environment names `group` as CLOUD_GROUP, by CLOUD_INSTANCE_ID. */
export function serverProcessesOf(group: string): ServerProcesses {
  const byId: ServerProcesses = new Map();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    let environ: string[];
    try {
      environ = readFileSync(`/proc/${entry}/environ`, "utf8").split("\0");
    } catch {
      continue;
    }
    if (!environ.includes(`CLOUD_GROUP=${group}`)) continue;
    const id = environ.find((v) => v.startsWith("CLOUD_INSTANCE_ID="))?.slice("CLOUD_INSTANCE_ID=".length);
    if (id) byId.set(id, [...(byId.get(id) ?? []), Number(entry)]);
  }
  return byId;
}

function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });
}

/** The first block of `count` consecutive free loopback ports in the search range. */
async function freePortBlock(count: number): Promise<{ start: number; end: number }> {
  for (let start = GROUP_PORTS_SEARCH.first; start + count - 1 <= GROUP_PORTS_SEARCH.last; start += count) {
    let free = true;
    for (let port = start; port < start + count && free; port++) free = await portIsFree(port);
    if (free) return { start, end: start + count - 1 };
  }
  throw new Error(`no ${count} consecutive free ports between ${GROUP_PORTS_SEARCH.first} and ${GROUP_PORTS_SEARCH.last}`);
}

function spawnDaemonChild(controllers: string[], token: string, options: FleetOptions): DaemonChild {
  const dir = mkdtempSync(join(tmpdir(), "bench-failover-daemon-"));
  const configPath = join(dir, "daemon.yml");
  writeFileSync(
    configPath,
    toYaml({
      controllers,
      token,
      workDir: join(dir, "work"),
      dataDir: join(dir, "data"),
      maxMemoryMb: options.daemonMaxMemoryMb ?? 4096,
      reconnectDelayMinMs: options.daemonReconnectDelayMinMs,
      reconnectDelayMaxMs: options.daemonReconnectDelayMaxMs,
    }),
  );
  const child = spawn(process.execPath, ["--import", "tsx", DAEMON_ENTRY], {
    cwd: ROOT_DIR,
    env: { ...process.env, CLOUD_DAEMON_CONFIG: configPath, BENCH_SIMULATED_READINESS: options.simulatedReadiness ?? "plugin" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  // SIGKILL would leave the daemon's servers behind; `close` sweeps them in that case.
  const killOnParentExit = () => child.kill("SIGKILL");
  process.once("exit", killOnParentExit);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  void exited.then(() => process.off("exit", killOnParentExit));
  let output = "";
  const append = (chunk: Buffer) => {
    output = (output + chunk.toString("utf8")).slice(-DAEMON_OUTPUT_KEPT_CHARS_MAX);
  };
  child.stdout!.on("data", append);
  child.stderr!.on("data", append);
  const alive = () => child.exitCode === null && child.signalCode === null;
  return {
    child,
    dir,
    output: () => output,
    stop: async () => {
      if (alive()) {
        child.kill("SIGTERM");
        const timer = setTimeout(() => child.kill("SIGKILL"), DAEMON_STOP_TIMEOUT_MS);
        await exited;
        clearTimeout(timer);
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Figures of the teardown. */
export interface CloseReport {
  /** Simulated servers of the group still alive after the daemons stopped (killed then). */
  serversLeft: number;
}

/** The three controllers, the stores, the daemons and the group; see the file comment. */
export class FailoverFleet {
  readonly group: string;
  readonly members: ClusterMemberProcess[] = [];
  readonly daemons: DaemonChild[] = [];
  /** Raft node id (= the controller id in leases and sessions) by member name. */
  readonly controllerIds = new Map<string, string>();
  nodeIds: string[] = [];
  redis!: Redis;
  private postgresServer: PostgresServer | null = null;
  private redisServer: RedisServer | null = null;
  private harness: ClusterHarness | null = null;
  private closing: Promise<CloseReport> | null = null;

  constructor(readonly options: FleetOptions) {
    this.group = `${options.groupPrefix ?? "failover"}-${process.pid.toString(36)}${Date.now().toString(36).slice(-4)}`;
  }

  get leaseTtlMs(): number {
    return 2 * this.options.evaluationIntervalSeconds * 1000;
  }

  running(): ClusterMemberProcess[] {
    return this.members.filter((m) => m.process !== null);
  }

  memberById(controllerId: string): ClusterMemberProcess | undefined {
    return this.members.find((m) => this.controllerIds.get(m.name) === controllerId);
  }

  idOf(member: ClusterMemberProcess): string {
    const id = this.controllerIds.get(member.name);
    if (id === undefined) throw new Error(`no controller id known for ${member.name}`);
    return id;
  }

  async start(): Promise<void> {
    const { log } = this.options;
    [this.postgresServer, this.redisServer] = await Promise.all([startPostgresServer(), startRedisServer()]);
    this.redis = new Redis(this.redisServer.uri, { maxRetriesPerRequest: 2 });
    log(`PostgreSQL and Redis up (${this.redisServer.uri})`);
    this.harness = new ClusterHarness({
      runtime: { profile: "production" },
      database: { uri: this.postgresServer.uri },
      kvstore: { uri: this.redisServer.uri },
      scheduler: {
        evaluationIntervalSeconds: this.options.evaluationIntervalSeconds,
        ...(this.options.reconcileIntervalSeconds !== undefined ? { reconcileIntervalSeconds: this.options.reconcileIntervalSeconds } : {}),
      },
      ...(this.options.deployments ? { deployments: this.options.deployments } : {}),
    });
    const a = await this.harness.start("a");
    this.members.push(a);
    await this.learnId(a);
    const b = await this.harness.start("b", { joinToken: await this.harness.joinToken(a, [a]) });
    this.members.push(b);
    await this.learnId(b);
    const c = await this.harness.start("c", { joinToken: await this.harness.joinToken(b, [a, b]) });
    this.members.push(c);
    await this.learnId(c);
    log(`controllers up: ${this.members.map((m) => `${m.name}=${this.idOf(m)} http ${m.httpPort} grpc ${m.grpcPort} raft ${m.raftPort}`).join(", ")}`);

    const addresses = this.members.map((m) => m.grpcAddr);
    const daemonCount = this.options.daemons ?? 2;
    for (let i = 0; i < daemonCount; i++) {
      const reply = await a.call("POST", "/api/v1/admin/tokens", {});
      if (reply.status !== 201) throw new Error(`node token: ${reply.status} ${reply.text}`);
      // Each daemon starts on a different controller; both know all three.
      const first = (i + 1) % addresses.length;
      this.daemons.push(spawnDaemonChild([...addresses.slice(first), ...addresses.slice(0, first)], reply.json.token as string, this.options));
    }
    const nodes = await eventually(
      async () => {
        const list = (await a.call("GET", "/api/v1/nodes?state=ONLINE")).json as { id: string }[];
        return list.length === daemonCount ? list : null;
      },
      `${daemonCount} nodes ONLINE`,
      SETUP_WAIT_MS,
    );
    this.nodeIds = nodes.map((n) => n.id).sort();
    log(`daemons up: nodes ${this.nodeIds.join(", ")}`);

    const portRange = await freePortBlock(this.options.groupPortsCount ?? GROUP_PORTS_COUNT);
    const created = await a.call("POST", "/api/v1/groups", {
      name: this.group,
      platform: "simulated",
      minInstances: this.options.instances,
      maxInstances: this.options.instances,
      memoryMb: 64,
      portRange,
      ...this.options.group,
    });
    if (created.status !== 201) throw new Error(`group: ${created.status} ${created.text}`);
    log(`group ${this.group} created (${this.options.instances} instances, ports ${portRange.start}-${portRange.end})`);
  }

  private async learnId(member: ClusterMemberProcess): Promise<void> {
    const reply = await member.call("GET", "/api/v1/cluster");
    if (reply.status !== 200) throw new Error(`cluster record of ${member.name}: ${reply.status} ${reply.text}`);
    this.controllerIds.set(member.name, reply.json.nodeId as string);
  }

  async kill(member: ClusterMemberProcess): Promise<void> {
    await this.harness!.kill9(member);
    member.process = null;
  }

  async restart(member: ClusterMemberProcess): Promise<void> {
    await this.harness!.launch(member);
  }

  /** Stops everything (once; later calls wait for the first). */
  close(): Promise<CloseReport> {
    this.closing ??= this.closeNow();
    return this.closing;
  }

  private async closeNow(): Promise<CloseReport> {
    await Promise.all(this.daemons.map((d) => d.stop().catch(() => undefined)));
    const left = serverProcessesOf(this.group);
    for (const pids of left.values()) {
      for (const pid of pids) {
        try {
          process.kill(pid, "SIGKILL");
        } catch {
          // already gone
        }
      }
    }
    await this.harness?.close().catch(() => undefined);
    this.redis?.disconnect();
    await this.redisServer?.stop().catch(() => undefined);
    await this.postgresServer?.stop().catch(() => undefined);
    return { serversLeft: [...left.values()].reduce((n, pids) => n + pids.length, 0) };
  }
}
