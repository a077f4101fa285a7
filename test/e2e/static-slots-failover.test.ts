// STATIC slots across a controller failover: three controller processes on the production profile
// (shared PostgreSQL, Redis, one Raft cluster), two cloud-daemon processes, simulated servers. An
// operator stops one slot through a controller that does not schedule the group; the group's lease
// holder is killed with SIGKILL; the survivor that takes the group over keeps the stopped slot
// stopped, refills a slot that crashes under its id on its node, and starts the stopped slot again
// on its node when the group is started: same ids, same directories, files written before there.
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Redis } from "ioredis";
import { serverProcesses } from "../support/instance-processes.js";
import type { ClusterHarness, ClusterMemberProcess } from "./cluster-harness.js";
import { productionCluster, type ProductionCluster } from "./production-cluster.js";
import { eventually } from "../support/wait.js";
import type { DaemonProcess } from "../gateway/harness.js";

const evaluationIntervalSeconds = 1;
const waitMs = 60_000;
const group = "keepsake";
const ids = [`${group}-1`, `${group}-2`];

interface Instance {
  id: string;
  node: string;
  state: string;
}

describe("STATIC slots across a controller failover", { timeout: 600_000 }, () => {
  let production: ProductionCluster;
  let redisClient: Redis;
  let harness: ClusterHarness;
  let members: ClusterMemberProcess[] = [];
  let daemons: DaemonProcess[] = [];
  const homes = new Map<string, string>();
  const dirOf = new Map<string, string>();

  const holderId = async () => {
    const value = await redisClient.get(`cloud:v1:lease:group:${group}`);
    const [controllerId, token] = (value ?? "").split("|");
    return /^\d+$/.test(token ?? "") ? controllerId : null;
  };
  const killed = new Set<ClusterMemberProcess>();
  const memberById = async (controllerId: string) => {
    for (const m of members) {
      if (!m.process || killed.has(m)) continue;
      const cluster = (await m.call("GET", "/api/v1/cluster/members")).json.members as { nodeId: string; raftAddr: string }[];
      if (cluster.find((x) => x.raftAddr.endsWith(`:${m.raftPort}`))?.nodeId === controllerId) return m;
    }
    return null;
  };
  const pidOf = (id: string) => serverProcesses().get(id) ?? [];
  const listOn = async (m: ClusterMemberProcess) =>
    ((await m.call("GET", `/api/v1/services?group=${group}`)).json as Instance[]).sort((a, b) => (a.id < b.id ? -1 : 1));
  const diagnostics = async (m: ClusterMemberProcess) =>
    `${JSON.stringify(await listOn(m))}\n${members
      .filter((x) => !killed.has(x))
      .map(
        (x) =>
          `--- ${x.name}\n${
            x.process
              ?.output()
              .split("\n")
              .filter((l) => /WARN|ERROR|keepsake/.test(l))
              .slice(-20)
              .join("\n") ?? "(stopped)"
          }`,
      )
      .join("\n")}`;

  before(async () => {
    production = await productionCluster({
      config: { scheduler: { evaluationIntervalSeconds } },
      daemons: 2,
      daemonControllerOffset: 1,
      daemonConfig: { maxMemoryMb: 2048 },
      nodesOnlineWaitMs: waitMs,
    });
    ({ harness, members, daemons } = production);
    redisClient = new Redis(production.redis.uri, { lazyConnect: false, maxRetriesPerRequest: 2 });
  });

  after(async () => {
    redisClient?.disconnect();
    await production?.stop();
  });

  it("an operator's stop through another controller holds the slot across a SIGKILL of the lease holder; a crash refills under the same id; a start brings the stopped slot back on its directory", async () => {
    const [a] = members;
    const created = await a.call("POST", "/api/v1/groups", {
      name: group,
      platform: "simulated",
      scalingMode: "STATIC",
      minInstances: 2,
      memoryMb: 128,
      portRange: { start: 22500, end: 22510 },
    });
    assert.equal(created.status, 201, created.text);
    const up = await eventually(
      async () => {
        const now = await listOn(a);
        return now.length === 2 && now.every((i) => i.state === "RUNNING") ? now : null;
      },
      "2 RUNNING",
      waitMs,
    );
    assert.deepEqual(
      up.map((i) => i.id),
      ids,
    );
    for (const i of up) {
      homes.set(i.id, i.node);
      const daemon = daemons.find((d) => readFileSync(join(d.dataDir, "node-id"), "utf8").trim() === i.node)!;
      dirOf.set(i.id, join(daemon.dataDir, "..", "work", "static", group, i.id));
      writeFileSync(join(dirOf.get(i.id)!, "world.dat"), `${i.id} before the failover`);
    }

    // Stop keepsake-1 through a controller that does not schedule the group.
    const holder = (await eventually(holderId, "a lease holder", waitMs))!;
    const victim = (await memberById(holder))!;
    const others = members.filter((m) => m !== victim);
    const stopped = await others[0].call("POST", `/api/v1/services/${ids[0]}/stop`);
    assert.equal(stopped.status, 202, stopped.text);
    await eventually(async () => (await listOn(others[0])).find((i) => i.id === ids[0])?.state === "STOPPED", `${ids[0]} STOPPED`, waitMs);
    assert.deepEqual((await others[0].call("GET", `/api/v1/groups/${group}`)).json.stoppedInstances, [ids[0]]);
    const pidBefore = pidOf(ids[1]);
    assert.equal(pidBefore.length, 1);

    await harness.kill9(victim);
    killed.add(victim);
    const next = await eventually(
      async () => {
        const id = await holderId();
        return id && id !== holder ? id : null;
      },
      "the lease moves to a survivor",
      waitMs,
    );
    const owner = (await memberById(next))!;
    await eventually(async () => ((await owner.call("GET", "/api/v1/nodes?state=ONLINE")).json as unknown[]).length === 2, "both nodes ONLINE again", waitMs);
    await new Promise((r) => setTimeout(r, 4 * evaluationIntervalSeconds * 1000));
    const after = await listOn(owner);
    assert.deepEqual(
      after.map((i) => [i.id, i.state, i.node]),
      [
        [ids[0], "STOPPED", homes.get(ids[0])],
        [ids[1], "RUNNING", homes.get(ids[1])],
      ],
      "the stopped slot stays stopped, no new id",
    );
    assert.deepEqual(pidOf(ids[0]), [], `${ids[0]} runs nowhere`);
    assert.deepEqual(pidOf(ids[1]), pidBefore, `${ids[1]} is the same process`);

    // A crash under the new holder: the same id, on its node, its directory kept.
    process.kill(pidBefore[0], "SIGKILL");
    await eventually(
      async () => {
        const pids = pidOf(ids[1]);
        const record = (await listOn(owner)).find((i) => i.id === ids[1]);
        return pids.length === 1 && pids[0] !== pidBefore[0] && record?.state === "RUNNING";
      },
      `${ids[1]} restarted\n${await diagnostics(owner)}`,
      waitMs,
    );

    const start = await owner.call("POST", `/api/v1/groups/${group}/start`);
    assert.deepEqual(start.json, { count: 1 }, start.text);
    const final = await eventually(
      async () => {
        const now = await listOn(owner);
        return now.length === 2 && now.every((i) => i.state === "RUNNING") ? now : null;
      },
      `both RUNNING after the start\n${await diagnostics(owner)}`,
      waitMs,
    );
    assert.deepEqual(
      final.map((i) => [i.id, i.node]),
      ids.map((id) => [id, homes.get(id)]),
      "same ids on the same nodes",
    );
    for (const id of ids) {
      assert.equal(readFileSync(join(dirOf.get(id)!, "world.dat"), "utf8"), `${id} before the failover`, `${id}'s directory kept`);
      assert.equal(pidOf(id).length, 1, `${id} runs once`);
    }
    assert.deepEqual((await owner.call("GET", `/api/v1/groups/${group}`)).json.stoppedInstances, []);
  });
});
