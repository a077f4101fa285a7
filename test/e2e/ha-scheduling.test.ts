// Several controllers, one set of groups: three controller processes on the production profile
// (shared PostgreSQL, Redis, one Raft cluster), two cloud-daemon processes that know every
// controller, simulated servers. A group's lease decides which controller schedules it; commands
// reach daemons connected to other controllers; killing the lease holder with SIGKILL hands the
// group to a survivor within the lease TTL and a tick, with no instance started twice or restarted.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Redis } from "ioredis";
import { serverProcesses } from "../support/instance-processes.js";
import type { ClusterHarness, ClusterMemberProcess } from "./cluster-harness.js";
import type { DaemonProcess } from "../gateway/harness.js";
import { productionCluster, type ProductionCluster } from "./production-cluster.js";
import { eventually } from "../support/wait.js";

const evaluationIntervalSeconds = 1;
const waitMs = 60_000;

describe("scheduling across controllers", { timeout: 600_000 }, () => {
  let production: ProductionCluster;
  let redisClient: Redis;
  let harness: ClusterHarness;
  let members: ClusterMemberProcess[] = [];
  let daemons: DaemonProcess[] = [];

  const holderOf = async (group: string) => {
    const value = await redisClient.get(`cloud:v1:lease:group:${group}`);
    if (!value) return null;
    const [controllerId, token] = value.split("|");
    // `<id>|claim:<nonce>` is the short step before a token is granted: not a holder yet.
    if (!/^\d+$/.test(token ?? "")) return null;
    return { controllerId, fencingToken: Number(token) };
  };
  const memberById = async (controllerId: string) => {
    for (const m of members) {
      if (!m.process) continue;
      const cluster = (await m.call("GET", "/api/v1/cluster/members")).json.members as { nodeId: string; raftAddr: string }[];
      const me = cluster.find((x) => x.raftAddr.endsWith(`:${m.raftPort}`));
      if (me?.nodeId === controllerId) return m;
    }
    return null;
  };

  before(async () => {
    production = await productionCluster({
      config: { scheduler: { evaluationIntervalSeconds } },
      // Each daemon starts on a different controller (b, then c); both know all three.
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

  it("one controller holds the group's lease and its instances run once each, across nodes on other controllers", async () => {
    const [a, b] = members;
    assert.equal(
      (
        await b.call("POST", "/api/v1/groups", {
          name: "ha",
          platform: "simulated",
          minInstances: 4,
          maxInstances: 8,
          memoryMb: 128,
          portRange: { start: 26000, end: 26100 },
        })
      ).status,
      201,
    );
    await eventually(async () => ((await a.call("GET", "/api/v1/services?group=ha&state=RUNNING")).json as unknown[]).length === 4, "4 RUNNING", waitMs);
    const holder = await holderOf("ha");
    assert.ok(holder && holder.fencingToken >= 1, "a lease with a fencing token");
    const processes = serverProcesses();
    const ids = ((await a.call("GET", "/api/v1/services?group=ha")).json as { id: string }[]).map((i) => i.id);
    assert.equal(ids.length, 4, "no extra instance records");
    for (const id of ids) assert.equal(processes.get(id)?.length, 1, `${id} runs exactly once`);
    const nodes = new Set(((await a.call("GET", "/api/v1/services?group=ha")).json as { node: string }[]).map((i) => i.node));
    assert.equal(nodes.size, 2, "spread over both nodes, whichever controller holds their streams");
  });

  it("a console command reaches an instance through any controller", async () => {
    const [, , c] = members;
    const [target] = (await c.call("GET", "/api/v1/services?group=ha&state=RUNNING")).json as { id: string }[];
    for (const m of members)
      assert.equal((await m.call("POST", `/api/v1/services/${target.id}/command`, { command: `say via-${m.name}` })).status, 200, `command through ${m.name}`);
  });

  it("SIGKILL of the lease holder: a survivor takes the group over within the TTL and a tick, nothing restarts", async () => {
    const holder = (await holderOf("ha"))!;
    const victim = (await memberById(holder.controllerId))!;
    assert.ok(victim, "the holder is one of the members");
    const survivor = members.find((m) => m !== victim)!;
    const before = serverProcesses();
    const idsBefore = ((await survivor.call("GET", "/api/v1/services?group=ha")).json as { id: string }[]).map((i) => i.id).sort();
    const killedAt = Date.now();
    await harness.kill9(victim);
    const next = await eventually(
      async () => {
        const h = await holderOf("ha");
        return h && h.controllerId !== holder.controllerId ? h : null;
      },
      "the lease moves to a survivor",
      waitMs,
    );
    const takeoverMs = Date.now() - killedAt;
    assert.ok(next.fencingToken > holder.fencingToken, "the new holder's fencing token is higher");
    const ttlMs = 2 * evaluationIntervalSeconds * 1000;
    assert.ok(takeoverMs <= ttlMs + evaluationIntervalSeconds * 1000 + 3_000, `takeover in ${takeoverMs} ms (TTL ${ttlMs} ms)`);
    console.log(`group lease takeover after SIGKILL of its holder: ${takeoverMs} ms`);

    // The daemons reconnect to survivors; the new holder adopts the instances as they are.
    await eventually(
      async () => ((await survivor.call("GET", "/api/v1/nodes?state=ONLINE")).json as unknown[]).length === 2,
      "both nodes ONLINE again",
      waitMs,
    );
    await new Promise((r) => setTimeout(r, 3_000));
    const after = ((await survivor.call("GET", "/api/v1/services?group=ha")).json as { id: string; state: string }[]).sort((x, y) => (x.id < y.id ? -1 : 1));
    assert.deepEqual(
      after.map((i) => i.id),
      idsBefore,
      "the same instances",
    );
    assert.ok(
      after.every((i) => i.state === "RUNNING"),
      JSON.stringify(after),
    );
    const now = serverProcesses();
    for (const id of idsBefore) assert.deepEqual(now.get(id), before.get(id), `${id} is the same single process`);

    // The new holder schedules: one more instance, still each once.
    assert.equal((await survivor.call("PATCH", "/api/v1/groups/ha", { minInstances: 5 })).status, 200);
    await eventually(
      async () => ((await survivor.call("GET", "/api/v1/services?group=ha&state=RUNNING")).json as unknown[]).length === 5,
      "5 RUNNING",
      waitMs,
    ).catch(async (err: Error) => {
      const list = (await survivor.call("GET", "/api/v1/services?group=ha")).text;
      const logs = members
        .map(
          (m) =>
            `--- ${m.name}\n${
              m.process
                ?.output()
                .split("\n")
                .filter((l) => /WARN|ERROR|scheduler/.test(l))
                .slice(-30)
                .join("\n") ?? "(stopped)"
            }`,
        )
        .join("\n");
      throw new Error(`${err.message}\n${list}\n${logs}\n${daemons.map((d) => d.output().slice(-3_000)).join("\n")}`);
    });
    for (const [id, pids] of serverProcesses()) if (id.startsWith("ha-")) assert.equal(pids.length, 1, `${id} runs once`);
  });
});
