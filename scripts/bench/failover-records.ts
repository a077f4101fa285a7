// Failover benchmark of the records: three controllers on the production profile (their own
// PostgreSQL and Redis, one Raft cluster), two node daemons that know every controller, one group of
// `--instances` simulated servers (failover-fleet.ts). Each of `--rounds` rounds asks the group's
// lease holder to stop (even rounds) or force-stop (odd rounds) one RUNNING instance, waits a
// seeded 0–300 ms after the 202, kills that holder with SIGKILL and measures from the kill:
//
// - lease: until cloud:v1:lease:group:<group> names a survivor;
// - records: until the records match the processes — the stopped instance's record STOPPED and no
//   process of it, every RUNNING or STARTING record with exactly one process, every process with a
//   live record (target: the lease TTL plus one reconciliation interval);
// - target: until the group is back at `--instances` RUNNING or STARTING, each with one process (a
//   replacement whose plugin ready call went to the killed controller stays STARTING until its
//   start timeout; the victim is started again once the records match).
//
// The victim is restarted and everything settled before the next round.
//
//   npx tsx scripts/bench/failover-records.ts [--interval 15] [--reconcile 30] [--instances 8] [--rounds 5]
//
// `--interval` is scheduler.evaluationIntervalSeconds (production default 15; the lease TTL is twice
// it), `--reconcile` scheduler.reconcileIntervalSeconds (default 30). Prints the rounds and the
// summary as Markdown tables and one line `RESULT {...}`. Every process started is stopped and every
// directory removed, also on failure or SIGINT; the exit status is 1 when the run did not finish, a
// stop was lost or a server was left behind.
import { execFileSync } from "node:child_process";
import { Prng } from "../../test/raft/sim/prng.js";
import { eventually } from "../../test/support/wait.js";
import { FailoverFleet, serverProcessesOf } from "./failover-fleet.js";
import { pollUntil, readLease } from "./failover-probes.js";

function argNumber(name: string, fallback: number): number {
  const at = process.argv.indexOf(name);
  if (at < 0) return fallback;
  const value = Number(process.argv[at + 1]);
  if (!Number.isFinite(value) || value <= 0) throw new Error(`${name} needs a positive number`);
  return value;
}

const evaluationIntervalSeconds = argNumber("--interval", 15);
const reconcileIntervalSeconds = argNumber("--reconcile", 30);
const instances = Math.round(argNumber("--instances", 8));
const rounds = Math.round(argNumber("--rounds", 5));
const seed = Math.round(argNumber("--seed", 20261125));
const leaseTtlMs = 2 * evaluationIntervalSeconds * 1000;
const recordsTargetMs = leaseTtlMs + reconcileIntervalSeconds * 1000;
const probeTimeoutMs = 3 * recordsTargetMs + 120_000;
const POLL_MS = 50;

const startedAtMs = Date.now();
const log = (line: string) => process.stderr.write(`[+${((Date.now() - startedAtMs) / 1000).toFixed(1)} s] ${line}\n`);
const LIVE = new Set(["SCHEDULED", "PREPARING", "STARTING", "RUNNING", "DRAINING", "STOPPING"]);

interface Instance {
  id: string;
  state: string;
}
interface RoundRecord {
  round: number;
  kind: "stop" | "force-stop";
  delayMs: number;
  victim: string;
  leaseMs: number | null;
  recordsMs: number | null;
  targetMs: number | null;
  stoppedAs: string;
}

const fleet = new FailoverFleet({
  evaluationIntervalSeconds,
  reconcileIntervalSeconds,
  instances,
  daemonReconnectDelayMinMs: 500,
  daemonReconnectDelayMaxMs: 5_000,
  log,
});
const onSignal = (signal: string) => {
  log(`${signal}: stopping everything`);
  void fleet.close().finally(() => process.exit(130));
};
process.once("SIGINT", () => onSignal("SIGINT"));
process.once("SIGTERM", () => onSignal("SIGTERM"));

async function records(): Promise<Instance[]> {
  for (const m of fleet.running()) {
    try {
      const reply = await m.call("GET", `/api/v1/services?group=${fleet.group}`);
      if (reply.status === 200) return reply.json as Instance[];
    } catch {
      // the next controller
    }
  }
  throw new Error("no controller answers");
}

/** Null when the records match the processes (and the stopped ones are STOPPED with no process). */
async function mismatch(stopped: ReadonlySet<string>): Promise<string | null> {
  const now = await records();
  const procs = serverProcessesOf(fleet.group);
  for (const r of now)
    if ((r.state === "RUNNING" || r.state === "STARTING") && (procs.get(r.id)?.length ?? 0) !== 1)
      return `${r.id} ${r.state} with ${procs.get(r.id)?.length ?? 0} processes`;
  for (const [id, pids] of procs) {
    const r = now.find((x) => x.id === id);
    if (pids.length !== 1 || !r || !LIVE.has(r.state)) return `${id}: ${pids.length} processes, record ${r?.state ?? "missing"}`;
  }
  for (const id of stopped) {
    const r = now.find((x) => x.id === id);
    if ((r && r.state !== "STOPPED") || procs.has(id)) return `${id} stopped but ${r?.state}`;
  }
  return null;
}

/**
 * The group holds `--instances` RUNNING or STARTING instances, each with one process. STARTING
 * counts: a replacement whose plugin ready call went to the killed controller stays STARTING until
 * its start timeout (its record still matches its process).
 */
async function atTarget(): Promise<boolean> {
  const serving = (await records()).filter((r) => r.state === "RUNNING" || r.state === "STARTING");
  const procs = serverProcessesOf(fleet.group);
  return serving.length === instances && serving.every((r) => procs.get(r.id)?.length === 1);
}

async function oneRound(round: number, prng: Prng, stopped: Set<string>): Promise<RoundRecord> {
  const lease = await eventually(() => readLease(fleet.redis, fleet.group), "a lease holder", probeTimeoutMs);
  const holder = fleet.memberById(lease.controllerId);
  if (!holder?.process) throw new Error(`lease holder ${lease.controllerId} is not running`);
  const running = (await records()).filter((r) => r.state === "RUNNING");
  const victim = running[Math.floor(prng.nextFloat() * running.length)]!.id;
  const kind = round % 2 === 0 ? "stop" : "force-stop";
  const delayMs = Math.floor(prng.nextFloat() * 300);
  const reply = await holder.call("POST", `/api/v1/services/${victim}/${kind}`);
  if (reply.status !== 202) throw new Error(`${kind} of ${victim}: ${reply.status} ${reply.text}`);
  stopped.add(victim);
  await new Promise((r) => setTimeout(r, delayMs));
  const killedAtMs = Date.now();
  await fleet.kill(holder);
  log(`round ${round}: ${kind} of ${victim} acknowledged by ${holder.name}, SIGKILL ${delayMs} ms later`);
  const targetProbe = pollUntil(async () => ((await atTarget()) && (await mismatch(stopped)) === null ? true : null), probeTimeoutMs, POLL_MS);
  const [leaseMoved, matched] = await Promise.all([
    pollUntil(
      async () => {
        const now = await readLease(fleet.redis, fleet.group);
        return now && now.controllerId !== lease.controllerId ? now : null;
      },
      probeTimeoutMs,
      25,
    ),
    pollUntil(async () => ((await mismatch(stopped)) === null ? true : null), probeTimeoutMs, POLL_MS),
  ]);
  const stoppedAs = (await records()).find((r) => r.id === victim)?.state ?? "deleted";
  // The victim comes back as soon as the records match, as an operator's restart would.
  await fleet.restart(holder);
  const target = await targetProbe;
  await eventually(async () => (await holder.call("GET", "/api/v1/system/ready")).status === 200, `${holder.name} READY`, probeTimeoutMs);
  return {
    round,
    kind,
    delayMs,
    victim,
    leaseMs: leaseMoved ? leaseMoved.atMs - killedAtMs : null,
    recordsMs: matched ? matched.atMs - killedAtMs : null,
    targetMs: target ? target.atMs - killedAtMs : null,
    stoppedAs,
  };
}

const quantile = (values: number[], q: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length === 0 ? null : sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;
};
const fmt = (v: number | null) => (v === null ? "—" : `${(v / 1000).toFixed(2)} s`);

let finished = false;
let serversLeft: number;
const results: RoundRecord[] = [];
const commit = (() => {
  try {
    return execFileSync("git", ["rev-parse", "--short", "HEAD"], { encoding: "utf8" }).trim();
  } catch {
    return "unknown";
  }
})();
log(
  `interval ${evaluationIntervalSeconds} s (lease TTL ${leaseTtlMs} ms), reconcile ${reconcileIntervalSeconds} s, ${instances} instances, ${rounds} rounds, seed ${seed}, commit ${commit}`,
);
try {
  await fleet.start();
  await eventually(async () => (await atTarget()) && (await mismatch(new Set())) === null, `${instances} RUNNING`, probeTimeoutMs);
  const prng = new Prng(seed);
  const stopped = new Set<string>();
  for (let round = 0; round < rounds; round++) {
    const result = await oneRound(round, prng, stopped);
    results.push(result);
    log(`round ${round}: lease ${fmt(result.leaseMs)}, records ${fmt(result.recordsMs)}, target ${fmt(result.targetMs)}, ${result.victim} ${result.stoppedAs}`);
    let last = "";
    await eventually(
      async () => {
        const now = await records();
        last = `${(await mismatch(stopped)) ?? "records match"}; ${now
          .filter((r) => r.state !== "STOPPED" && r.state !== "CRASHED")
          .map((r) => `${r.id}=${r.state}`)
          .join(" ")}`;
        return (await atTarget()) && (await mismatch(stopped)) === null;
      },
      () => `settled before the next round (last: ${last})`,
      probeTimeoutMs,
    );
  }
  finished = true;
} catch (err) {
  log(`run failed: ${(err as Error).stack ?? String(err)}`);
  for (const m of fleet.members) if (m.process) log(`controller ${m.name} output (tail):\n${m.process.output().slice(-4_000)}`);
} finally {
  serversLeft = (await fleet.close()).serversLeft;
}

console.log("| round | kind | delay before SIGKILL | lease moved | records match processes | group at target | stopped instance |");
console.log("|---|---|---|---|---|---|---|");
for (const r of results)
  console.log(`| ${r.round} | ${r.kind} | ${r.delayMs} ms | ${fmt(r.leaseMs)} | ${fmt(r.recordsMs)} | ${fmt(r.targetMs)} | ${r.stoppedAs} |`);
const recordsMs = results.map((r) => r.recordsMs).filter((v): v is number => v !== null);
const targetMs = results.map((r) => r.targetMs).filter((v): v is number => v !== null);
const lost = results.filter((r) => r.stoppedAs !== "STOPPED" && r.stoppedAs !== "deleted").length;
console.log("");
console.log("| measure | p50 | max | target |");
console.log("|---|---|---|---|");
console.log(`| SIGKILL → records match processes | ${fmt(quantile(recordsMs, 0.5))} | ${fmt(quantile(recordsMs, 1))} | ${fmt(recordsTargetMs)} |`);
console.log(`| SIGKILL → group at target | ${fmt(quantile(targetMs, 0.5))} | ${fmt(quantile(targetMs, 1))} | |`);
const result = {
  commit,
  evaluationIntervalSeconds,
  reconcileIntervalSeconds,
  instances,
  rounds: results.length,
  finished,
  lostStops: lost,
  serversLeft,
  recordsMs,
  targetMs,
};
console.log(`RESULT ${JSON.stringify(result)}`);
process.exit(finished && lost === 0 && serversLeft === 0 ? 0 : 1);
