// Machine credentials across a production cluster: two controller processes sharing one
// PostgreSQL database and one Redis (real servers on ephemeral ports). A workload token's family
// revoked through one controller is refused by the other at once, descendants included; an
// instance's revoked start and a rotated-out token too; a Redis that lost its data (FLUSHALL)
// brings none of them back; a node credential dies on both controllers the moment its node is
// deleted or its certificate revoked through either. Tokens are signed in this process with the
// cluster's own secret (read from the shared database), as the controller owning an instance would.
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Redis } from "ioredis";
import { createEventBus } from "../../src/events/bus.js";
import { InstanceService } from "../../src/domain/instances/instance-service.js";
import { NodeService } from "../../src/domain/nodes/node-service.js";
import { MachineCredentials, workloadTokenRotationGraceMs } from "../../src/plugin-api/credentials.js";
import { systemClock } from "../../src/shared/clock.js";
import { openDocumentStore } from "../../src/store/open.js";
import type { DocumentStore } from "../../src/store/ports.js";
import type { ClusterMemberProcess } from "./cluster-harness.js";
import { productionCluster, type ProductionCluster } from "./production-cluster.js";
import type { PostgresServer } from "../support/postgres-server.js";
import type { RedisServer } from "../support/redis-server.js";

const quiet = { name: "test", trace: () => undefined, debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined };

describe("machine credentials across controllers", { timeout: 600_000 }, () => {
  let production: ProductionCluster;
  let postgres: PostgresServer;
  let redis: RedisServer;
  let a: ClusterMemberProcess;
  let b: ClusterMemberProcess;
  let documents: DocumentStore;
  let scratch: string;
  let credentials: MachineCredentials;
  let instances: InstanceService;
  let nodes: NodeService;

  /** A plugin call with `token` on `member`: its status. */
  const players = async (member: ClusterMemberProcess, token: string): Promise<number> =>
    (await fetch(`${member.process!.url}/api/plugin/players`, { headers: { authorization: `Bearer ${token}` } })).status;
  const refresh = async (member: ClusterMemberProcess, token: string): Promise<string> => {
    const res = await fetch(`${member.process!.url}/api/plugin/auth/refresh`, { method: "POST", headers: { authorization: `Bearer ${token}` } });
    assert.equal(res.status, 200, await res.clone().text());
    return ((await res.json()) as { token: string }).token;
  };
  const templates = async (member: ClusterMemberProcess, token: string): Promise<number> =>
    (await fetch(`${member.process!.url}/api/v1/templates`, { headers: { authorization: `Bearer ${token}` } })).status;
  const instance = async (id: string) => {
    // A group no controller owns: no scheduler touches these records.
    await instances.save({
      id,
      group: "elsewhere",
      node: "n1",
      port: 30000,
      memoryMb: 512,
      state: "RUNNING",
      playerCount: 0,
      startedAt: null,
      deploymentRevision: 1,
      startId: `start-${id}`,
    });
    return credentials.issueWorkloadToken({ instanceId: id, group: "elsewhere", node: "n1" }, `start-${id}`).token;
  };
  const flushAll = async () => {
    const client = new Redis(redis.uri, { maxRetriesPerRequest: 2 });
    try {
      await client.flushall();
    } finally {
      client.disconnect();
    }
  };

  before(async () => {
    production = await productionCluster({ controllers: 2 });
    ({ postgres, redis } = production);
    [a, b] = production.members as [ClusterMemberProcess, ClusterMemberProcess];
    scratch = await mkdtemp(join(tmpdir(), "cloud-credentials-e2e-"));
    documents = await openDocumentStore({ profile: "production", dataDir: scratch, uri: postgres.uri });
    instances = new InstanceService(documents, systemClock);
    nodes = new NodeService(documents, createEventBus({ logger: quiet }), systemClock, instances);
    credentials = await MachineCredentials.open({ documents, clock: systemClock, instances, nodes });
  });
  after(async () => {
    await documents?.close();
    await production?.stop();
    if (scratch) await rm(scratch, { recursive: true, force: true });
  });

  it("workload tokens: a family revoked on A, a start revoked on B, a token rotated out on A are refused on both at once, and after FLUSHALL", async () => {
    const first = await instance("w-1");
    const child = await refresh(b, first);
    const grandchild = await refresh(a, child);
    assert.equal(await players(b, grandchild), 200);
    const revoked = await a.call("POST", "/api/v1/workload-credentials/revoke", { token: first });
    assert.equal(revoked.status, 200, revoked.text);

    const ofStart = await instance("w-2");
    const ofStartRefreshed = await refresh(a, ofStart);
    assert.equal((await b.call("POST", "/api/v1/services/w-2/workload-credentials/revoke")).status, 200);

    const rotatedOut = await instance("w-3");
    const current = await refresh(a, rotatedOut);
    const untouched = await instance("w-4");

    const expected = [401, 401, 401, 401, 401, 200, 200];
    const tokens = [first, child, grandchild, ofStart, ofStartRefreshed, current, untouched];
    for (const member of [a, b]) {
      assert.deepEqual(await Promise.all(tokens.map((token) => players(member, token))), expected, `at once on ${member.name}`);
    }
    await new Promise((resolve) => setTimeout(resolve, workloadTokenRotationGraceMs + 500));
    assert.equal(await players(b, rotatedOut), 401, "rotated out after the grace");

    await flushAll();
    for (const member of [a, b]) {
      assert.deepEqual(
        await Promise.all([...tokens, rotatedOut].map((token) => players(member, token))),
        [...expected, 401],
        `after FLUSHALL on ${member.name}`,
      );
    }
  });

  it("node credentials: refused on both controllers the moment the node is deleted or its certificate revoked", async () => {
    await nodes.upsert("gone", { host: "10.0.0.9", state: "OFFLINE" });
    await nodes.upsert("revoked", { host: "10.0.0.8", state: "OFFLINE" });
    const ofGone = credentials.issueNodeCredential("gone").token;
    const ofRevoked = credentials.issueNodeCredential("revoked").token;
    for (const member of [a, b]) assert.deepEqual([await templates(member, ofGone), await templates(member, ofRevoked)], [200, 200], member.name);

    const deleted = await a.call("DELETE", "/api/v1/nodes/gone");
    assert.equal(deleted.status, 204, deleted.text);
    const revoked = await b.call("POST", "/api/v1/nodes/revoked/revoke-cert");
    assert.equal(revoked.status, 200, revoked.text);
    for (const member of [a, b])
      assert.deepEqual([await templates(member, ofGone), await templates(member, ofRevoked)], [401, 401], `at once on ${member.name}`);
  });
});
