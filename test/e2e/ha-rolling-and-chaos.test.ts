// Failover under load, on three production controllers (shared PostgreSQL and Redis, one Raft
// cluster), two daemons that know every controller and simulated servers:
// - rolling upgrade: each controller is restarted in turn, waiting for /system/ready and a stable
//   member list and leader between steps; no instance restarts and no read fails;
// - with two of three controllers down, reads and lease-gated scheduling go on while Raft writes
//   fail with RAFT_UNAVAILABLE;
// - chaos (seeded, bounded): a random controller — often the Raft leader — is killed with SIGKILL
//   and restarted, over and over, while groups are created, scaled and deleted and instances
//   crash. At every step and at the end: no instance id runs twice at once, every acknowledged
//   group write is present, and every group converges to its desired count.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Prng } from "../raft/sim/prng.js";
import { serverProcesses } from "../support/instance-processes.js";
import type { ClusterHarness, ClusterMemberProcess } from "./cluster-harness.js";
import { productionCluster, type ProductionCluster } from "./production-cluster.js";
import { eventually } from "../support/wait.js";
import { cleanupDirs } from "../gateway/harness.js";

const waitMs = 90_000;
/** Chaos rounds (each: a kill, a restart and a few mutations); CHAOS_ROUNDS overrides. */
const chaosRounds = Number(process.env.CHAOS_ROUNDS ?? 4);
const chaosSeed = Number(process.env.CHAOS_SEED ?? 20261123);

function assertNoDuplicates(where: string): void {
  for (const [id, pids] of serverProcesses()) assert.ok(pids.length === 1, `${where}: ${id} runs ${pids.length} times (${pids.join(", ")})`);
}

describe("controller failover", { timeout: 900_000 }, () => {
  let production: ProductionCluster;
  let harness: ClusterHarness;
  let members: ClusterMemberProcess[] = [];

  const live = () => members.filter((m) => m.process !== null);
  /** A call to any running controller, trying the others when one fails to answer. */
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
  const runningOf = async (group: string) => ((await call("GET", `/api/v1/services?group=${group}&state=RUNNING`)).json as { id: string }[]).length;
  type MemberView = { nodeId: string; raftAddr: string; role: string; leader: boolean };
  const membersSeenBy = async (m: ClusterMemberProcess) => (await m.call("GET", "/api/v1/cluster/members")).json.members as MemberView[];
  const stableCluster = async () => {
    const views = await Promise.all(live().map(membersSeenBy));
    const leaders = views.map((v) =>
      v
        .filter((x) => x.leader)
        .map((x) => x.nodeId)
        .join(","),
    );
    return (
      views.every((v) => v.length === 3 && v.every((x) => x.role === "voter")) && new Set(leaders).size === 1 && leaders[0] !== "" && !leaders[0].includes(",")
    );
  };
  const ready = async (m: ClusterMemberProcess) => (await m.call("GET", "/api/v1/system/ready")).status === 200;

  before(async () => {
    production = await productionCluster({
      config: { scheduler: { evaluationIntervalSeconds: 1 } },
      daemons: 2,
      daemonControllerOffset: 1,
      daemonConfig: { maxMemoryMb: 4096, reconnectDelayMaxMs: 1_000 },
      nodesOnlineWaitMs: waitMs,
    });
    ({ harness, members } = production);
    const [a] = members;
    await a.call("POST", "/api/v1/groups", {
      name: "steady",
      platform: "simulated",
      minInstances: 3,
      maxInstances: 6,
      memoryMb: 64,
      portRange: { start: 27000, end: 27200 },
    });
    await eventually(async () => (await runningOf("steady")) === 3, "steady: 3 RUNNING", waitMs);
  });

  after(async () => {
    await production?.stop();
    cleanupDirs();
  });

  it("rolling upgrade: each controller restarted in turn, no instance restarts and no read fails", async () => {
    const before = serverProcesses();
    const ids = ((await call("GET", "/api/v1/services?group=steady")).json as { id: string }[]).map((i) => i.id).sort();
    let reads = 0;
    let failedReads = 0;
    let polling = true;
    let restarting: ClusterMemberProcess | null = null;
    const poller = (async () => {
      while (polling) {
        // Reads go to a controller that is up: the operator's load balancer drains the one restarting.
        const targets = live().filter((m) => m !== restarting);
        const target = targets[reads % Math.max(1, targets.length)];
        reads++;
        try {
          const reply = await target.call("GET", "/api/v1/services?group=steady");
          if (reply.status !== 200) failedReads++;
        } catch {
          failedReads++;
        }
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    for (const member of members) {
      restarting = member;
      await harness.stop(member);
      member.process = null;
      await harness.launch(member);
      await eventually(() => ready(member), `${member.name} READY`, waitMs);
      restarting = null;
      await eventually(stableCluster, `stable members and leader after restarting ${member.name}`, waitMs);
    }
    polling = false;
    await poller;
    assert.equal(failedReads, 0, `${failedReads} of ${reads} reads failed`);
    await eventually(async () => (await runningOf("steady")) === 3, "steady still 3 RUNNING", waitMs);
    const after = ((await call("GET", "/api/v1/services?group=steady")).json as { id: string }[]).map((i) => i.id).sort();
    assert.deepEqual(after, ids, "the same instances");
    const now = serverProcesses();
    for (const id of ids) assert.deepEqual(now.get(id), before.get(id), `${id} was not restarted`);
    console.log(`rolling restart of 3 controllers: ${reads} reads, ${failedReads} failed, 0 instance restarts`);
  });

  it(`chaos: ${chaosRounds} rounds of SIGKILL and restart under mutations (seed ${chaosSeed})`, async () => {
    const prng = new Prng(chaosSeed);
    const random = () => prng.nextFloat();
    const pick = <T>(list: readonly T[]) => list[Math.floor(random() * list.length)];
    const desired = new Map<string, number>([["steady", 3]]);
    let serial = 0;
    for (let round = 0; round < chaosRounds; round++) {
      // The victim: the Raft leader half of the time, else anyone.
      const byId = new Map<string, ClusterMemberProcess>();
      let leaderId = "";
      for (const m of live()) {
        const view = await membersSeenBy(m);
        leaderId ||= view.find((x) => x.leader)?.nodeId ?? "";
        const me = view.find((x) => x.raftAddr.endsWith(`:${m.raftPort}`));
        if (me) byId.set(me.nodeId, m);
      }
      const victim = random() < 0.5 && byId.has(leaderId) ? byId.get(leaderId)! : pick(live());
      await harness.kill9(victim);
      victim.process = null;

      // Mutations while a controller is down: each acknowledged one must stick.
      const action = pick(["create", "scale", "delete", "crash"] as const);
      if (action === "create" || desired.size === 1) {
        const name = `chaos-${++serial}`;
        const count = 1 + Math.floor(random() * 3);
        const reply = await call("POST", "/api/v1/groups", {
          name,
          platform: "simulated",
          minInstances: count,
          maxInstances: 6,
          memoryMb: 64,
          portRange: { start: 27300 + serial * 20, end: 27319 + serial * 20 },
        });
        if (reply.status === 201) desired.set(name, count);
      } else if (action === "scale") {
        const name = pick([...desired.keys()]);
        const count = 1 + Math.floor(random() * 4);
        const reply = await call("PATCH", `/api/v1/groups/${name}`, { minInstances: count });
        if (reply.status === 200) desired.set(name, count);
      } else if (action === "delete") {
        const name = pick([...desired.keys()].filter((n) => n !== "steady"));
        const reply = await call("DELETE", `/api/v1/groups/${name}`);
        if (reply.status === 204) desired.delete(name);
      } else {
        const running = (await call("GET", "/api/v1/services?state=RUNNING")).json as { id: string }[];
        if (running.length > 0) await call("POST", `/api/v1/services/${pick(running).id}/command`, { command: "crash 3" });
      }
      assertNoDuplicates(`round ${round} after ${action}`);

      await harness.launch(victim);
      await eventually(() => ready(victim), `${victim.name} READY again`, waitMs);
      assertNoDuplicates(`round ${round} after restarting ${victim.name}`);
    }
    // Every acknowledged write is there, and every group converges.
    const groups = new Set(((await call("GET", "/api/v1/groups")).json as { name: string }[]).map((g) => g.name));
    assert.deepEqual([...groups].sort(), [...desired.keys()].sort(), "exactly the acknowledged groups");
    for (const [name, count] of desired) {
      const group = (await call("GET", `/api/v1/groups/${name}`)).json;
      assert.equal(group.minInstances, count, `${name}: the acknowledged minInstances`);
      if (group.paused) await call("POST", `/api/v1/groups/${name}/resume`);
      await eventually(async () => (await runningOf(name)) === count, `${name} converges to ${count} RUNNING`, waitMs);
    }
    assertNoDuplicates("the end");
  });

  it("with 2 of 3 controllers down: reads and lease-gated scheduling go on, Raft writes fail with RAFT_UNAVAILABLE", async () => {
    const [survivor, ...down] = live();
    for (const m of down) {
      await harness.kill9(m);
      m.process = null;
    }
    assert.equal((await survivor.call("GET", "/api/v1/services?group=steady")).status, 200, "reads go on");
    const target = (await runningOf("steady")) + 1;
    assert.equal((await survivor.call("PATCH", "/api/v1/groups/steady", { minInstances: target })).status, 200);
    await eventually(async () => (await runningOf("steady")) === target, `steady scales to ${target} with the Raft quorum gone`, waitMs);
    const token = await survivor.call("POST", "/api/v1/cluster/join-tokens", { joinAddrs: [survivor.grpcAddr] });
    assert.equal(token.status, 503, token.text);
    assert.equal(token.json.error.code, "RAFT_UNAVAILABLE");
    assertNoDuplicates("two controllers down");
    for (const m of down) {
      await harness.launch(m);
      await eventually(() => ready(m), `${m.name} READY again`, waitMs);
    }
    await eventually(stableCluster, "the cluster is whole again", waitMs);
    assert.equal((await survivor.call("POST", "/api/v1/cluster/join-tokens", { joinAddrs: [survivor.grpcAddr] })).status, 201, "Raft writes work again");
  });
});
