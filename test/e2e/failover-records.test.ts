// Records that never lie across a failover: three controller processes on the production profile
// (shared PostgreSQL, Redis, one Raft cluster), one cloud-daemon that knows every controller, a
// DYNAMIC group of simulated servers. In seeded rounds (RECORD_ROUNDS, default 3):
// - a stop or force-stop is acknowledged by the group's lease holder 0–300 ms before that holder is
//   killed with SIGKILL;
// - instances are booting (a scale-up) when the controller holding the daemon's stream is killed.
// After each kill, within the settle window (lease TTL + one reconciliation interval + the time to
// start a replacement), every RUNNING or STARTING record has exactly one live process, every live
// process of the group a live record, the group is back at its target, and every acknowledged stop
// is STOPPED with no process. The victim is started again before the next round.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Redis } from "ioredis";
import { Prng } from "../raft/sim/prng.js";
import { serverProcesses } from "../support/instance-processes.js";
import { ClusterHarness, type ClusterMemberProcess } from "./cluster-harness.js";
import { eventually } from "../support/wait.js";
import { cleanupDirs, spawnDaemon, type DaemonProcess } from "../gateway/harness.js";
import { startPostgresServer, type PostgresServer } from "../support/postgres-server.js";
import { startRedisServer, type RedisServer } from "../support/redis-server.js";

const evaluationIntervalSeconds = 1;
const reconcileIntervalSeconds = 3;
const leaseTtlMs = 2 * evaluationIntervalSeconds * 1000;
/** Lease TTL + one reconciliation interval, plus the time a replacement takes to boot on a loaded machine. */
const settleMs = leaseTtlMs + reconcileIntervalSeconds * 1000 + 20_000;
const waitMs = 90_000;
const rounds = Number(process.env.RECORD_ROUNDS ?? 3);
/** How long the last booting round keeps the killed controller down (the issue asks for 30 s). */
const downMs = Number(process.env.RECORD_DOWN_MS ?? 30_000);
const seed = Number(process.env.RECORD_SEED ?? 20261125);
const group = "records";
/** The group's size; each booting round adds one. */
let target = 5;
const LIVE = new Set(["SCHEDULED", "PREPARING", "STARTING", "RUNNING", "DRAINING", "STOPPING"]);

interface Instance {
  id: string;
  node: string;
  state: string;
}

describe("failover leaves no record that lies", { timeout: 900_000 }, () => {
  let postgres: PostgresServer;
  let redis: RedisServer;
  let redisClient: Redis;
  let harness: ClusterHarness;
  let members: ClusterMemberProcess[] = [];
  let daemon: DaemonProcess;
  let nodeId = "";
  const prng = new Prng(seed);
  const acknowledgedStops = new Set<string>();
  const settleTimes: number[] = [];

  const live = () => members.filter((m) => m.process !== null);
  const call = async (method: string, path: string, body?: unknown) => {
    let last: unknown;
    for (const m of live()) {
      try {
        return await m.call(method, path, body);
      } catch (err) {
        last = err;
      }
    }
    throw last ?? new Error("no controller running");
  };
  const records = async () => (await call("GET", `/api/v1/services?group=${group}`)).json as Instance[];
  const processes = () => new Map([...serverProcesses()].filter(([id]) => id.startsWith(`${group}-`)));
  const controllerIdOf = async (m: ClusterMemberProcess) => {
    const view = (await m.call("GET", "/api/v1/cluster/members")).json.members as { nodeId: string; raftAddr: string }[];
    return view.find((x) => x.raftAddr.endsWith(`:${m.raftPort}`))?.nodeId ?? null;
  };
  const memberById = async (controllerId: string) => {
    for (const m of live()) if ((await controllerIdOf(m)) === controllerId) return m;
    return null;
  };
  const leaseHolder = async () => {
    const [controllerId, token] = ((await redisClient.get(`cloud:v1:lease:group:${group}`)) ?? "").split("|");
    return /^\d+$/.test(token ?? "") ? memberById(controllerId) : null;
  };
  const sessionHolder = async () => {
    const value = await redisClient.get(`cloud:v1:session:node:${nodeId}`);
    return value ? memberById((JSON.parse(value) as { controllerId: string }).controllerId) : null;
  };

  /** Why the records and the processes disagree, or null when they match (`booting`: STARTING counts toward the target). */
  const disagreement = async (booting: boolean): Promise<string | null> => {
    const now = await records();
    const procs = processes();
    for (const r of now) {
      const pids = procs.get(r.id) ?? [];
      if ((r.state === "RUNNING" || r.state === "STARTING") && pids.length !== 1) return `${r.id} is ${r.state} with ${pids.length} processes`;
    }
    for (const [id, pids] of procs) {
      const r = now.find((x) => x.id === id);
      if (pids.length !== 1) return `${id} runs ${pids.length} times`;
      if (!r || !LIVE.has(r.state)) return `${id} runs (pid ${pids[0]}) but its record is ${r?.state ?? "missing"}`;
    }
    for (const id of acknowledgedStops) {
      const r = now.find((x) => x.id === id);
      if (r && r.state !== "STOPPED") return `${id} was stopped (acknowledged) but its record is ${r.state}`;
      if (procs.has(id)) return `${id} was stopped (acknowledged) but still runs`;
    }
    const serving = now.filter((r) => r.state === "RUNNING" || (booting && r.state === "STARTING")).length;
    if (serving !== target) return `${serving} of ${target} ${booting ? "RUNNING or STARTING" : "RUNNING"}`;
    if (now.some((r) => r.state !== "STOPPED" && r.state !== "CRASHED" && r.state !== "RUNNING" && !(booting && r.state === "STARTING")))
      return `not settled: ${now.map((r) => `${r.id}=${r.state}`).join(" ")}`;
    return null;
  };
  const settle = async (killedAtMs: number, booting: boolean, what: string) => {
    let last: string | null = "";
    await eventually(
      async () => {
        last = await disagreement(booting);
        return last === null;
      },
      () => `${what}: records match processes within ${settleMs} ms (last: ${last})`,
      settleMs,
    ).catch(async (err: unknown) => {
      const logs = live().map(
        (m) =>
          `--- ${m.name}\n${m.process
            ?.output()
            .split("\n")
            .filter((l) => /WARN|ERROR|no longer runs|Completing|adopted/.test(l))
            .slice(-15)
            .join("\n")}`,
      );
      throw new Error(`${(err as Error).message}\n${JSON.stringify(await records())}\n${logs.join("\n")}`);
    });
    const ms = Date.now() - killedAtMs;
    settleTimes.push(ms);
    return ms;
  };

  before(async () => {
    [postgres, redis] = await Promise.all([startPostgresServer(), startRedisServer()]);
    redisClient = new Redis(redis.uri, { lazyConnect: false, maxRetriesPerRequest: 2 });
    harness = new ClusterHarness({
      runtime: { profile: "production" },
      database: { uri: postgres.uri },
      kvstore: { uri: redis.uri },
      scheduler: { evaluationIntervalSeconds, reconcileIntervalSeconds },
    });
    members = await harness.startThree();
    const [a] = members;
    const token = (await a.call("POST", "/api/v1/admin/tokens", {})).json.token as string;
    daemon = spawnDaemon(
      members.map((m) => m.grpcAddr),
      token,
      { maxMemoryMb: 4096, reconnectDelayMaxMs: 1_000 },
    );
    const nodes = await eventually(
      async () => {
        const online = (await a.call("GET", "/api/v1/nodes?state=ONLINE")).json as { id: string }[];
        return online.length === 1 ? online : null;
      },
      "the node ONLINE",
      waitMs,
    );
    nodeId = nodes[0].id;
    const created = await a.call("POST", "/api/v1/groups", {
      name: group,
      platform: "simulated",
      minInstances: target,
      maxInstances: 20,
      memoryMb: 64,
      portRange: { start: 28000, end: 28200 },
    });
    assert.equal(created.status, 201, created.text);
    let last: string | null = "";
    await eventually(
      async () => (last = await disagreement(false)) === null,
      () => `${target} RUNNING (last: ${last})`,
      waitMs,
    );
  });

  after(async () => {
    await daemon?.stop();
    await harness?.close();
    redisClient?.disconnect();
    await redis?.stop();
    await postgres?.stop();
    cleanupDirs();
    if (settleTimes.length > 0) console.log(`kill → records match processes (ms): ${settleTimes.join(", ")}`);
  });

  const restart = async (victim: ClusterMemberProcess) => {
    await harness.launch(victim);
    await eventually(async () => (await victim.call("GET", "/api/v1/system/ready")).status === 200, `${victim.name} READY again`, waitMs);
  };

  it(`a stop or force-stop acknowledged by the lease holder 0–300 ms before its SIGKILL is never lost (${rounds} rounds, seed ${seed})`, async () => {
    for (let round = 0; round < rounds; round++) {
      const holder = await eventually(leaseHolder, "a lease holder", waitMs);
      const running = (await records()).filter((r) => r.state === "RUNNING");
      const victimId = running[Math.floor(prng.nextFloat() * running.length)].id;
      const force = round % 2 === 1;
      const delayMs = Math.floor(prng.nextFloat() * 300);
      const reply = await holder.call("POST", `/api/v1/services/${victimId}/${force ? "force-stop" : "stop"}`);
      assert.equal(reply.status, 202, reply.text);
      acknowledgedStops.add(victimId);
      await new Promise((r) => setTimeout(r, delayMs));
      const killedAtMs = Date.now();
      await harness.kill9(holder);
      holder.process = null;
      const ms = await settle(
        killedAtMs,
        false,
        `round ${round}: ${force ? "force-stop" : "stop"} of ${victimId} ${delayMs} ms before the kill of ${holder.name}`,
      );
      console.log(
        `round ${round}: ${force ? "force-stop" : "stop"} ${delayMs} ms before SIGKILL of the lease holder ${holder.name}: records match processes after ${ms} ms`,
      );
      await restart(holder);
    }
  });

  it(`instances booting when the controller holding the daemon's stream is killed: records match processes after the settle window (${rounds} rounds)`, async () => {
    let seenBooting = 0;
    for (let round = 0; round < rounds; round++) {
      const streamHolder = await eventually(sessionHolder, "the daemon's controller", waitMs);
      // One more instance: it boots while the controller the daemon talks to is killed.
      const scaled = await call("PATCH", `/api/v1/groups/${group}`, { minInstances: target + 1 });
      assert.equal(scaled.status, 200, scaled.text);
      target += 1;
      // A simulated server boots in a few hundred ms: watch closely for it, then kill within 0–50 ms.
      let booting: string[] = [];
      for (const until = Date.now() + 5_000; booting.length === 0 && Date.now() < until;) {
        booting = (await records())
          .filter((r) => r.state === "SCHEDULED" || r.state === "PREPARING" || r.state === "STARTING")
          .map((r) => `${r.id}=${r.state}`);
        if (booting.length === 0) await new Promise((r) => setTimeout(r, 5));
      }
      await new Promise((r) => setTimeout(r, Math.floor(prng.nextFloat() * 50)));
      const killedAtMs = Date.now();
      await harness.kill9(streamHolder);
      streamHolder.process = null;
      const ms = await settle(killedAtMs, true, `round ${round}: booting when ${streamHolder.name} was killed`);
      seenBooting += booting.length > 0 ? 1 : 0;
      console.log(
        `round ${round}: SIGKILL of the daemon's controller ${streamHolder.name} with ${booting.join(", ") || "no instance seen booting"}: records match processes after ${ms} ms`,
      );
      if (round === rounds - 1) {
        // The last round keeps the killed controller down (30 s by default): the instance that was
        // booting must reach RUNNING through the survivors, and stay matched, while it is gone.
        let last: string | null = "";
        await eventually(
          async () => (last = await disagreement(false)) === null,
          () => `round ${round}: every instance RUNNING while ${streamHolder.name} stays down (last: ${last})`,
          waitMs,
        );
        const runningAfterMs = Date.now() - killedAtMs;
        await new Promise((r) => setTimeout(r, Math.max(0, killedAtMs + downMs - Date.now())));
        assert.equal(await disagreement(false), null, `records still match processes ${downMs} ms after the kill`);
        console.log(`round ${round}: ${streamHolder.name} kept down ${Date.now() - killedAtMs} ms; all RUNNING after ${runningAfterMs} ms`);
      }
      await restart(streamHolder);
    }
    assert.ok(seenBooting > 0, "at least one kill found an instance booting");
  });
});
