// A rollout through a controller failure: three controller processes on the production profile
// (shared PostgreSQL, Redis, one Raft cluster), two cloud-daemon processes, simulated servers. A
// group of six rolls to a new revision one instance at a time; in the middle, the controller holding
// the `deployment-reconciler` singleton lease is killed with SIGKILL. A survivor takes the lease and
// continues from the stored state: the deployment completes, every old instance was retired once
// and ended STOPPED, exactly six instances of the new revision were started (none twice, none
// thrown away), each runs as one process, and the group never had fewer than six RUNNING.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { serverProcesses } from "../support/instance-processes.js";
import type { ClusterHarness, ClusterMemberProcess } from "./cluster-harness.js";
import { productionCluster, type ProductionCluster } from "./production-cluster.js";
import { eventually } from "../support/wait.js";

const waitMs = 120_000;
const group = "roll";
const desired = 6;

interface Instance {
  id: string;
  state: string;
  deploymentRevision: number;
}

describe("a rollout continues after SIGKILL of the reconciler's controller", { timeout: 900_000 }, () => {
  let production: ProductionCluster;
  let harness: ClusterHarness;
  let members: ClusterMemberProcess[] = [];
  let lastSeen = "";

  const alive = () => members.filter((m) => m.process !== null);
  const call = async (method: string, path: string, body?: unknown) => {
    let last: unknown;
    for (const m of alive()) {
      try {
        return await m.call(method, path, body);
      } catch (err) {
        last = err;
      }
    }
    throw last;
  };
  const instances = async () => (await call("GET", `/api/v1/services?group=${group}`)).json as Instance[];
  const deployment = async () => {
    const json = (await call("GET", `/api/v1/groups/${group}/deployments/2`)).json;
    lastSeen = JSON.stringify(json);
    return json;
  };
  const memberById = async (controllerId: string) => {
    for (const m of alive()) {
      const cluster = (await m.call("GET", "/api/v1/cluster/members")).json.members as { nodeId: string; raftAddr: string }[];
      const me = cluster.find((x) => x.raftAddr.endsWith(`:${m.raftPort}`));
      if (me?.nodeId === controllerId) return m;
    }
    return null;
  };

  before(async () => {
    production = await productionCluster({
      config: {
        scheduler: { evaluationIntervalSeconds: 1 },
        deployments: { reconcileIntervalSeconds: 0.5, leaseTtlSeconds: 3 },
      },
      daemons: 2,
      daemonControllerOffset: 1,
      daemonConfig: { maxMemoryMb: 4096 },
      nodesOnlineWaitMs: waitMs,
    });
    ({ harness, members } = production);
  });

  after(async () => {
    await production?.stop();
  });

  it("completes from the stored state with no instance replaced twice and no batch skipped", async () => {
    const created = await call("POST", "/api/v1/groups", {
      name: group,
      platform: "simulated",
      minInstances: desired,
      maxInstances: desired + 2,
      memoryMb: 128,
      portRange: { start: 22100, end: 22200 },
      updateStrategy: { type: "ROLLING", maxSurge: 1, maxUnavailable: 0 },
    });
    assert.equal(created.status, 201, created.text);
    await eventually(
      async () => {
        const now = (await instances()).filter((i) => i.state === "RUNNING" && i.deploymentRevision === 1);
        return now.length === desired;
      },
      "six RUNNING of revision 1",
      waitMs,
    );
    const old = (await instances()).map((i) => i.id);

    let sampling = true;
    const floorBreaches: string[] = [];
    const sampler = (async () => {
      while (sampling) {
        const now = await instances().catch(() => null);
        if (now) {
          const running = now.filter((i) => i.state === "RUNNING").length;
          if (running < desired) floorBreaches.push(JSON.stringify(now));
        }
        await new Promise((r) => setTimeout(r, 200));
      }
    })();

    const res = await call("POST", `/api/v1/groups/${group}/deployments`, { minHealthySeconds: 2 });
    assert.equal(res.status, 201, res.text);
    assert.equal(res.json.revision, 2);
    await eventually(
      async () => {
        const d = await deployment();
        return d.progress.retired >= 2 && d.state === "IN_PROGRESS" ? d : null;
      },
      () => `two instances replaced\n${lastSeen}`,
      waitMs,
    );
    const lease = ((await call("GET", "/api/v1/cluster/leases")).json.leases as { name: string; holder: string }[]).find(
      (l) => l.name === "deployment-reconciler",
    );
    assert.ok(lease, "the reconciler holds its singleton lease");
    const holder = await memberById(lease.holder);
    assert.ok(holder, `the holder ${lease.holder} is a member`);
    await harness.kill9(holder);
    holder.process = null;

    const done = await eventually(
      async () => {
        const d = await deployment();
        return d.state === "COMPLETED" ? d : null;
      },
      () => `the rollout completes on a survivor\n${lastSeen}`,
      waitMs,
    );
    sampling = false;
    await sampler;
    const after = (await call("GET", "/api/v1/cluster/leases")).json.leases.find((l: { name: string }) => l.name === "deployment-reconciler");
    assert.notEqual(after.holder, lease.holder, "another controller took the lease");

    const records = await instances();
    const fresh = records.filter((i) => i.deploymentRevision === 2);
    assert.equal(fresh.length, desired, `exactly six instances of revision 2 were started: ${JSON.stringify(records)}`);
    assert.ok(
      fresh.every((i) => i.state === "RUNNING"),
      `none thrown away: ${JSON.stringify(fresh)}`,
    );
    for (const id of old) assert.equal(records.find((i) => i.id === id)?.state, "STOPPED", `${id} retired and STOPPED`);
    assert.equal(done.progress.retired, desired, "each old instance retired once");
    const processes = serverProcesses();
    for (const i of fresh) assert.equal(processes.get(i.id)?.length, 1, `${i.id} runs as one process`);
    for (const id of old) assert.equal(processes.get(id), undefined, `${id} runs nowhere`);
    assert.deepEqual(floorBreaches, [], "never fewer than six RUNNING");
  });
});
