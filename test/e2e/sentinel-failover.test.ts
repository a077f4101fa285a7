// The key-value store fails over under load: three production controllers (shared PostgreSQL, one
// Raft cluster) reach Redis through three Debian `redis-sentinel`s (`kvstore.uri` redis-sentinel://),
// with a master and a replica. A group of simulated servers runs on a real daemon while clients
// write through every controller. The master is killed; the Sentinels promote the replica. Every
// write that was acknowledged is there afterwards on every controller, writes answer again, no
// instance of the group is started twice or restarted, the group's fencing token never goes
// backwards. That the group scales again on the promoted master is a TODO case (a known defect, below).
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Redis } from "ioredis";
import { serverProcesses } from "../support/instance-processes.js";
import { ClusterHarness, type ClusterMemberProcess } from "./cluster-harness.js";
import { eventually } from "../support/wait.js";
import { spawnDaemon, type DaemonProcess } from "../gateway/harness.js";
import { startPostgresServer, type PostgresServer } from "../support/postgres-server.js";
import { startRedisSentinel, startRedisServer, type RedisSentinel, type RedisServer } from "../support/redis-server.js";

const masterName = "cloudmaster";
const waitMs = 120_000;
/** This file's ports for the group's servers. */
const portRange = { start: 24_420, end: 24_439 };

interface Listed {
  id: string;
  state: string;
}

describe("Redis Sentinel promotion under three production controllers", { timeout: 900_000 }, () => {
  let postgres: PostgresServer;
  let master: RedisServer;
  let replica: RedisServer;
  const sentinels: RedisSentinel[] = [];
  let harness: ClusterHarness;
  let members: ClusterMemberProcess[] = [];
  let daemon: DaemonProcess | undefined;

  /** The group's lease token, read from whichever Redis is master now. */
  const fencingTokenOf = async (group: string): Promise<number | null> => {
    for (const server of [master, replica]) {
      const client = new Redis(server.uri, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 1_000 });
      client.on("error", () => undefined); // the killed master refuses: connect() says so
      try {
        await client.connect();
        if (((await client.call("ROLE")) as unknown[])[0] !== "master") continue;
        const value = await client.get(`cloud:v1:lease:group:${group}`);
        const token = value?.split("|")[1];
        return token && /^\d+$/.test(token) ? Number(token) : null;
      } catch {
        // this one is down
      } finally {
        client.disconnect();
      }
    }
    return null;
  };

  /** What the controllers logged about the group's scope, leases and the store: the failure's context. */
  const logsOf = () =>
    members
      .map((m) => {
        const lines = (m.process?.output() ?? "").split("\n").filter((line) => /WARN|ERROR|scope|lease|sent|Redis|store/i.test(line));
        return `--- ${m.name} ---\n${lines.slice(-40).join("\n")}`;
      })
      .join("\n");

  before(async () => {
    postgres = await startPostgresServer();
    master = await startRedisServer();
    replica = await startRedisServer({ replicaOf: master.port });
    for (let i = 0; i < 3; i++)
      sentinels.push(await startRedisSentinel({ masterName, masterPort: master.port, quorum: 2, downAfterMs: 1_000, failoverTimeoutMs: 3_000 }));
    // The Sentinels learn the replica from the master's INFO: a promotion needs it known.
    const probe = new Redis({ port: sentinels[0].port, host: "127.0.0.1" });
    try {
      await eventually(async () => ((await probe.call("SENTINEL", "REPLICAS", masterName)) as unknown[]).length >= 1, "the Sentinels see the replica", 30_000);
    } finally {
      probe.disconnect();
    }
    harness = new ClusterHarness({
      runtime: { profile: "production" },
      database: { uri: postgres.uri },
      kvstore: { uri: `redis-sentinel://${sentinels.map((s) => `127.0.0.1:${s.port}`).join(",")}/${masterName}` },
      scheduler: { evaluationIntervalSeconds: 1 },
    });
    members = await harness.startThree();
    const [a] = members;
    const token = (await a.call("POST", "/api/v1/admin/tokens", {})).json.token as string;
    daemon = spawnDaemon(
      members.map((m) => m.grpcAddr),
      token,
      { maxMemoryMb: 2048 },
    );
    await eventually(async () => ((await a.call("GET", "/api/v1/nodes?state=ONLINE")).json as unknown[]).length === 1, "the node ONLINE", waitMs);
  });

  after(async () => {
    await daemon?.stop();
    await harness?.close();
    for (const sentinel of sentinels) await sentinel.stop();
    await replica?.stop();
    await master?.stop();
    await postgres?.stop();
  });

  it("kills the master while clients write: acknowledged writes survive, nothing runs twice, fencing never goes back", async () => {
    const [a] = members;
    const created = await a.call("POST", "/api/v1/groups", {
      name: "sent",
      platform: "simulated",
      minInstances: 3,
      maxInstances: 6,
      memoryMb: 64,
      portRange,
    });
    assert.equal(created.status, 201, JSON.stringify(created.json));
    const listed = async (m: ClusterMemberProcess = a) => (await m.call("GET", "/api/v1/services?group=sent")).json as Listed[];
    await eventually(async () => (await listed()).filter((i) => i.state === "RUNNING").length === 3, "3 RUNNING", waitMs);
    const idsBefore = (await listed()).map((i) => i.id).sort();
    const tokenBefore = await fencingTokenOf("sent");
    assert.ok(tokenBefore !== null && tokenBefore >= 1, `a lease with a fencing token: ${tokenBefore}`);
    const processesBefore = serverProcesses();
    for (const id of idsBefore) assert.equal(processesBefore.get(id)?.length, 1, `${id} runs once`);

    // Writers: four at once, in turn through each controller, until told to stop.
    const acknowledged: string[] = [];
    const statuses = new Map<number, number>();
    let writing = true;
    let counter = 0;
    const writer = async (w: number) => {
      while (writing) {
        const name = `w${w}-${counter++}`;
        const through = members[counter % members.length];
        try {
          const reply = await through.call("POST", "/api/v1/groups", { name, platform: "simulated", minInstances: 0, maxInstances: 1, memoryMb: 64 });
          statuses.set(reply.status, (statuses.get(reply.status) ?? 0) + 1);
          if (reply.status === 201) acknowledged.push(name);
        } catch {
          statuses.set(0, (statuses.get(0) ?? 0) + 1);
        }
      }
    };
    // A fifth writes one record over and over (the group record lock lives in the key-value store).
    assert.equal(
      (await a.call("POST", "/api/v1/groups", { name: "patched", platform: "simulated", minInstances: 0, maxInstances: 1, memoryMb: 64 })).status,
      201,
    );
    let lastAcknowledged = 1;
    let lastTried = 1;
    const patcher = async () => {
      while (writing) {
        const value = ++lastTried;
        try {
          const reply = await members[value % members.length].call("PATCH", "/api/v1/groups/patched", { maxInstances: value });
          statuses.set(reply.status, (statuses.get(reply.status) ?? 0) + 1);
          if (reply.status === 200) lastAcknowledged = value;
        } catch {
          statuses.set(0, (statuses.get(0) ?? 0) + 1);
        }
      }
    };
    const writers = [...[0, 1, 2, 3].map(writer), patcher()];
    await eventually(() => acknowledged.length >= 20, "writes acknowledged before the failover", waitMs);

    const ackedBeforeKill = acknowledged.length;
    const killedAt = Date.now();
    await master.kill();
    await eventually(
      async () => {
        const client = new Redis(replica.uri, { lazyConnect: true, maxRetriesPerRequest: 0 });
        client.on("error", () => undefined);
        try {
          await client.connect();
          return ((await client.call("ROLE")) as unknown[])[0] === "master";
        } finally {
          client.disconnect();
        }
      },
      "the replica is promoted",
      waitMs,
    );
    // Writes are acknowledged again after the promotion.
    await eventually(
      () => acknowledged.length >= ackedBeforeKill + 20,
      () => `writes acknowledged after the promotion: ${JSON.stringify([...statuses])}`,
      waitMs,
    );
    const resumedAfterMs = Date.now() - killedAt;
    writing = false;
    await Promise.all(writers);
    console.log(
      `writes: ${acknowledged.length} creates and ${lastAcknowledged - 1} updates acknowledged; statuses ${JSON.stringify([...statuses])}; 20 more acknowledged ${resumedAfterMs} ms after the kill`,
    );

    // Only success, or a store outage answered as such: never a 500.
    assert.deepEqual(
      [...statuses.keys()].filter((status) => status !== 201 && status !== 200 && status !== 503).sort(),
      [],
      `statuses: ${JSON.stringify([...statuses])}`,
    );
    // Every acknowledged write is there, on every controller.
    for (const m of members) {
      const names = new Set(((await m.call("GET", "/api/v1/groups")).json as { name: string }[]).map((g) => g.name));
      const missing = acknowledged.filter((name) => !names.has(name));
      assert.deepEqual(missing, [], `acknowledged groups missing on ${m.name}`);
    }

    // The record holds the last acknowledged value, or one tried after it (sent, its answer lost).
    const patched = (await a.call("GET", "/api/v1/groups/patched")).json as { maxInstances: number };
    assert.ok(
      patched.maxInstances >= lastAcknowledged && patched.maxInstances <= lastTried,
      `maxInstances ${patched.maxInstances}: acknowledged up to ${lastAcknowledged}, tried up to ${lastTried}`,
    );

    // The group went on: the same three instances, each one process, none restarted.
    await eventually(async () => (await listed()).filter((i) => i.state === "RUNNING").length === 3, "still 3 RUNNING", waitMs);
    assert.deepEqual((await listed()).map((i) => i.id).sort(), idsBefore, "no instance replaced or added");
    const processesAfter = serverProcesses();
    for (const id of idsBefore) assert.deepEqual(processesAfter.get(id), processesBefore.get(id), `${id} is the same single process`);
    const tokenAfter = await eventually(() => fencingTokenOf("sent"), "the group's lease is held on the promoted master", waitMs);
    assert.ok(tokenAfter >= tokenBefore!, `the fencing token never goes back: ${tokenBefore} then ${tokenAfter}`);
  });

  // Known open defect: under the CI suite's load, a PATCH of the scheduled group through one
  // controller answered 503 for over two minutes after the promotion (2 of 6 runs), while creates
  // through the same controller succeeded. Reported as TODO until it is found and fixed.
  it("scales the group on the promoted master", { todo: "a PATCH of a scheduled group can answer 503 for minutes after a promotion under load" }, async () => {
    const [a] = members;
    const listed = async () => (await a.call("GET", "/api/v1/services?group=sent")).json as Listed[];
    // A controller whose key-value connection is still moving to the new master answers 503
    // (with Retry-After), as a client then retries.
    let answer = 0;
    await eventually(
      async () => {
        answer = (await a.call("PATCH", "/api/v1/groups/sent", { minInstances: 4 })).status;
        assert.ok(answer === 200 || answer === 503, `PATCH answered ${answer}`);
        return answer === 200;
      },
      () => `the PATCH is accepted (last answer ${answer})`,
      waitMs,
    );
    await eventually(
      async () => (await listed()).filter((i) => i.state === "RUNNING").length === 4,
      () => `4 RUNNING after the failover\n${logsOf()}`,
      waitMs,
    );
    const final = serverProcesses();
    for (const i of await listed()) assert.equal(final.get(i.id)?.length, 1, `${i.id} runs once`);
  });
});
