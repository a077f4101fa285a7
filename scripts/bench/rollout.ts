// Deployments benchmark: a group of `--instances` simulated servers on `--daemons` node daemons
// rolled to a new revision in batches of `--batch`, on three controllers of the production profile
// (their own PostgreSQL and Redis, one Raft cluster; failover-fleet.ts). With `--kill-reconciler`,
// the controller holding the `deployment-reconciler` lease is killed with SIGKILL once half of the
// old instances are retired, and stays down.
//
// Before the rollout, `--players` players join every instance (or the first `--players-on`)
// through the plugin API, each call sent through the instance's daemon relay with the instance's
// own workload token (both read from /proc/<pid>/environ, as a server's plugin gets them). During the rollout the benchmark plays the
// network's side of a drain: every player of a DRAINING instance is moved with
// `POST /api/plugin/transfer-to-group` (the draining instance's token; the controller picks the
// RUNNING instance with the fewest players), then arrives there with a `player-join` sent with the
// target's token, as the target's plugin reports it.
//
// Measured, from the deployment's 201 to its COMPLETED:
// - total time (and, with the kill, until another controller holds the reconciler lease);
// - RUNNING instances of the group, sampled every `--sample-ms` (the real gaps are reported): the
//   minimum seen, and how many samples fell below the bound minInstances − maxUnavailable;
// - players dropped: seeded players in no instance's roster at the end (GET /api/plugin/players);
// - instances replaced twice: new-revision instances beyond `--instances`, new-revision instances
//   not RUNNING at the end, the deployment's retired count above `--instances`, old instances not
//   STOPPED, instance ids seen running as two processes at once (a /proc scan every second);
// - CPU seconds of each controller process over the rollout (/proc/<pid>/stat; the killed one's
//   last reading before its kill).
//
//   npx tsx scripts/bench/rollout.ts [--instances 200] [--daemons 4] [--batch 20] [--players 3] [--players-on <instances>]
//     [--max-surge <batch>] [--max-unavailable 0] [--min-healthy 10] [--kill-reconciler]
//     [--interval 15] [--deploy-interval 1] [--lease-ttl 15] [--sample-ms 200] [--deadline-s 1800]
//     [--readiness log-line|plugin] [--controller-logs <dir>]
//
// `--interval` is scheduler.evaluationIntervalSeconds (production default 15), `--deploy-interval`
// and `--lease-ttl` the controllers' deployments.reconcileIntervalSeconds and leaseTtlSeconds
// (defaults 1 and 15). Prints a table and one line `RESULT {...}`. Every process started is
// stopped and every directory removed, also on failure or SIGINT; the exit status is 1 when the
// rollout did not complete or an invariant was broken.
import { execFileSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { loadavg } from "node:os";
import { INSTANCE_ENV } from "../../src/daemon/simulated-server/environment.js";
import type { ClusterMemberProcess } from "../../test/e2e/cluster-harness.js";
import { eventually } from "../../test/support/wait.js";
import { FailoverFleet, serverProcessesOf } from "./failover-fleet.js";
import { pollUntil, readLease, readSessionHolder } from "./failover-probes.js";
import { argNumber, argString, percentile, printTable, processCpuSeconds, uptimeLine } from "./system-bench-support.js";

const instances = Math.round(argNumber("--instances", 200));
const daemons = Math.round(argNumber("--daemons", 4));
const batch = Math.max(1, Math.round(argNumber("--batch", 20)));
const playersPerInstance = Math.round(argNumber("--players", 3));
/** How many instances get players (default all). The rollout retires instances without players first. */
const instancesWithPlayers = Math.min(instances, Math.round(argNumber("--players-on", instances)));
const maxSurge = Math.round(argNumber("--max-surge", batch));
const maxUnavailable = Math.round(argNumber("--max-unavailable", 0));
const minHealthySeconds = argNumber("--min-healthy", 10);
const killReconciler = process.argv.includes("--kill-reconciler");
const evaluationIntervalSeconds = argNumber("--interval", 15);
const deployIntervalSeconds = argNumber("--deploy-interval", 1);
const leaseTtlSeconds = argNumber("--lease-ttl", 15);
const sampleMs = argNumber("--sample-ms", 200);
/**
 * How a simulated server counts as RUNNING. `log-line` (default): its `Done (` console line, the
 * line printed right before its plugin's ready call. At this commit the plugin SDK's first
 * X-Cloud-Sequence (wall-clock ms × 1000, 16 digits) is refused by the controller's sequence guard
 * (at most 15 digits: 400), so the ready call never lands; `plugin` waits for it.
 */
const readiness = argString("--readiness", "log-line");
/** A directory to write each controller's output into at the end (kept for a diagnosis). */
const controllerLogsDir = process.argv.includes("--controller-logs") ? argString("--controller-logs", "") : "";
if (readiness !== "log-line" && readiness !== "plugin") throw new Error("--readiness must be log-line or plugin");
const deadlineMs = argNumber("--deadline-s", 1800) * 1000;
/** The bound the rollout promises: never fewer RUNNING than this. */
const servingFloor = instances - maxUnavailable;
/** Memory each instance reserves on its node (accounting only: a simulated server uses ~40 MiB whatever it is given). */
const instanceMemoryMb = 32;
/** A plugin client's request timeout (spec document 3). */
const PLUGIN_TIMEOUT_MS = 10_000;
/** Plugin calls in flight at once while seeding players. */
const SEED_CONCURRENCY = 16;
/** Time between two /proc scans for ids running twice. */
const PROCESS_SCAN_MS = 1_000;
const SETUP_WAIT_MS = Math.max(180_000, instances * 2_000);

const startedAtMs = Date.now();
const log = (line: string) => process.stderr.write(`[+${((Date.now() - startedAtMs) / 1000).toFixed(1)} s] ${line}\n`);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Instance {
  id: string;
  state: string;
  deploymentRevision: number;
  playerCount: number;
}
interface Credentials {
  relayUrl: string;
  token: string;
}
interface Player {
  uuid: string;
  name: string;
  instanceId: string;
  moving: boolean;
}

const fleet = new FailoverFleet({
  evaluationIntervalSeconds,
  instances,
  daemonReconnectDelayMinMs: 500,
  daemonReconnectDelayMaxMs: 5_000,
  log,
  daemons,
  daemonMaxMemoryMb: Math.max(4_096, Math.ceil((instances + maxSurge) / daemons) * instanceMemoryMb * 4),
  groupPortsCount: Math.min(4_000, 2 * (instances + maxSurge) + 20),
  group: {
    minInstances: instances,
    maxInstances: instances + maxSurge,
    maxPlayers: 100,
    memoryMb: instanceMemoryMb,
    updateStrategy: { type: "ROLLING", maxSurge, maxUnavailable },
  },
  deployments: { reconcileIntervalSeconds: deployIntervalSeconds, leaseTtlSeconds },
  groupPrefix: "rollout",
  simulatedReadiness: readiness,
});
const onSignal = (signal: string) => {
  log(`${signal}: stopping everything`);
  void fleet.close().finally(() => process.exit(130));
};
process.once("SIGINT", () => onSignal("SIGINT"));
process.once("SIGTERM", () => onSignal("SIGTERM"));

/** A REST call on the first running controller that answers. */
async function api(method: string, path: string, body?: unknown): Promise<{ status: number; json: any; text: string }> {
  let last: unknown = new Error("no controller running");
  for (const m of fleet.running()) {
    try {
      return await m.call(method, path, body);
    } catch (err) {
      last = err;
    }
  }
  throw last;
}

async function records(): Promise<Instance[]> {
  const reply = await api("GET", `/api/v1/services?group=${fleet.group}`);
  if (reply.status !== 200) throw new Error(`services: ${reply.status} ${reply.text}`);
  return reply.json as Instance[];
}

// ---- the instances' plugin credentials, from their processes' environment -------------------

const credentials = new Map<string, Credentials>();

function environOf(pid: number): Map<string, string> {
  const env = new Map<string, string>();
  for (const entry of readFileSync(`/proc/${pid}/environ`, "utf8").split("\0")) {
    const eq = entry.indexOf("=");
    if (eq > 0) env.set(entry.slice(0, eq), entry.slice(eq + 1));
  }
  return env;
}

/** The relay address and workload token of `instanceId` (one /proc scan for every unknown id). */
function credentialsOf(instanceId: string): Credentials | null {
  const known = credentials.get(instanceId);
  if (known) return known;
  for (const [id, pids] of serverProcessesOf(fleet.group)) {
    if (credentials.has(id) || pids.length !== 1) continue;
    try {
      const env = environOf(pids[0]!);
      const relayUrl = env.get(INSTANCE_ENV.controllerUrl);
      const token = env.get(INSTANCE_ENV.workloadToken);
      if (relayUrl && token) credentials.set(id, { relayUrl, token });
    } catch {
      // ended meanwhile
    }
  }
  return credentials.get(instanceId) ?? null;
}

/** One plugin call as the instance's plugin sends it (through its relay, with its token). */
async function plugin(instanceId: string, path: string, body: unknown): Promise<{ status: number; json: any }> {
  const creds = credentialsOf(instanceId);
  if (!creds) return { status: 0, json: { error: { code: "NO_PROCESS" } } };
  try {
    const res = await fetch(`${creds.relayUrl}/api/plugin/${path}`, {
      method: body === undefined ? "GET" : "POST",
      headers: { authorization: `Bearer ${creds.token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(PLUGIN_TIMEOUT_MS),
    });
    const text = await res.text();
    return { status: res.status, json: text ? JSON.parse(text) : null };
  } catch (err) {
    return { status: 0, json: { error: { code: (err as Error).name } } };
  }
}

// ---- players ----------------------------------------------------------------------------------

const players = new Map<string, Player>();
let moves = 0;
let moveFailures = 0;
const moveFailureCodes = new Map<string, number>();
const noteFailure = (what: string, reply: { status: number; json: any }) => {
  moveFailures++;
  const key = `${what} ${reply.status} ${reply.json?.error?.code ?? ""}`.trim();
  moveFailureCodes.set(key, (moveFailureCodes.get(key) ?? 0) + 1);
};

async function seedPlayers(ids: string[]): Promise<void> {
  const queue: Player[] = [];
  ids.forEach((instanceId, i) => {
    for (let k = 0; k < playersPerInstance; k++) queue.push({ uuid: randomUUID(), name: `r${i.toString(36)}p${k}`, instanceId, moving: false });
  });
  const workers = Array.from({ length: SEED_CONCURRENCY }, async () => {
    for (let player = queue.shift(); player; player = queue.shift()) {
      for (let attempt = 1; ; attempt++) {
        const reply = await plugin(player.instanceId, "player-join", { uuid: player.uuid, name: player.name, group: fleet.group });
        if (reply.status === 200) break;
        if (attempt >= 5) throw new Error(`join of ${player.name} on ${player.instanceId}: ${reply.status} ${JSON.stringify(reply.json)}`);
        await sleep(500);
      }
      players.set(player.uuid, player);
    }
  });
  await Promise.all(workers);
}

/** Moves one player off its draining instance: a transfer to the group, then the join on the target. */
async function move(player: Player): Promise<void> {
  player.moving = true;
  try {
    const transfer = await plugin(player.instanceId, "transfer-to-group", { playerUuid: player.uuid, group: fleet.group });
    if (transfer.status !== 202) return noteFailure("transfer", transfer);
    const target = String(transfer.json.targetInstanceId);
    const join = await plugin(target, "player-join", { uuid: player.uuid, name: player.name, group: fleet.group });
    if (join.status !== 200) return noteFailure("join", join);
    player.instanceId = target;
    moves++;
  } finally {
    player.moving = false;
  }
}

/** Starts a move of every player on a DRAINING instance that is not moving already. */
function movePlayersOff(now: readonly Instance[]): Promise<void>[] {
  const draining = new Set(now.filter((i) => i.state === "DRAINING").map((i) => i.id));
  const started: Promise<void>[] = [];
  for (const player of players.values()) if (!player.moving && draining.has(player.instanceId)) started.push(move(player));
  return started;
}

// ---- the run ----------------------------------------------------------------------------------

function commitOf(): string {
  try {
    return execFileSync("git", ["rev-parse", "--short", "HEAD"], { encoding: "utf8" }).trim();
  } catch {
    return "unknown";
  }
}

async function reconcilerHolder(): Promise<string | null> {
  const reply = await api("GET", "/api/v1/cluster/leases");
  const lease = (reply.json?.leases as { name: string; holder: string }[] | undefined)?.find((l) => l.name === "deployment-reconciler");
  return lease?.holder ?? null;
}

/** The controller (member name) scheduling the group: the holder of its lease. */
async function ownerOf(): Promise<string | null> {
  const lease = await readLease(fleet.redis, fleet.group);
  return lease ? (fleet.memberById(lease.controllerId)?.name ?? lease.controllerId) : null;
}

/** The controller (member name) holding each daemon's stream. */
async function sessionHolders(): Promise<Record<string, string | null>> {
  const out: Record<string, string | null> = {};
  for (const nodeId of fleet.nodeIds) {
    const holder = await readSessionHolder(fleet.redis, nodeId);
    out[nodeId] = holder ? (fleet.memberById(holder)?.name ?? holder) : null;
  }
  return out;
}

const round1 = (v: number) => Math.round(v * 10) / 10;
const commit = commitOf();
let exitCode = 1;
let result: Record<string, unknown> = {};
log(
  `${instances} instances on ${daemons} daemons, batch ${batch}, maxSurge ${maxSurge}, maxUnavailable ${maxUnavailable}, ${playersPerInstance} players each, ` +
    `min healthy ${minHealthySeconds} s, ${killReconciler ? "SIGKILL of the reconciler's holder" : "no kill"}, commit ${commit}`,
);
try {
  await fleet.start();
  const controllerPids = new Map(fleet.members.map((m) => [m.name, m.process!.pid]));
  let lastState = "";
  const initial = await eventually(
    async () => {
      const now = (await records()).filter((r) => r.state === "RUNNING");
      const procs = serverProcessesOf(fleet.group);
      lastState = `${now.length} RUNNING, ${procs.size} processes`;
      return now.length === instances && now.every((r) => procs.get(r.id)?.length === 1) ? now : null;
    },
    () => `${instances} RUNNING with one process each (last: ${lastState})`,
    { timeoutMs: SETUP_WAIT_MS, intervalMs: 1_000 },
  );
  const oldIds = initial.map((r) => r.id).sort();
  const oldRevision = initial[0]!.deploymentRevision;
  log(`${instances} RUNNING (revision ${oldRevision}); seeding ${instancesWithPlayers * playersPerInstance} players`);
  await seedPlayers(oldIds.slice(0, instancesWithPlayers));
  await eventually(
    async () => (await records()).reduce((n, r) => n + (r.state === "RUNNING" ? r.playerCount : 0), 0) === players.size,
    "the seeded players counted",
    { timeoutMs: 60_000, intervalMs: 500 },
  );
  log(`${players.size} players on the network`);

  // Sampling: RUNNING count, the mover, CPU of every controller; /proc for ids running twice.
  const cpuBefore = new Map([...controllerPids].map(([name, pid]) => [name, processCpuSeconds(pid)]));
  const cpuLast = new Map(cpuBefore);
  let sampling = true;
  let minRunning = Number.POSITIVE_INFINITY;
  let minRunningAtMs = 0;
  let samples = 0;
  let belowFloor = 0;
  const belowFloorExamples: string[] = [];
  let sampleErrors = 0;
  let maxGapMs = 0;
  let maxDraining = 0;
  let lastHistogram = "";
  const drainingSinceMs = new Map<string, number>();
  const drainMs: number[] = [];
  const runningTwice = new Set<string>();
  const inFlightMoves = new Set<Promise<void>>();
  let deployedAtMs = 0;
  const sampler = (async () => {
    let previousMs = 0;
    while (sampling) {
      const beganMs = Date.now();
      for (const [name, pid] of controllerPids) {
        const cpu = processCpuSeconds(pid);
        if (cpu > 0) cpuLast.set(name, cpu);
      }
      try {
        const now = await records();
        const endMs = Date.now();
        if (previousMs > 0) maxGapMs = Math.max(maxGapMs, endMs - previousMs);
        previousMs = endMs;
        samples++;
        const running = now.filter((r) => r.state === "RUNNING").length;
        maxDraining = Math.max(maxDraining, now.filter((r) => r.state === "DRAINING").length);
        for (const r of now) {
          if (r.state === "DRAINING" && !drainingSinceMs.has(r.id)) drainingSinceMs.set(r.id, endMs);
          const since = drainingSinceMs.get(r.id);
          if (since !== undefined && !Number.isNaN(since) && r.state === "STOPPED") {
            drainMs.push(endMs - since);
            drainingSinceMs.set(r.id, Number.NaN);
          }
        }
        const histogram = JSON.stringify(
          Object.fromEntries(
            [...new Set(now.map((r) => `${r.state}@${r.deploymentRevision}`))]
              .sort()
              .map((k) => [k, now.filter((r) => `${r.state}@${r.deploymentRevision}` === k).length]),
          ),
        );
        if (histogram !== lastHistogram && deployedAtMs > 0) log(`records ${histogram}`);
        lastHistogram = histogram;
        if (running < minRunning) {
          minRunning = running;
          minRunningAtMs = deployedAtMs > 0 ? endMs - deployedAtMs : 0;
        }
        if (running < servingFloor) {
          belowFloor++;
          if (belowFloorExamples.length < 5) {
            const byState: Record<string, number> = {};
            for (const r of now) byState[`${r.state}@${r.deploymentRevision}`] = (byState[`${r.state}@${r.deploymentRevision}`] ?? 0) + 1;
            belowFloorExamples.push(`+${((endMs - deployedAtMs) / 1000).toFixed(1)} s: ${running} RUNNING ${JSON.stringify(byState)}`);
          }
        }
        for (const started of movePlayersOff(now)) {
          inFlightMoves.add(started);
          void started.finally(() => inFlightMoves.delete(started));
        }
      } catch {
        sampleErrors++;
      }
      await sleep(Math.max(0, sampleMs - (Date.now() - beganMs)));
    }
  })();
  const scanner = (async () => {
    while (sampling) {
      for (const [id, pids] of serverProcessesOf(fleet.group)) if (pids.length > 1) runningTwice.add(id);
      await sleep(PROCESS_SCAN_MS);
    }
  })();

  const loadBefore = loadavg();
  const uptimeBefore = uptimeLine();
  deployedAtMs = Date.now();
  const created = await api("POST", `/api/v1/groups/${fleet.group}/deployments`, { batchSize: batch, minHealthySeconds });
  if (created.status !== 201) throw new Error(`deployment: ${created.status} ${created.text}`);
  const revision = created.json.revision as number;
  log(`deployment of revision ${revision} created`);

  let lastDetail: any = null;
  const detail = async () => {
    const reply = await api("GET", `/api/v1/groups/${fleet.group}/deployments/${revision}`);
    if (reply.status === 200) lastDetail = reply.json;
    return lastDetail;
  };
  let kill: { victim: string; atMs: number; retiredAtKill: number; leaseMovedMs: number | null; newHolder: string | null } | null = null;
  if (killReconciler) {
    const half = Math.ceil(instances / 2);
    const reached = await pollUntil(
      async () => {
        const d = await detail();
        return d && d.progress.retired >= half && d.state === "IN_PROGRESS" ? d : null;
      },
      deadlineMs,
      250,
    );
    if (!reached) throw new Error(`half of the old instances never retired: ${JSON.stringify(lastDetail?.progress)}`);
    const holderId = await reconcilerHolder();
    const holder: ClusterMemberProcess | undefined = holderId ? fleet.memberById(holderId) : undefined;
    if (!holder?.process) throw new Error(`the reconciler's holder ${holderId} is not a running member`);
    cpuLast.set(holder.name, processCpuSeconds(holder.process.pid));
    const atMs = Date.now();
    await fleet.kill(holder);
    log(`SIGKILL of ${holder.name} (${holderId}) holding deployment-reconciler, ${reached.value.progress.retired} retired`);
    const moved = await pollUntil(
      async () => {
        const now = await reconcilerHolder();
        return now && now !== holderId ? now : null;
      },
      deadlineMs,
      100,
    );
    kill = {
      victim: holder.name,
      atMs: atMs - deployedAtMs,
      retiredAtKill: reached.value.progress.retired as number,
      leaseMovedMs: moved ? moved.atMs - atMs : null,
      newHolder: moved ? (fleet.memberById(moved.value)?.name ?? moved.value) : null,
    };
    log(`deployment-reconciler taken by ${kill.newHolder} after ${kill.leaseMovedMs} ms`);
  }

  let lastRetired = -1;
  const finished = await pollUntil(
    async () => {
      const d = await detail();
      if (d && d.progress.retired !== lastRetired) {
        lastRetired = d.progress.retired;
        log(`${d.state}: ${d.progress.newHealthy} new healthy of ${d.progress.newInstances}, ${d.progress.retired} retired, ${moves} player moves`);
      }
      return d && ["COMPLETED", "FAILED", "ROLLED_BACK"].includes(d.state) ? d : null;
    },
    deadlineMs,
    250,
  );
  const totalMs = (finished?.atMs ?? Date.now()) - deployedAtMs;
  const outcome = finished ? String(finished.value.state) : "deadline reached";
  log(`${outcome} after ${(totalMs / 1000).toFixed(1)} s`);
  const cpuAfter = new Map(cpuLast);
  for (const m of fleet.running()) cpuAfter.set(m.name, processCpuSeconds(m.process!.pid));
  const uptimeAtEnd = uptimeLine();
  const loadAtEnd = loadavg();

  // Draining instances left by the last batch: their players are moved before the counts are read.
  await pollUntil(async () => ((await records()).some((r) => r.state === "DRAINING") || inFlightMoves.size > 0 ? null : true), 120_000, 500);
  sampling = false;
  await Promise.all([sampler, scanner]);
  await Promise.all([...inFlightMoves]);

  // Invariants.
  const end = await records();
  const fresh = end.filter((r) => r.deploymentRevision === revision);
  const freshRunning = fresh.filter((r) => r.state === "RUNNING");
  const oldNotStopped = end.filter((r) => oldIds.includes(r.id) && r.state !== "STOPPED");
  const procs = serverProcessesOf(fleet.group);
  const oldWithProcess = oldIds.filter((id) => procs.has(id));
  const freshWithoutOneProcess = freshRunning.filter((r) => procs.get(r.id)?.length !== 1);
  const retiredCount = (lastDetail?.progress?.retired as number | undefined) ?? 0;
  const lister = freshRunning[0]?.id ?? "";
  const listed = await plugin(lister, "players", undefined);
  const online = new Map(((listed.status === 200 ? listed.json : []) as { uuid: string; instanceId: string | null }[]).map((p) => [p.uuid, p.instanceId]));
  const dropped = [...players.values()].filter((p) => !online.get(p.uuid));
  const onOld = [...players.values()].filter((p) => oldIds.includes(online.get(p.uuid) ?? ""));
  const replacedTwice = Math.max(0, fresh.length - instances) + (fresh.length - freshRunning.length) + Math.max(0, retiredCount - instances);

  const cpu = Object.fromEntries([...controllerPids.keys()].map((name) => [name, round1(cpuAfter.get(name)! - cpuBefore.get(name)!)]));
  const cpuTotal = round1(Object.values(cpu).reduce((a, b) => a + b, 0));
  result = {
    commit,
    instances,
    daemons,
    batch,
    maxSurge,
    maxUnavailable,
    minHealthySeconds,
    playersPerInstance,
    instancesWithPlayers,
    evaluationIntervalSeconds,
    deployIntervalSeconds,
    leaseTtlSeconds,
    killReconciler,
    readiness,
    outcome,
    totalMs,
    kill,
    servingFloor,
    minRunning,
    minRunningAtMs,
    belowFloorSamples: belowFloor,
    belowFloorExamples,
    samples,
    sampleErrors,
    sampleMaxGapMs: maxGapMs,
    maxDraining,
    drainMs: {
      p50: percentile(
        drainMs.sort((a, b) => a - b),
        50,
      ),
      max: drainMs.at(-1) ?? null,
      count: drainMs.length,
    },
    groupOwner: await ownerOf(),
    daemonSessions: await sessionHolders(),
    players: players.size,
    playersListed: listed.status === 200 ? online.size : `players list ${listed.status}`,
    playersDropped: dropped.length,
    playersOnOldInstances: onOld.length,
    playerMoves: moves,
    moveFailures,
    moveFailureCodes: Object.fromEntries(moveFailureCodes),
    newInstances: fresh.length,
    newRunning: freshRunning.length,
    retired: retiredCount,
    oldNotStopped: oldNotStopped.map((r) => `${r.id}=${r.state}`),
    oldWithProcess,
    newWithoutOneProcess: freshWithoutOneProcess.map((r) => r.id),
    idsRunningTwice: [...runningTwice],
    replacedTwice,
    controllerCpuS: cpu,
    controllerCpuTotalS: cpuTotal,
    loadBefore: loadBefore.map(round1),
    loadAtEnd: loadAtEnd.map(round1),
    uptimeBefore,
    uptimeAtEnd,
    node: process.version,
  };
  printTable(
    `rollout: ${instances} simulated instances on ${daemons} daemons, batches of ${batch}, 3 production controllers${killReconciler ? ", SIGKILL of the reconciler's holder" : ""}`,
    [
      ["outcome / total time", `${outcome} / ${(totalMs / 1000).toFixed(1)} s`],
      ...(kill
        ? ([
            ["SIGKILL of the reconciler's holder", `${kill.victim} at +${(kill.atMs / 1000).toFixed(1)} s, ${kill.retiredAtKill} retired`],
            ["lease taken by / after", `${kill.newHolder} / ${kill.leaseMovedMs === null ? "never" : `${kill.leaseMovedMs} ms`}`],
          ] as [string, string][])
        : []),
      [`RUNNING min (bound ${servingFloor})`, `${minRunning} at +${(minRunningAtMs / 1000).toFixed(1)} s`],
      ["samples below the bound / samples", `${belowFloor} / ${samples} (largest gap ${maxGapMs} ms, ${sampleErrors} failed)`],
      ["most DRAINING at once", maxDraining],
      ["DRAINING -> STOPPED p50 / max (instances)", `${percentile(drainMs, 50)} / ${drainMs.at(-1) ?? "-"} ms (${drainMs.length})`],
      ["group owner / daemon streams held by", `${String(result.groupOwner)} / ${JSON.stringify(result.daemonSessions)}`],
      ["players dropped / seeded", `${dropped.length} / ${players.size}`],
      ["player moves (failed attempts)", `${moves} (${moveFailures})`],
      ["new instances / RUNNING", `${fresh.length} / ${freshRunning.length}`],
      ["retired (deployment)", retiredCount],
      ["instances replaced twice", replacedTwice],
      ["old not STOPPED / old with a process", `${oldNotStopped.length} / ${oldWithProcess.length}`],
      ["ids seen running twice", runningTwice.size],
      ["controller CPU (s), total", `${JSON.stringify(cpu)}, ${cpuTotal}`],
      ["uptime before", uptimeBefore],
      ["uptime at the end", uptimeAtEnd],
    ],
  );
  const broken =
    outcome !== "COMPLETED" ||
    belowFloor > 0 ||
    dropped.length > 0 ||
    replacedTwice > 0 ||
    oldNotStopped.length > 0 ||
    oldWithProcess.length > 0 ||
    freshWithoutOneProcess.length > 0 ||
    runningTwice.size > 0;
  exitCode = broken ? 1 : 0;
  if (broken && lastDetail) log(`last deployment detail: ${JSON.stringify({ ...lastDetail, instances: undefined })}`);
} catch (err) {
  log(`run failed: ${(err as Error).stack ?? String(err)}`);
  for (const m of fleet.members) if (m.process) log(`controller ${m.name} output (tail):\n${m.process.output().slice(-4_000)}`);
  fleet.daemons.forEach((d, i) => log(`daemon ${i} output (tail):\n${d.output().slice(-4_000)}`));
} finally {
  if (controllerLogsDir) {
    mkdirSync(controllerLogsDir, { recursive: true });
    for (const m of fleet.members) if (m.process) writeFileSync(join(controllerLogsDir, `controller-${m.name}.log`), m.process.output());
  }
  const { serversLeft } = await fleet.close();
  result.serversLeft = serversLeft;
  if (serversLeft > 0) exitCode = 1;
}
console.log(`RESULT ${JSON.stringify(result)}`);
process.exit(exitCode);
