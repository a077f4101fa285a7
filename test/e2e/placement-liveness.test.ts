// One placement view and liveness that follows the newest session, on the production profile: three
// controller processes (shared PostgreSQL, Redis, one Raft cluster), one cloud-daemon with a
// 1,000 MB budget that knows every controller, simulated servers that bind their ports. Groups are
// scheduled by whichever controller wins their lease, so groups on one node are owned by different
// controllers, as in production:
// - two groups with the same port range, in rounds of every order (one RUNNING before the other,
//   the other way round, both at once): no port given twice, no bind failure, no crash;
// - memory across owners: never more than maxMemoryMb reserved; the rest is the placement's issue;
// - a controller restarted, then another's group deleted: its reservations leave the shared ledger
//   and its scope's lease is released within a reconcile interval, and its memory is given again;
// - the controller holding the daemon's stream frozen (SIGSTOP) until the daemon moved away (at
//   least 25 s), then resumed: the node stays ONLINE, no NODE_DISCONNECTED, no NODE_LOST, no
//   instance ended, every process the same; deleting the group leaves no orphan.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Redis } from "ioredis";
import { serverProcesses } from "../support/instance-processes.js";
import { frameJson, isMessage, openSse, type SseStream } from "../support/sse-client.js";
import { eventually } from "../support/wait.js";
import { cleanupDirs, spawnDaemon, type DaemonProcess } from "../gateway/harness.js";
import { startPostgresServer, type PostgresServer } from "../support/postgres-server.js";
import { startRedisServer, type RedisServer } from "../support/redis-server.js";
import { decodeLedger, PLACEMENT_LEDGER_PREFIX } from "../../src/scheduler/placement-ledger.js";
import { ClusterHarness, type ClusterMemberProcess } from "./cluster-harness.js";

const evaluationIntervalSeconds = 1;
const reconcileIntervalSeconds = 3;
const maxMemoryMb = 1_000;
const waitMs = 90_000;
/** Rounds of the port test: at least this many, more (up to the cap) until every order had two owners. */
const portRoundsMin = 6;
const portRoundsMax = 12;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Instance {
  id: string;
  group: string;
  node: string;
  port: number;
  memoryMb: number;
  state: string;
}

describe("one placement view and liveness across controllers", { timeout: 1_500_000 }, () => {
  let postgres: PostgresServer;
  let redis: RedisServer;
  let redisClient: Redis;
  let harness: ClusterHarness;
  let members: ClusterMemberProcess[] = [];
  let daemon: DaemonProcess;
  let nodeId = "";

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
  const instancesOf = async (group: string): Promise<Instance[]> => (await call("GET", `/api/v1/services?group=${group}`)).json as Instance[];
  const controllerIdOf = async (m: ClusterMemberProcess) => {
    const view = (await m.call("GET", "/api/v1/cluster/members")).json.members as { nodeId: string; raftAddr: string }[];
    return view.find((x) => x.raftAddr.endsWith(`:${m.raftPort}`))?.nodeId ?? null;
  };
  const memberById = async (controllerId: string) => {
    for (const m of live()) if ((await controllerIdOf(m)) === controllerId) return m;
    return null;
  };
  /** The controller holding the group's lease (granted, not a claim), or null. */
  const ownerOf = async (group: string) => {
    const value = await redisClient.get(`cloud:v1:lease:group:${group}`);
    const [controllerId, token] = (value ?? "").split("|");
    return value && /^\d+$/.test(token ?? "") ? controllerId : null;
  };
  const sessionHolder = async () => {
    const value = await redisClient.get(`cloud:v1:session:node:${nodeId}`);
    return value ? (JSON.parse(value) as { controllerId: string }).controllerId : null;
  };
  /** Every reservation in the shared ledgers. */
  const ledger = async () => {
    const keys = await redisClient.keys(`${PLACEMENT_LEDGER_PREFIX}*`);
    const values = await Promise.all(keys.map((key) => redisClient.get(key)));
    return values.flatMap((text) => [...decodeLedger(text).values()].map((e) => e.reservation));
  };
  /** Creates a group, through `via` when given (a controller tracks the groups created through it first, so it often owns them). */
  const createGroup = async (name: string, fields: Record<string, unknown>, via?: ClusterMemberProcess) => {
    const body = { name, platform: "simulated", ...fields };
    const created = via ? await via.call("POST", "/api/v1/groups", body) : await call("POST", "/api/v1/groups", body);
    assert.equal(created.status, 201, created.text);
  };
  const running = (group: string, count: number) =>
    eventually(
      async () => {
        const list = (await instancesOf(group)).filter((i) => i.state === "RUNNING");
        return list.length === count && list.every((i) => serverProcesses().get(i.id)?.length === 1) ? list : null;
      },
      `${count} RUNNING instances of ${group}, each as one process`,
      waitMs,
    );
  /** Deletes the groups and waits until no process of theirs runs and every record is finished. */
  const deleteAndWait = async (groups: readonly string[]) => {
    for (const group of groups) assert.equal((await call("DELETE", `/api/v1/groups/${group}`)).status, 204);
    await eventually(
      async () => {
        const processes = [...serverProcesses().keys()].filter((id) => groups.some((g) => id.startsWith(`${g}-`)));
        const records = (await Promise.all(groups.map(instancesOf))).flat().filter((i) => i.state !== "STOPPED" && i.state !== "CRASHED");
        return processes.length === 0 && records.length === 0;
      },
      `the processes of ${groups.join(", ")} gone`,
      waitMs,
    );
  };
  /** Runs `body`; when it fails, prints what the cluster says about `groups` and removes them, so the next test starts clean. */
  const scenario = async (groups: () => readonly string[], body: () => Promise<void>) => {
    try {
      await body();
    } catch (err) {
      for (const group of groups()) {
        const record = await call("GET", `/api/v1/groups/${group}`).catch(() => null);
        console.log(`---- ${group}: ${record?.text}\n${JSON.stringify(await instancesOf(group).catch(() => []))}`);
      }
      for (const m of members) {
        const lines = (m.process?.output() ?? "").split("\n").filter((l) => groups().some((g) => l.includes(g)) || /placement|ledger|refused|NODE_/i.test(l));
        console.log(`---- ${m.name}\n${lines.slice(-40).join("\n")}`);
      }
      console.log(`---- ledger\n${JSON.stringify(await ledger())}`);
      for (const group of groups()) await call("DELETE", `/api/v1/groups/${group}`).catch(() => undefined);
      throw err;
    }
  };
  const crashesOf = async (group: string) => (await call("GET", `/api/v1/crashes?group=${group}`)).json as { instanceId: string; classification: string }[];

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
    const token = (await members[0].call("POST", "/api/v1/admin/tokens", {})).json.token as string;
    daemon = spawnDaemon(
      members.map((m) => m.grpcAddr),
      token,
      { maxMemoryMb, reconnectDelayMaxMs: 1_000 },
    );
    const nodes = await eventually(
      async () => {
        const online = (await members[0].call("GET", "/api/v1/nodes?state=ONLINE")).json as { id: string }[];
        return online.length === 1 ? online : null;
      },
      "the node ONLINE",
      waitMs,
    );
    nodeId = nodes[0].id;
  });

  after(async () => {
    for (const m of members) if (m.process) process.kill(m.process.pid, "SIGCONT");
    await daemon?.stop();
    await harness?.close();
    redisClient?.disconnect();
    await redis?.stop();
    await postgres?.stop();
    cleanupDirs();
  });

  it("two groups with the same port range owned by different controllers: no port given twice, no bind failure, in rounds of every order", async () => {
    const orders = ["first RUNNING, then second", "second RUNNING, then first", "both at once"] as const;
    const portRange = { start: 29750, end: 29769 };
    const crossOwnerRounds = new Map<string, number>(orders.map((o) => [o, 0]));
    const summary: string[] = [];
    for (let round = 0; round < portRoundsMax; round++) {
      if (round >= portRoundsMin && [...crossOwnerRounds.values()].every((n) => n > 0)) break;
      const order = orders[round % orders.length];
      const [first, second] = [`ports${round}a`, `ports${round}b`];
      await scenario(
        () => [first, second],
        async () => {
          const fields = { minInstances: 3, maxInstances: 3, memoryMb: 50, portRange };
          // Each group through another controller, so that their owners differ in most rounds.
          const [viaFirst, viaSecond] = [live()[round % live().length], live()[(round + 1) % live().length]];
          if (order === "both at once") {
            await Promise.all([createGroup(first, fields, viaFirst), createGroup(second, fields, viaSecond)]);
          } else {
            const [one, other] = order === "first RUNNING, then second" ? [first, second] : [second, first];
            await createGroup(one, fields, viaFirst);
            await running(one, 3);
            await createGroup(other, fields, viaSecond);
          }
          const all = [...(await running(first, 3)), ...(await running(second, 3))];
          const ports = all.map((i) => `${i.node}:${i.port}`);
          assert.equal(new Set(ports).size, 6, `round ${round} (${order}): no port twice on the node: ${ports.sort().join(" ")}`);
          for (const group of [first, second]) {
            assert.deepEqual(await crashesOf(group), [], `round ${round}: no crash of ${group} (no bind failure)`);
            assert.equal((await call("GET", `/api/v1/groups/${group}`)).json.schedulingIssue, null);
          }
          const owners = [await ownerOf(first), await ownerOf(second)];
          if (owners[0] !== null && owners[1] !== null && owners[0] !== owners[1]) crossOwnerRounds.set(order, crossOwnerRounds.get(order)! + 1);
          summary.push(`round ${round} (${order}): owners ${owners.join(" / ")}`);
          await deleteAndWait([first, second]);
        },
      );
    }
    console.log(`port rounds:\n${summary.join("\n")}`);
    assert.ok(
      [...crossOwnerRounds.values()].some((n) => n > 0),
      "at least one round had its groups on different controllers",
    );
  });

  it("memory reserved across owners never passes maxMemoryMb; what does not fit is the placement's issue", async () => {
    const fields = { minInstances: 3, maxInstances: 3, memoryMb: 300, portRange: { start: 29780, end: 29799 } };
    const attempts: string[] = [];
    let crossOwner = false;
    // Attempts until the two groups were scheduled by different controllers (at most 30: which
    // controller wins a group's lease is not chosen, and one often wins several in a row).
    for (let attempt = 0; attempt < 30 && !crossOwner; attempt++) {
      const groups = [`mem${attempt}a`, `mem${attempt}b`];
      await scenario(
        () => groups,
        async () => {
          // Created idle, so each is owned before it places: two owners found, both are started at once.
          const owners0: string[] = [];
          for (const [i, g] of groups.entries()) {
            // A random moment within a lease-keeper period: the controller whose tick comes first takes it.
            await sleep(Math.floor(Math.random() * 1_000));
            await createGroup(g, { ...fields, minInstances: 0 }, live()[(attempt + i) % live().length]);
            owners0.push((await eventually(() => ownerOf(g), `${g} owned`, waitMs))!);
          }
          if (owners0[0] === owners0[1]) {
            attempts.push(`attempt ${attempt}: both owned by ${owners0[0]} before they started`);
            await deleteAndWait(groups);
            return;
          }
          await Promise.all(groups.map(async (g) => assert.equal((await call("PATCH", `/api/v1/groups/${g}`, { minInstances: 3 })).status, 200)));
          let peakMb = 0;
          const deadline = Date.now() + 20_000;
          // Watched while both owners place: the live records never reserve more than the budget.
          while (Date.now() < deadline) {
            const current = (await Promise.all(groups.map(instancesOf))).flat().filter((i) => i.state !== "STOPPED" && i.state !== "CRASHED");
            // Every instance of both groups reserves the groups' 300 MB (the list form has no memoryMb).
            peakMb = Math.max(peakMb, current.length * fields.memoryMb);
            if (current.length === 3 && current.every((i) => i.state === "RUNNING")) break;
            await sleep(200);
          }
          assert.ok(peakMb <= maxMemoryMb, `at most ${maxMemoryMb} MB reserved on the node at any time (peak ${peakMb} MB)`);
          await eventually(
            async () => (await ledger()).filter((r) => groups.includes(r.group)).length === 3,
            "three reservations of 300 MB in the ledger",
            waitMs,
          );
          // The issue is written by each owner's evaluation: one that ran while the other owner's
          // claims were in flight may say less was free, and the next one says what is free now.
          let blocked: { code: string; message: string }[] = [];
          await eventually(
            async () => {
              const issues = await Promise.all(groups.map(async (g) => (await call("GET", `/api/v1/groups/${g}`)).json.schedulingIssue));
              blocked = issues.filter((i) => i !== null);
              return blocked.length >= 1 && blocked.every((i) => /^insufficient memory: needs 300 MB, largest free 100 MB on /.test(i.message));
            },
            () => `a group short of memory says so, as the shared view sees it: ${JSON.stringify(blocked)}`,
            waitMs,
          );
          for (const issue of blocked) assert.equal(issue.code, "INSUFFICIENT_MEMORY");
          for (const g of groups) assert.deepEqual(await crashesOf(g), []);
          const owners = [await ownerOf(groups[0]), await ownerOf(groups[1])];
          crossOwner = owners[0] !== null && owners[1] !== null && owners[0] !== owners[1];
          attempts.push(`attempt ${attempt}: owners ${owners.join(" / ")}, peak ${peakMb} MB of ${maxMemoryMb}`);
          await deleteAndWait(groups);
        },
      );
    }
    console.log(`memory across owners:\n${attempts.join("\n")}`);
    assert.ok(crossOwner, "an attempt had its groups on different controllers");
  });

  it("a controller restarted, then another's group deleted: its reservations and its lease are gone within a reconcile interval", async () => {
    await scenario(
      () => ["stale1", "stale2"],
      async () => {
        await createGroup("stale1", { minInstances: 3, maxInstances: 3, memoryMb: 300, portRange: { start: 29800, end: 29819 } });
        await running("stale1", 3);
        const owner = await eventually(() => ownerOf("stale1"), "the owner of stale1", waitMs);
        let other: ClusterMemberProcess | null = null;
        for (const m of live()) if ((await controllerIdOf(m)) !== owner) other = m;
        assert.ok(other, "a controller other than the owner");
        await harness.stop(other);
        other.process = null;
        await harness.launch(other);
        const back = other;
        await eventually(
          async () => (await back.call("GET", "/api/v1/cluster/members").catch(() => null))?.status === 200,
          `${other.name} serving again`,
          waitMs,
        );
        assert.equal((await back.call("DELETE", "/api/v1/groups/stale1")).status, 204);
        await eventually(
          async () => (await instancesOf("stale1")).every((i) => i.state === "STOPPED" || i.state === "CRASHED"),
          "stale1's instances STOPPED",
          waitMs,
        );
        const stoppedAtMs = Date.now();
        await eventually(
          async () => (await ledger()).every((r) => r.group !== "stale1") && (await redisClient.get("cloud:v1:lease:group:stale1")) === null,
          "stale1's reservations and lease gone",
          waitMs,
        );
        const goneMs = Date.now() - stoppedAtMs;
        console.log(`after ${other.name} restarted, stale1 (owned by ${owner}) deleted: reservations and lease gone ${goneMs} ms after its instances stopped`);
        assert.ok(goneMs <= reconcileIntervalSeconds * 1000 + 2_000, `within a reconcile interval (${goneMs} ms)`);
        // The memory is given again, whoever schedules the next group.
        await createGroup("stale2", { minInstances: 3, maxInstances: 3, memoryMb: 300, portRange: { start: 29800, end: 29819 } });
        await running("stale2", 3);
        assert.equal((await call("GET", "/api/v1/groups/stale2")).json.schedulingIssue, null);
        console.log(`stale2 (3 × 300 MB) owned by ${await ownerOf("stale2")}, the restarted controller being ${await controllerIdOf(back)}`);
        await deleteAndWait(["stale2"]);
      },
    );
  });

  it("the daemon's controller frozen (SIGSTOP) until the daemon moved, then resumed: ONLINE throughout, no NODE_LOST, nothing ended, no orphan", async () => {
    const group = "frozen";
    await scenario(
      () => [group],
      async () => {
        await createGroup(group, { minInstances: 4, maxInstances: 4, memoryMb: 50, portRange: { start: 29900, end: 29919 } });
        const before = await running(group, 4);
        const pids = new Map(before.map((i) => [i.id, serverProcesses().get(i.id)![0]]));
        const holderId = await eventually(sessionHolder, "the daemon's session", waitMs);
        const frozen = (await memberById(holderId))!;
        assert.ok(frozen, `a member is controller ${holderId}`);
        const watchers = live().filter((m) => m !== frozen);
        // Every event of the cluster, from a controller that stays awake.
        const ticket = (await watchers[0].call("POST", "/api/v1/events/ticket")).json.ticket as string;
        const events: SseStream = await openSse(`${watchers[0].process!.url}/api/v1/events/stream?ticket=${ticket}`);
        await events.waitFor(1, (f) => f.event === "connected", waitMs);
        const states = new Set<string>();
        let watching = true;
        const watch = (async () => {
          while (watching) {
            for (const m of watchers) {
              const node = await m.call("GET", `/api/v1/nodes/${nodeId}`).catch(() => null);
              if (node?.status === 200) states.add(String(node.json.state));
            }
            await sleep(250);
          }
        })();
        const frozenAtMs = Date.now();
        process.kill(frozen.process!.pid, "SIGSTOP");
        let movedAfterMs = -1;
        try {
          // Frozen 25 s at least, and until the daemon holds a session on another controller.
          await eventually(
            async () => {
              const holder = await sessionHolder();
              if (holder !== null && holder !== holderId && movedAfterMs < 0) movedAfterMs = Date.now() - frozenAtMs;
              return movedAfterMs >= 0 && Date.now() - frozenAtMs >= 25_000;
            },
            "the daemon on another controller",
            { timeoutMs: 60_000, intervalMs: 250 },
          );
        } finally {
          process.kill(frozen.process!.pid, "SIGCONT");
        }
        const frozenMs = Date.now() - frozenAtMs;
        // Long enough after the resume for the old session's end, its leases' loss and a reconcile round.
        await sleep(15_000);
        watching = false;
        await watch;
        events.close();
        const disconnects = events.frames.filter((f) => isMessage(f) && frameJson(f).type === "NODE_DISCONNECTED" && frameJson(f).data.nodeId === nodeId);
        console.log(
          `${frozen.name} (${holderId}) frozen ${frozenMs} ms; the daemon moved after ${movedAfterMs} ms; node states seen: ${[...states].join(", ")}; NODE_DISCONNECTED: ${disconnects.length}`,
        );
        assert.deepEqual([...states], ["ONLINE"], "the node stays ONLINE");
        assert.deepEqual(disconnects.map(frameJson), [], "the old session's end is not a disconnect of the node");
        const after = await instancesOf(group);
        assert.deepEqual(after.map((i) => `${i.id} ${i.state}`).sort(), before.map((i) => `${i.id} RUNNING`).sort(), "no instance ended or added");
        assert.deepEqual(await crashesOf(group), [], "no NODE_LOST, no crash");
        for (const [id, pid] of pids) assert.deepEqual(serverProcesses().get(id), [pid], `${id} still runs as pid ${pid}, once`);
        // No orphan: the group's processes end with it.
        await deleteAndWait([group]);
      },
    );
  });
});
