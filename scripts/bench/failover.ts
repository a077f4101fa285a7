// Failover benchmark (issue 6): three controllers on the production profile (their own PostgreSQL
// and Redis, one Raft cluster), two node daemons that know every controller, one group of
// `--instances` simulated servers. Each of `--rounds` rounds kills with SIGKILL first the Raft
// leader, then the group's lease holder (the record says when one controller was both), and
// restarts the victim after each kill, waiting until everything is settled again. Per kill:
//
// - Raft: until a survivor's GET /api/v1/cluster/members shows another leader, and until a Raft
//   write commits (a join token issued on a survivor, then revoked);
// - group lease: until cloud:v1:lease:group:<group> names a survivor with a higher fencing token
//   (target: the lease TTL, 2 × the evaluation interval, plus one interval);
// - daemons whose stream the victim held: until cloud:v1:session:node:<id> names a survivor, and
//   until that survivor answers the node ONLINE with a connection time after the kill;
// - instances: the group's server processes (by CLOUD_INSTANCE_ID in /proc/<pid>/environ) before
//   the kill against after the victim is back and all settled (target: none restarted), and every
//   200 ms in between no instance id with two processes.
//
//   npx tsx scripts/bench/failover.ts [--interval 15] [--instances 10] [--rounds 5]
//     [--daemon-reconnect-min-ms 500] [--daemon-reconnect-max-ms 30000]
//
// `--interval` is scheduler.evaluationIntervalSeconds (production default 15); the daemon back-off
// defaults are cloud-daemon's. Prints the kills and the summary as Markdown tables and one line
// `RESULT {...}`. Every process started is stopped and every directory removed, also on failure
// or SIGINT; the exit status is 1 when the run did not finish or a server was left behind.
import { execFileSync } from "node:child_process";
import { loadavg } from "node:os";
import {} from "../../test/e2e/cluster-harness.js";
import { eventually } from "../../test/support/wait.js";
import { FailoverFleet, serverProcessesOf, type ServerProcesses } from "./failover-fleet.js";
import {
  leaseTakeoverProbe,
  membersSeenBy,
  newLeaderProbe,
  raftWriteProbe,
  readLease,
  readSessionHolder,
  reconnectProbe,
  TwiceRunningSampler,
} from "./failover-probes.js";
import { killsTable, summarizeKills, summaryTable, type KillRecord } from "./failover-report.js";

function argNumber(name: string, fallback: number): number {
  const at = process.argv.indexOf(name);
  if (at < 0) return fallback;
  const value = Number(process.argv[at + 1]);
  if (!Number.isFinite(value) || value <= 0) throw new Error(`${name} needs a positive number`);
  return value;
}

const evaluationIntervalSeconds = argNumber("--interval", 15);
const instances = Math.round(argNumber("--instances", 10));
const rounds = Math.round(argNumber("--rounds", 5));
const daemonReconnectDelayMinMs = Math.round(argNumber("--daemon-reconnect-min-ms", 500));
const daemonReconnectDelayMaxMs = Math.round(argNumber("--daemon-reconnect-max-ms", 30_000));

const leaseTtlMs = 2 * evaluationIntervalSeconds * 1000;
const leaseTargetMs = leaseTtlMs + evaluationIntervalSeconds * 1000;
const raftProbeTimeoutMs = 60_000;
const leaseProbeTimeoutMs = 3 * leaseTtlMs + 60_000;
const reconnectProbeTimeoutMs = 120_000;
const settleTimeoutMs = 240_000 + 3 * leaseTtlMs;

const startedAtMs = Date.now();
const log = (line: string) => process.stderr.write(`[+${((Date.now() - startedAtMs) / 1000).toFixed(1)} s] ${line}\n`);

function uptimeLine(): string {
  try {
    return execFileSync("uptime", { encoding: "utf8" }).trim();
  } catch {
    return `load average: ${loadavg()
      .map((v) => v.toFixed(2))
      .join(", ")}`;
  }
}

function sourceState(): { commit: string; srcChanged: boolean } {
  try {
    const commit = execFileSync("git", ["rev-parse", "--short", "HEAD"], { encoding: "utf8" }).trim();
    const srcChanged = execFileSync("git", ["status", "--porcelain", "--", "src"], { encoding: "utf8" }).trim() !== "";
    return { commit, srcChanged };
  } catch {
    return { commit: "unknown", srcChanged: false };
  }
}

const fleet = new FailoverFleet({ evaluationIntervalSeconds, instances, daemonReconnectDelayMinMs, daemonReconnectDelayMaxMs, log });
const sampler = new TwiceRunningSampler(fleet.group);

const onSignal = (signal: string) => {
  log(`${signal}: stopping everything`);
  sampler.stop();
  void fleet.close().finally(() => process.exit(130));
};
process.once("SIGINT", () => onSignal("SIGINT"));
process.once("SIGTERM", () => onSignal("SIGTERM"));

/** The leader every running controller agrees on, with three voters in every view; else null. */
async function agreedLeader(): Promise<string | null> {
  const views = await Promise.all(fleet.running().map(membersSeenBy));
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

/**
 * Settled: three controllers READY with one agreed leader, the lease granted to a running
 * controller, both sessions on running controllers, the group's instances RUNNING, each once.
 */
async function settle(what: string): Promise<void> {
  const since = Date.now();
  await eventually(
    async () => {
      const running = fleet.running();
      if (running.length !== 3) return false;
      for (const m of running) if ((await m.call("GET", "/api/v1/system/ready")).status !== 200) return false;
      if ((await agreedLeader()) === null) return false;
      const runningIds = new Set(running.map((m) => fleet.idOf(m)));
      const lease = await readLease(fleet.redis, fleet.group);
      if (!lease || lease.fencingToken === null || !runningIds.has(lease.controllerId)) return false;
      for (const nodeId of fleet.nodeIds) if (!runningIds.has((await readSessionHolder(fleet.redis, nodeId)) ?? "")) return false;
      const records = (await running[0].call("GET", `/api/v1/services?group=${fleet.group}&state=RUNNING`)).json as unknown[];
      if (records.length !== instances) return false;
      const processes = serverProcessesOf(fleet.group);
      return processes.size === instances && [...processes.values()].every((pids) => pids.length === 1);
    },
    what,
    settleTimeoutMs,
  );
  log(`settled (${what}) in ${((Date.now() - since) / 1000).toFixed(1)} s`);
}

function compareProcesses(before: ServerProcesses, after: ServerProcesses): { restarted: string[]; newInstances: string[] } {
  const same = (a: number[] | undefined, b: number[] | undefined) => a !== undefined && b !== undefined && a.join(",") === b.join(",");
  return {
    restarted: [...before.keys()].filter((id) => !same(before.get(id), after.get(id))).sort(),
    newInstances: [...after.keys()].filter((id) => !before.has(id)).sort(),
  };
}

async function killAndMeasure(round: number, target: KillRecord["target"]): Promise<KillRecord> {
  const leaderId = await agreedLeader();
  const lease = await readLease(fleet.redis, fleet.group);
  if (leaderId === null || lease === null || lease.fencingToken === null) throw new Error("not settled before the kill");
  const victimId = target === "leader" ? leaderId : lease.controllerId;
  const victim = fleet.memberById(victimId);
  if (!victim?.process) throw new Error(`the ${target} ${victimId} is not a running member`);
  const survivors = fleet.running().filter((m) => m !== victim);
  const streams: string[] = [];
  for (const nodeId of fleet.nodeIds) if ((await readSessionHolder(fleet.redis, nodeId)) === victimId) streams.push(nodeId);
  const wasLeader = victimId === leaderId;
  const heldLease = victimId === lease.controllerId;
  const roles = wasLeader && heldLease ? "the Raft leader AND the lease holder" : wasLeader ? "the Raft leader" : "the lease holder";
  log(`round ${round}: SIGKILL ${victim.name} (${victimId}), ${roles}, holding ${streams.length} daemon stream(s)`);

  const processesBefore = serverProcessesOf(fleet.group);
  sampler.take();
  const killedAtMs = Date.now();
  await fleet.kill(victim);
  const since = (atMs: number | null | undefined) => (atMs === null || atMs === undefined ? null : atMs - killedAtMs);

  const [leader, write, takeover, reconnects] = await Promise.all([
    wasLeader ? newLeaderProbe(survivors, victimId, raftProbeTimeoutMs) : Promise.resolve(undefined),
    raftWriteProbe(survivors, raftProbeTimeoutMs),
    heldLease ? leaseTakeoverProbe(fleet.redis, fleet.group, victimId, lease.fencingToken, leaseProbeTimeoutMs) : Promise.resolve(undefined),
    Promise.all(streams.map((nodeId) => reconnectProbe(fleet.redis, nodeId, victimId, killedAtMs, (id) => fleet.memberById(id), reconnectProbeTimeoutMs))),
  ]);

  const backFromMs = Date.now();
  await fleet.restart(victim);
  const victimBackMs = Date.now() - backFromMs;
  log(`round ${round}: ${victim.name} back in ${(victimBackMs / 1000).toFixed(1)} s`);
  await settle(`round ${round}, after the ${target} kill`);
  const { restarted, newInstances } = compareProcesses(processesBefore, serverProcessesOf(fleet.group));
  const { twice, samples } = sampler.take();

  const record: KillRecord = {
    round,
    target,
    victim: victim.name,
    victimId,
    wasLeader,
    heldLease,
    streams,
    ...(leader === undefined ? {} : { newLeaderMs: since(leader?.atMs), newLeader: leader?.value ?? null }),
    raftWriteMs: since(write.atMs),
    raftWriteRefused: write.refused,
    leaseBefore: { controllerId: lease.controllerId, fencingToken: lease.fencingToken },
    ...(takeover === undefined ? {} : { leaseTakeoverMs: since(takeover?.atMs), leaseAfter: takeover?.value ?? null }),
    reconnects: reconnects.map((r) => ({
      nodeId: r.nodeId,
      sessionMovedMs: since(r.sessionAtMs),
      onlineMs: since(r.onlineAtMs),
      controllerId: r.controllerId,
    })),
    restarted,
    newInstances,
    twice,
    processSamples: samples,
    victimBackMs,
  };
  if (write.issued !== write.revoked) log(`round ${round}: ${write.issued - write.revoked} probe join token(s) could not be revoked`);
  log(`round ${round}: ${JSON.stringify(record)}`);
  return record;
}

const uptimeBefore = uptimeLine();
const loadBefore = loadavg().map((v) => Number(v.toFixed(2)));
const source = sourceState();
log(`${uptimeBefore}`);
log(`interval ${evaluationIntervalSeconds} s, lease TTL ${leaseTtlMs} ms, ${instances} instances, ${rounds} rounds, group ${fleet.group}`);
const kills: KillRecord[] = [];
let failure: string | null = null;
let serversLeft: number;
try {
  await fleet.start();
  await settle("initial");
  sampler.start();
  for (let round = 1; round <= rounds; round++) {
    kills.push(await killAndMeasure(round, "leader"));
    kills.push(await killAndMeasure(round, "lease holder"));
  }
} catch (err) {
  failure = (err as Error).stack ?? String(err);
  log(`FAILED: ${failure}`);
  for (const [i, d] of fleet.daemons.entries()) log(`daemon ${i} output (tail):\n${d.output().slice(-4_000)}`);
  for (const m of fleet.members) if (m.process) log(`controller ${m.name} output (tail):\n${m.process.output().slice(-4_000)}`);
} finally {
  sampler.stop();
  serversLeft = (await fleet.close()).serversLeft;
}

const summary = summarizeKills(kills);
const uptimeAfter = uptimeLine();
const leaseMet = summary.leaseTakeover.count > 0 && summary.leaseTakeover.missed === 0 && (summary.leaseTakeover.maxMs ?? Infinity) <= leaseTargetMs;
console.log(`\nFailover: interval ${evaluationIntervalSeconds} s (lease TTL ${leaseTtlMs / 1000} s), ${instances} instances, ${kills.length} kills`);
console.log(`before: ${uptimeBefore}`);
console.log(`after:  ${uptimeAfter}\n`);
console.log(killsTable(kills));
console.log("");
console.log(summaryTable(summary, leaseTargetMs));
console.log("");
const result = {
  evaluationIntervalSeconds,
  leaseTtlMs,
  leaseTargetMs,
  instances,
  rounds,
  daemonReconnectDelayMinMs,
  daemonReconnectDelayMaxMs,
  kills,
  summary,
  targets: { leaseTakeover: leaseMet, instancesRestarted: summary.instancesRestarted === 0, instancesRunTwice: summary.instancesRunTwice === 0 },
  serversLeft,
  failure: failure === null ? null : failure.split("\n")[0],
  loadAverageBefore: loadBefore,
  loadAverageAfter: loadavg().map((v) => Number(v.toFixed(2))),
  durationS: Math.round((Date.now() - startedAtMs) / 1000),
  node: process.version,
  ...source,
};
console.log(`RESULT ${JSON.stringify(result)}`);
process.exit(failure !== null || serversLeft > 0 ? 1 : 0);
