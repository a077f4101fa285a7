/**
 * The project's Raft (3 raft-kv servers) side by side with etcd 3.4 (3 members), same timing
 * (heartbeat 100 ms, election timeout 1000 ms), same loopback, same Node client harness:
 *   - sequential puts (1 in flight) and 64 in flight, for --duration-s each: ops/s, p50, p99, and
 *     the CPU time the members and the client spent per put;
 *   - leader failover --failovers times: kill -9 the leader (or, with --failover-mode freeze, stop it
 *     with SIGSTOP: its connections stay open, only the election timeout finds it gone), time
 *     until a put to a survivor succeeds; a frozen leader is continued (SIGCONT) afterwards;
 *   - a steady load for --steady-s: the leader must not change.
 * Each system is warmed up first (--warmup-s of load, half sequential, half at --inflight). Both
 * clusters run from the start; the load phases alternate between them in slices of --slice-s
 * (and the failover rounds alternate too), so both see the same background load on a shared
 * machine. Prints one table and a JSON line (`RESULT {...}`). Run through raft-vs-etcd.sh, which
 * installs etcd if missing.
 *
 *   tsx scripts/bench/raft-vs-etcd.ts [--duration-s 10] [--slice-s 2] [--warmup-s 6] [--failovers 5]
 *     [--steady-s 60] [--inflight 64] [--value-bytes 128] [--only raft|etcd] [--raft-tick-ms 100]
 *     [--raft-put-path stream|unary] [--failover-mode kill|freeze] [--failover-only]
 *
 * etcd ticks once per heartbeat interval; raft-kv does the same by default (tick 100 ms, heartbeat
 * 1 tick, election timeout 10 ticks), so both wake up as often. --raft-tick-ms 10 gives raft-kv
 * 10 ms ticks (heartbeat 10, election 100 ticks). etcd is driven through its client's unary `Put`;
 * raft-kv's client sends puts over one stream per member by default (see raft-kv-client.ts), and
 * with --raft-put-path unary through one unary `Put` call each, as etcd.
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { noop } from "cockatiel";
import { Etcd3 } from "etcd3";
import { RaftKvClient } from "./raft-kv-client.js";
import { freeLoopbackPorts, RaftKvCluster } from "./raft-kv-cluster.js";

interface Flags {
  durationS: number;
  failovers: number;
  steadyS: number;
  inflight: number;
  valueBytes: number;
  only: "raft" | "etcd" | null;
  /** raft-kv tick; heartbeat (100 ms) and election timeout (1000 ms) are given in ticks of it. */
  raftTickMs: number;
  /** Length of one turn of a system in the alternating load phases. */
  sliceS: number;
  raftPutPath: "stream" | "unary";
  /** Load before measuring, per system: half of it sequential, half with --inflight workers. */
  warmupS: number;
  /** How the leader is taken away in a failover round: SIGKILL, or SIGSTOP (frozen, sockets open). */
  failoverMode: "kill" | "freeze";
  /** Only the failover rounds: no warm-up, load phases or steady phase. */
  failoverOnly: boolean;
}

function readFlags(argv: readonly string[]): Flags {
  const value = (name: string, fallback: string) => {
    const at = argv.indexOf(`--${name}`);
    return at >= 0 && argv[at + 1] !== undefined ? argv[at + 1]! : fallback;
  };
  const only = value("only", "");
  return {
    durationS: Number(value("duration-s", "10")),
    failovers: Number(value("failovers", "5")),
    steadyS: Number(value("steady-s", "60")),
    inflight: Number(value("inflight", "64")),
    valueBytes: Number(value("value-bytes", "128")),
    only: only === "raft" || only === "etcd" ? only : null,
    raftTickMs: Number(value("raft-tick-ms", "100")),
    sliceS: Number(value("slice-s", "2")),
    raftPutPath: value("raft-put-path", "stream") === "unary" ? "unary" : "stream",
    warmupS: Number(value("warmup-s", "6")),
    failoverMode: value("failover-mode", "kill") === "freeze" ? "freeze" : "kill",
    failoverOnly: argv.includes("--failover-only"),
  };
}

/** What the harness needs from a system under test. */
interface System {
  readonly name: string;
  readonly memberCount: number;
  put(key: string, value: Uint8Array): Promise<void>;
  /** Index of the member that is leader, and the current term; null while there is none. */
  leader(): Promise<{ index: number; term: number } | null>;
  kill(index: number): Promise<void>;
  restart(index: number): Promise<void>;
  /** Sends SIGSTOP or SIGCONT to a member's process. */
  signal(index: number, signal: "SIGSTOP" | "SIGCONT"): void;
  /** One put through a client that only knows the given members; rejects on failure. */
  putVia(members: readonly number[], key: string, value: Uint8Array): Promise<void>;
  /** Process ids of the running members. */
  pids(): number[];
  stop(): Promise<void>;
}

interface LoadResult {
  ops: number;
  opsPerS: number;
  p50Ms: number;
  p99Ms: number;
  errors: number;
  /** CPU time (user + system) of all members together, per put; NaN where /proc is missing. */
  memberCpuMsPerPut: number;
  /** CPU time of the harness process (the client) per put. */
  clientCpuMsPerPut: number;
}

interface SystemResult {
  sequential: LoadResult;
  concurrent: LoadResult;
  failoverMs: number[];
  steady: { seconds: number; ops: number; leaderChanges: number; termBefore: number; termAfter: number };
}

/**
 * Deadline of one put attempt during failover. A follower of etcd holds a put it forwarded to the
 * dead leader until the deadline, so the measured failover is quantised by this value for etcd;
 * raft-kv members answer NOT_LEADER at once and the client retries every ~20 ms.
 */
const failoverPutTimeoutMs = 250;
const heartbeatIntervalMs = 100;
const electionTimeoutMs = 1000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/** Clock ticks per second of /proc/<pid>/stat CPU times. */
const clockTicksPerS = (() => {
  try {
    return Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/** CPU time (user + system) of the given processes, in ms; NaN when it cannot be read. */
function processesCpuMs(pids: readonly number[]): number {
  let ticks = 0;
  for (const pid of pids) {
    try {
      // Fields after the command name: state is field 3, utime 14 and stime 15 (proc(5)).
      const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
      ticks += Number(fields[11]) + Number(fields[12]);
    } catch {
      return NaN;
    }
  }
  return (ticks * 1000) / clockTicksPerS;
}

function harnessCpuMs(): number {
  const usage = process.cpuUsage();
  return (usage.user + usage.system) / 1000;
}

/** A load phase of one system, accumulated over its slices. */
class LoadAccumulator {
  readonly latenciesMs: number[] = [];
  errors = 0;
  elapsedS = 0;
  memberCpuMs = 0;
  clientCpuMs = 0;
  /** Per worker, the number of its next put (keys cycle through 100 per worker). */
  readonly nextPut: number[];

  constructor(readonly inflight: number) {
    this.nextPut = new Array<number>(inflight).fill(0);
  }

  result(): LoadResult {
    const sorted = [...this.latenciesMs].sort((a, b) => a - b);
    const ops = sorted.length;
    return {
      ops,
      opsPerS: ops / this.elapsedS,
      p50Ms: percentile(sorted, 50),
      p99Ms: percentile(sorted, 99),
      errors: this.errors,
      memberCpuMsPerPut: this.memberCpuMs / ops,
      clientCpuMsPerPut: this.clientCpuMs / ops,
    };
  }
}

/** Closed-loop puts by `acc.inflight` workers for `durationS`, added to `acc`. */
async function runLoadSlice(system: System, acc: LoadAccumulator, durationS: number, value: Uint8Array): Promise<void> {
  const pids = system.pids();
  const memberCpuBefore = processesCpuMs(pids);
  const clientCpuBefore = harnessCpuMs();
  const startMs = performance.now();
  const endMs = startMs + durationS * 1000;
  await Promise.all(
    Array.from({ length: acc.inflight }, async (_, worker) => {
      while (performance.now() < endMs) {
        const t0 = performance.now();
        try {
          await system.put(`bench/${worker}/${acc.nextPut[worker]!++ % 100}`, value);
          acc.latenciesMs.push(performance.now() - t0);
        } catch {
          acc.errors += 1;
        }
      }
    }),
  );
  acc.elapsedS += (performance.now() - startMs) / 1000;
  acc.memberCpuMs += processesCpuMs(pids) - memberCpuBefore;
  acc.clientCpuMs += harnessCpuMs() - clientCpuBefore;
}

/**
 * One load phase for every system: turns of `sliceS` each, alternating between the systems (and
 * which goes first), until each has run `durationS`.
 */
async function runLoadPhase(systems: readonly System[], inflight: number, durationS: number, sliceS: number, valueBytes: number): Promise<LoadResult[]> {
  const value = new Uint8Array(valueBytes).fill(0x61);
  const accs = systems.map(() => new LoadAccumulator(inflight));
  const slices = Math.max(1, Math.ceil(durationS / sliceS));
  for (let slice = 0; slice < slices; slice++) {
    const sliceLengthS = Math.min(sliceS, durationS - slice * sliceS);
    const order = systems.map((_, i) => i);
    if (slice % 2 === 1) order.reverse();
    for (const i of order) await runLoadSlice(systems[i]!, accs[i]!, sliceLengthS, value);
  }
  return accs.map((acc) => acc.result());
}

async function waitForLeader(system: System, timeoutMs = 30_000): Promise<{ index: number; term: number }> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const leader = await system.leader();
    if (leader) return leader;
    if (Date.now() > deadline) throw new Error(`${system.name}: no leader within ${timeoutMs} ms`);
    await sleep(50);
  }
}

async function measureFailover(system: System, valueBytes: number, mode: Flags["failoverMode"]): Promise<number> {
  const value = new Uint8Array(valueBytes).fill(0x62);
  const { index } = await waitForLeader(system);
  const survivors = Array.from({ length: system.memberCount }, (_, i) => i).filter((i) => i !== index);
  if (mode === "freeze") system.signal(index, "SIGSTOP");
  else await system.kill(index);
  const t0 = performance.now();
  let elapsedMs = NaN;
  try {
    for (let attempt = 0; attempt < 10_000; attempt++) {
      try {
        await system.putVia(survivors, `failover/${attempt}`, value);
        elapsedMs = performance.now() - t0;
        break;
      } catch {
        await sleep(5);
      }
    }
  } finally {
    if (mode === "freeze") system.signal(index, "SIGCONT");
  }
  if (mode === "kill") await system.restart(index);
  // Let the restarted (or continued, and deposed) member catch up before the next round.
  await sleep(2_000);
  await system.put("failover/settled", value);
  return elapsedMs;
}

async function measureSteady(system: System, seconds: number, valueBytes: number): Promise<SystemResult["steady"]> {
  const before = await waitForLeader(system);
  let leaderChanges = 0;
  let last = before;
  let ops = 0;
  const endMs = performance.now() + seconds * 1000;
  const watcher = (async () => {
    while (performance.now() < endMs) {
      await sleep(200);
      const now = await system.leader();
      if (now && (now.index !== last.index || now.term !== last.term)) {
        leaderChanges += 1;
        last = now;
      }
    }
  })();
  const value = new Uint8Array(valueBytes).fill(0x63);
  await Promise.all(
    Array.from({ length: 8 }, async (_, worker) => {
      while (performance.now() < endMs) {
        try {
          await system.put(`steady/${worker}`, value);
          ops += 1;
        } catch {
          // counted through the leader watcher: a failing put here means an election
        }
      }
    }),
  );
  await watcher;
  const after = await waitForLeader(system);
  if (after.index !== last.index || after.term !== last.term) leaderChanges += 1;
  return { seconds, ops, leaderChanges, termBefore: before.term, termAfter: after.term };
}

/** The failover rounds, alternating between the systems. */
async function measureFailovers(systems: readonly System[], flags: Flags, log: (system: System, text: string) => void): Promise<number[][]> {
  const failoverMs: number[][] = systems.map(() => []);
  for (let round = 0; round < flags.failovers; round++) {
    for (const [i, system] of systems.entries()) {
      failoverMs[i]!.push(await measureFailover(system, flags.valueBytes, flags.failoverMode));
      log(system, `failover (${flags.failoverMode}) ${round + 1}: ${failoverMs[i]!.at(-1)!.toFixed(0)} ms`);
    }
  }
  return failoverMs;
}

async function benchmark(systems: readonly System[], flags: Flags): Promise<SystemResult[]> {
  const log = (system: System, text: string) => process.stderr.write(`[${system.name}] ${text}\n`);
  // Warm-up: connections, caches and, for raft-kv, the JIT, which otherwise still compiles the
  // hot paths during the first seconds of measurement.
  const empty: LoadResult = { ops: 0, opsPerS: NaN, p50Ms: NaN, p99Ms: NaN, errors: 0, memberCpuMsPerPut: NaN, clientCpuMsPerPut: NaN };
  if (flags.failoverOnly) {
    for (const system of systems) await waitForLeader(system);
    const failoverMs = await measureFailovers(systems, flags, log);
    return systems.map((_, i) => ({
      sequential: empty,
      concurrent: empty,
      failoverMs: failoverMs[i]!,
      steady: { seconds: 0, ops: 0, leaderChanges: 0, termBefore: 0, termAfter: 0 },
    }));
  }
  for (const system of systems) {
    await waitForLeader(system);
    await runLoadPhase([system], 1, flags.warmupS / 2, flags.warmupS, flags.valueBytes);
    await runLoadPhase([system], flags.inflight, flags.warmupS / 2, flags.warmupS, flags.valueBytes);
  }
  const sequential = await runLoadPhase(systems, 1, flags.durationS, flags.sliceS, flags.valueBytes);
  systems.forEach((system, i) => log(system, `sequential ${sequential[i]!.opsPerS.toFixed(0)} ops/s p50 ${sequential[i]!.p50Ms.toFixed(2)} ms`));
  const concurrent = await runLoadPhase(systems, flags.inflight, flags.durationS, flags.sliceS, flags.valueBytes);
  systems.forEach((system, i) =>
    log(system, `${flags.inflight} in flight ${concurrent[i]!.opsPerS.toFixed(0)} ops/s p50 ${concurrent[i]!.p50Ms.toFixed(2)} ms`),
  );
  const failoverMs = await measureFailovers(systems, flags, log);
  const results: SystemResult[] = [];
  for (const [i, system] of systems.entries()) {
    const steady = await measureSteady(system, flags.steadyS, flags.valueBytes);
    log(system, `steady ${steady.seconds} s: ${steady.ops} puts, leader changes ${steady.leaderChanges}`);
    results.push({ sequential: sequential[i]!, concurrent: concurrent[i]!, failoverMs: failoverMs[i]!, steady });
  }
  return results;
}

// ---- raft-kv ---------------------------------------------------------------------------------

async function startRaftKv(rootDir: string, flags: Flags): Promise<System> {
  const cluster = await RaftKvCluster.create({
    rootDir,
    tickMs: flags.raftTickMs,
    heartbeatTicks: Math.round(heartbeatIntervalMs / flags.raftTickMs),
    electionTicks: Math.round(electionTimeoutMs / flags.raftTickMs),
  });
  try {
    await cluster.startAll();
  } catch (error) {
    // Members that did start would outlive the benchmark.
    await cluster.stopAll();
    throw error;
  }
  const client = new RaftKvClient(cluster.members, { requestTimeoutMs: 5_000, putPath: flags.raftPutPath });
  const statusClient = new RaftKvClient(cluster.members, { requestTimeoutMs: 300 });
  return {
    name: "raft-kv",
    memberCount: cluster.members.length,
    put: async (key, value) => {
      await client.put(key, value);
    },
    leader: async () => {
      const statuses = await Promise.all(cluster.members.map((m) => (cluster.isRunning(m.id) ? statusClient.status(m.kvAddress) : Promise.resolve(null))));
      const at = statuses.findIndex((s) => s?.role === "leader");
      return at < 0 ? null : { index: at, term: statuses[at]!.term };
    },
    kill: (index) => cluster.kill(cluster.members[index]!.id),
    restart: (index) => cluster.start(cluster.members[index]!.id),
    signal: (index, signal) => cluster.signal(cluster.members[index]!.id, signal),
    putVia: async (members, key, value) => {
      const survivors = new RaftKvClient(
        members.map((i) => cluster.members[i]!),
        { requestTimeoutMs: failoverPutTimeoutMs, redirectsMax: 3, putPath: flags.raftPutPath },
      );
      try {
        await survivors.put(key, value);
      } finally {
        survivors.close();
      }
    },
    pids: () => cluster.pids(),
    stop: async () => {
      client.close();
      statusClient.close();
      await cluster.stopAll();
    },
  };
}

// ---- etcd ------------------------------------------------------------------------------------

async function startEtcd(rootDir: string, _flags: Flags): Promise<System> {
  const names = ["e1", "e2", "e3"];
  const ports = await freeLoopbackPorts(names.length * 2);
  const clientUrls = names.map((_, i) => `http://127.0.0.1:${ports[2 * i]}`);
  const peerUrls = names.map((_, i) => `http://127.0.0.1:${ports[2 * i + 1]}`);
  const initialCluster = names.map((name, i) => `${name}=${peerUrls[i]}`).join(",");
  const processes = new Map<number, ChildProcess>();
  const start = async (i: number, state: "new" | "existing") => {
    const child = spawn(
      "etcd",
      [
        "--name",
        names[i]!,
        "--data-dir",
        join(rootDir, names[i]!),
        "--listen-client-urls",
        clientUrls[i]!,
        "--advertise-client-urls",
        clientUrls[i]!,
        "--listen-peer-urls",
        peerUrls[i]!,
        "--initial-advertise-peer-urls",
        peerUrls[i]!,
        "--initial-cluster",
        initialCluster,
        "--initial-cluster-state",
        state,
        "--initial-cluster-token",
        "raft-vs-etcd",
        "--heartbeat-interval",
        String(heartbeatIntervalMs),
        "--election-timeout",
        String(electionTimeoutMs),
        "--log-level",
        "error",
      ],
      { stdio: ["ignore", "ignore", "ignore"] },
    );
    processes.set(i, child);
    child.once("exit", () => {
      if (processes.get(i) === child) processes.delete(i);
    });
  };
  const clientFor = (hosts: string[], timeoutMs: number) =>
    new Etcd3({ hosts, faultHandling: { host: () => noop, global: noop }, defaultCallOptions: () => ({ deadline: Date.now() + timeoutMs }) });
  await Promise.all(names.map((_, i) => start(i, "new")));
  const client = clientFor(clientUrls, 5_000);
  const statusClients = clientUrls.map((url) => clientFor([url], 300));
  const kill = async (i: number) => {
    const child = processes.get(i);
    if (!child) return;
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill("SIGKILL");
    await exited;
  };
  return {
    name: "etcd",
    memberCount: names.length,
    put: async (key, value) => {
      await client.put(key).value(Buffer.from(value));
    },
    leader: async () => {
      const statuses = await Promise.all(statusClients.map((c, i) => (processes.has(i) ? c.maintenance.status().catch(() => null) : Promise.resolve(null))));
      for (const status of statuses) {
        if (!status || status.leader === "0") continue;
        const at = statuses.findIndex((s) => s?.header.member_id === status.leader);
        if (at >= 0) return { index: at, term: Number(status.header.raft_term) };
      }
      return null;
    },
    kill,
    restart: (i) => start(i, "existing"),
    signal: (i, signal) => void processes.get(i)?.kill(signal),
    putVia: async (members, key, value) => {
      const survivors = clientFor(
        members.map((i) => clientUrls[i]!),
        failoverPutTimeoutMs,
      );
      try {
        await survivors.put(key).value(Buffer.from(value));
      } finally {
        survivors.close();
      }
    },
    pids: () => [...processes.values()].flatMap((child) => (child.pid === undefined ? [] : [child.pid])),
    stop: async () => {
      client.close();
      for (const c of statusClients) c.close();
      await Promise.all([...processes.keys()].map(kill));
    },
  };
}

// ---- report ----------------------------------------------------------------------------------

function formatTable(results: Partial<Record<"etcd" | "raft-kv", SystemResult>>, flags: Flags): string {
  const etcd = results.etcd;
  const raft = results["raft-kv"];
  const median = (values: number[]) =>
    percentile(
      [...values].sort((a, b) => a - b),
      50,
    );
  const failoverLabel = flags.failoverMode === "freeze" ? "SIGSTOP" : "SIGKILL";
  const rows: [string, (r: SystemResult) => number, string, "higher" | "lower"][] = [
    ["sequential puts/s", (r) => r.sequential.opsPerS, "%.0f", "higher"],
    ["sequential p50 ms", (r) => r.sequential.p50Ms, "%.2f", "lower"],
    ["sequential p99 ms", (r) => r.sequential.p99Ms, "%.2f", "lower"],
    [`${flags.inflight} in flight puts/s`, (r) => r.concurrent.opsPerS, "%.0f", "higher"],
    [`${flags.inflight} in flight p50 ms`, (r) => r.concurrent.p50Ms, "%.2f", "lower"],
    [`${flags.inflight} in flight p99 ms`, (r) => r.concurrent.p99Ms, "%.2f", "lower"],
    ["sequential member CPU ms per put", (r) => r.sequential.memberCpuMsPerPut, "%.3f", "lower"],
    [`${flags.inflight} in flight member CPU ms per put`, (r) => r.concurrent.memberCpuMsPerPut, "%.3f", "lower"],
    [`${flags.inflight} in flight client CPU ms per put`, (r) => r.concurrent.clientCpuMsPerPut, "%.3f", "lower"],
    [`failover (${failoverLabel}) median ms`, (r) => median(r.failoverMs), "%.0f", "lower"],
    [`failover (${failoverLabel}) min ms`, (r) => Math.min(...r.failoverMs), "%.0f", "lower"],
    [`failover (${failoverLabel}) max ms`, (r) => Math.max(...r.failoverMs), "%.0f", "lower"],
    [`leader changes in ${flags.steadyS} s steady load`, (r) => r.steady.leaderChanges, "%.0f", "lower"],
  ];
  const decimals: Record<string, number> = { "%.0f": 0, "%.2f": 2, "%.3f": 3 };
  const format = (value: number | undefined, spec: string) => (value === undefined || !Number.isFinite(value) ? "-" : value.toFixed(decimals[spec] ?? 0));
  const lines = ["| metric | etcd 3.4 | raft-kv | raft-kv / etcd |", "|---|---:|---:|---:|"];
  for (const [label, pick, spec] of rows) {
    const e = etcd ? pick(etcd) : undefined;
    const r = raft ? pick(raft) : undefined;
    const ratio = e !== undefined && r !== undefined && e !== 0 && Number.isFinite(r / e) ? (r / e).toFixed(2) : "-";
    lines.push(`| ${label} | ${format(e, spec)} | ${format(r, spec)} | ${ratio} |`);
  }
  return lines.join("\n");
}

async function main(): Promise<void> {
  const flags = readFlags(process.argv.slice(2));
  const starters: ["etcd" | "raft", "etcd" | "raft-kv", (dir: string, flags: Flags) => Promise<System>][] = [
    ["etcd", "etcd", startEtcd],
    ["raft", "raft-kv", startRaftKv],
  ];
  const chosen = starters.filter(([key]) => !flags.only || flags.only === key);
  const dirs: string[] = [];
  const systems: System[] = [];
  const cleanup = async () => {
    for (const system of systems) await system.stop();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  };
  const onSignal = () => void cleanup().finally(() => process.exit(130));
  process.once("SIGINT", onSignal);
  const results: Partial<Record<"etcd" | "raft-kv", SystemResult>> = {};
  try {
    for (const [, name, startSystem] of chosen) {
      const dir = mkdtempSync(join(tmpdir(), `bench-${name}-`));
      dirs.push(dir);
      systems.push(await startSystem(dir, flags));
    }
    const measured = await benchmark(systems, flags);
    chosen.forEach(([, name], i) => (results[name] = measured[i]));
  } finally {
    process.off("SIGINT", onSignal);
    await cleanup();
  }
  console.log(formatTable(results, flags));
  console.log(`RESULT ${JSON.stringify({ flags, results })}`);
  process.exit(0);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
