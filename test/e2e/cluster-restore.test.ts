// A restore on a cluster: three controller processes on the production profile (shared PostgreSQL,
// Redis, one Raft cluster) and one daemon running simulated servers. A backup is taken on `a`,
// then groups change (one created, one deleted, one scaled up), the bundle is downloaded from `a`,
// uploaded to `b` (which authenticates it as this cluster's: not foreign) and restored there.
// While the restore runs, writes on `c` answer 503 RESTORE_IN_PROGRESS. Afterwards every
// controller serves the restored groups, tokens issued before the restore are refused by all
// three, and the processes converge on the restored records: the created group's instances are
// stopped, the deleted group runs again, the scaled group is back to its size, and no instance id
// runs twice.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { serverProcesses } from "../support/instance-processes.js";
import { login, TEST_ADMIN_PASSWORD } from "../support/controller.js";
import { ClusterHarness, type ClusterMemberProcess } from "./cluster-harness.js";
import { eventually } from "../support/wait.js";
import { cleanupDirs, spawnDaemon, type DaemonProcess } from "../gateway/harness.js";
import { startPostgresServer, type PostgresServer } from "../support/postgres-server.js";
import { startRedisServer, type RedisServer } from "../support/redis-server.js";

const evaluationIntervalSeconds = 1;
const reconcileIntervalSeconds = 3;
const waitMs = 120_000;
const LIVE = new Set(["SCHEDULED", "PREPARING", "STARTING", "RUNNING", "DRAINING", "STOPPING"]);
/** Group names unique to this file (other tests on the machine run simulated servers too). */
const kept = "rst-kept";
const deleted = "rst-deleted";
const scaled = "rst-scaled";
const created = "rst-created";
const ours = (id: string) => id.startsWith("rst-");

interface Instance {
  id: string;
  group: string;
  state: string;
}

describe("restore on three production controllers", { timeout: 600_000 }, () => {
  let postgres: PostgresServer;
  let redis: RedisServer;
  let harness: ClusterHarness;
  let members: ClusterMemberProcess[] = [];
  let daemon: DaemonProcess;
  /** Tokens by member name; replaced after the restore. */
  const tokens = new Map<string, string>();

  const call = async (m: ClusterMemberProcess, method: string, path: string, body?: unknown, token = tokens.get(m.name)!) => {
    const res = await fetch(m.process!.url + path, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, text, json: text && res.headers.get("content-type")?.includes("json") ? JSON.parse(text) : undefined };
  };
  const records = async (m: ClusterMemberProcess) => ((await call(m, "GET", "/api/v1/services")).json as Instance[]).filter((r) => ours(r.group));
  const processes = () => new Map([...serverProcesses()].filter(([id]) => ours(id)));

  /** Why the records of `m` and the processes disagree with `targets` (RUNNING per group), or null. */
  const disagreement = async (m: ClusterMemberProcess, targets: Record<string, number>): Promise<string | null> => {
    const now = await records(m);
    const procs = processes();
    for (const [id, pids] of procs) {
      if (pids.length !== 1) return `${id} runs ${pids.length} times`;
      const r = now.find((x) => x.id === id);
      if (!r || !LIVE.has(r.state)) return `${id} runs (pid ${pids[0]}) but its record is ${r?.state ?? "missing"}`;
    }
    for (const r of now) if (r.state === "RUNNING" && (procs.get(r.id)?.length ?? 0) !== 1) return `${r.id} is RUNNING without its process`;
    for (const [group, target] of Object.entries(targets)) {
      const running = now.filter((r) => r.group === group && r.state === "RUNNING").length;
      if (running !== target) return `${group}: ${running} of ${target} RUNNING`;
      if (now.some((r) => r.group === group && LIVE.has(r.state) && r.state !== "RUNNING")) return `${group} not settled`;
    }
    for (const r of now) if (!(r.group in targets) && LIVE.has(r.state)) return `${r.id} of ${r.group} is ${r.state}`;
    return null;
  };
  const converge = async (targets: Record<string, number>, what: string) => {
    let last: string | null = "";
    await eventually(
      async () => {
        for (const m of members) {
          last = await disagreement(m, targets);
          if (last !== null) return false;
        }
        return true;
      },
      () => `${what} (last: ${last})`,
      waitMs,
    ).catch(async (err: unknown) => {
      const logs = members.map(
        (m) =>
          `--- ${m.name}\n${m.process
            ?.output()
            .split("\n")
            .filter((l) => /WARN|ERROR|restore|Restore|adopted|Scheduling/.test(l))
            .slice(-25)
            .join("\n")}`,
      );
      const seen = JSON.stringify((await records(members[0])).map((r) => `${r.id}=${r.state}`));
      throw new Error(`${(err as Error).message}\n${seen}\n${logs.join("\n")}\n--- daemon\n${daemon.output().split("\n").slice(-20).join("\n")}`);
    });
  };
  const createGroup = async (name: string, minInstances: number, portStart: number) => {
    const reply = await call(members[0], "POST", "/api/v1/groups", {
      name,
      platform: "simulated",
      minInstances,
      maxInstances: 10,
      memoryMb: 64,
      portRange: { start: portStart, end: portStart + 50 },
    });
    assert.equal(reply.status, 201, reply.text);
  };

  before(async () => {
    [postgres, redis] = await Promise.all([startPostgresServer(), startRedisServer()]);
    harness = new ClusterHarness({
      runtime: { profile: "production" },
      database: { uri: postgres.uri },
      kvstore: { uri: redis.uri },
      scheduler: { evaluationIntervalSeconds, reconcileIntervalSeconds },
    });
    members = await harness.startThree();
    for (const m of members) tokens.set(m.name, m.process!.adminToken);
    const nodeToken = (await call(members[0], "POST", "/api/v1/admin/tokens", {})).json.token as string;
    daemon = spawnDaemon(
      members.map((m) => m.grpcAddr),
      nodeToken,
      { maxMemoryMb: 4096, reconnectDelayMaxMs: 1_000 },
    );
    await eventually(async () => ((await call(members[0], "GET", "/api/v1/nodes?state=ONLINE")).json as unknown[]).length === 1, "the node ONLINE", waitMs);
  });

  after(async () => {
    await daemon?.stop();
    await harness?.close();
    await redis?.stop();
    await postgres?.stop();
    cleanupDirs();
  });

  it("back up, change groups, restore through another controller: all three serve and schedule the restored state", async () => {
    const [a, b, c] = members;
    await createGroup(kept, 1, 28700);
    await createGroup(deleted, 1, 28760);
    await createGroup(scaled, 1, 28820);
    await converge({ [kept]: 1, [deleted]: 1, [scaled]: 1 }, "three groups of one RUNNING instance each");
    const keptBefore = (await records(a)).find((r) => r.group === kept && r.state === "RUNNING")!.id;
    const keptPid = processes().get(keptBefore)![0];

    const backup = await call(a, "POST", "/api/v1/backups");
    assert.equal(backup.status, 201, backup.text);
    const id = backup.json.id as string;

    await createGroup(created, 2, 28880);
    assert.equal((await call(b, "DELETE", `/api/v1/groups/${deleted}`)).status, 204);
    const scaledUp = await call(c, "PATCH", `/api/v1/groups/${scaled}`, { minInstances: 3 });
    assert.equal(scaledUp.status, 200, scaledUp.text);
    await converge({ [kept]: 1, [scaled]: 3, [created]: 2 }, "the changes applied");

    // The bundle moves from a to b, as it would to a new machine.
    const download = await fetch(`${a.process!.url}/api/v1/backups/${id}/download`, { headers: { authorization: `Bearer ${tokens.get("a")}` } });
    assert.equal(download.status, 200);
    const upload = await fetch(`${b.process!.url}/api/v1/backups/upload`, {
      method: "POST",
      headers: { authorization: `Bearer ${tokens.get("b")}`, "content-type": "application/gzip" },
      body: Buffer.from(await download.arrayBuffer()),
    });
    assert.equal(upload.status, 201, await upload.text());
    // Made by a, authenticated on b: every controller of the cluster derives the same bundle key.
    const verified = await call(b, "POST", `/api/v1/backups/${id}/verify`);
    assert.equal(verified.json.valid, true, verified.text);
    assert.equal(verified.json.authenticated, true);
    const dryRun = await call(b, "POST", "/api/v1/restore", { id, dryRun: true });
    assert.equal(dryRun.status, 200, dryRun.text);
    assert.equal(dryRun.json.foreign, false, "a bundle of this cluster is not foreign on another of its controllers");

    // Writes on c while b restores: each either lands before the maintenance or is refused with 503.
    let writing = true;
    const refusals: { status: number; code: string; retryAfter: string | null }[] = [];
    const writer = (async () => {
      while (writing) {
        const res = await fetch(`${c.process!.url}/api/v1/groups/${kept}`, {
          method: "PATCH",
          headers: { authorization: `Bearer ${tokens.get("c")}`, "content-type": "application/json" },
          body: JSON.stringify({ minInstances: 1 }),
        });
        const body = (await res.json()) as { error?: { code: string } };
        if (res.status === 503) refusals.push({ status: res.status, code: body.error!.code, retryAfter: res.headers.get("retry-after") });
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    const restored = await call(b, "POST", "/api/v1/restore", { id });
    writing = false;
    await writer;
    assert.equal(restored.status, 200, restored.text);
    assert.equal(restored.json.datastores.applied, true);
    assert.ok(refusals.length > 0, "writes on c were refused while the restore ran");
    assert.ok(
      refusals.every((r) => r.code === "RESTORE_IN_PROGRESS" && r.retryAfter === "5"),
      JSON.stringify(refusals.slice(0, 3)),
    );

    // Tokens issued before the restore are refused everywhere; signing in again works everywhere.
    for (const m of members) {
      await eventually(async () => (await call(m, "GET", "/api/v1/groups")).status === 401, `${m.name} refuses the old token`, 30_000);
      tokens.set(m.name, await login(m.process!.url, "admin", TEST_ADMIN_PASSWORD));
    }
    // Every controller serves the restored groups and takes writes again.
    for (const m of members) {
      const names = ((await call(m, "GET", "/api/v1/groups")).json as { name: string }[]).map((g) => g.name).filter(ours);
      assert.deepEqual(names.sort(), [deleted, kept, scaled], `${m.name} lists the restored groups`);
      assert.equal((await call(m, "GET", `/api/v1/groups/${scaled}`)).json.minInstances, 1);
      assert.equal((await call(m, "GET", `/api/v1/groups/${created}`)).status, 404);
    }
    assert.equal((await call(c, "PATCH", `/api/v1/groups/${kept}`, { minInstances: 1 })).status, 200);

    // The schedulers converge on the restored records: created's instances stopped, deleted's run again,
    // scaled back to one, kept's instance untouched, and no id runs twice.
    await converge({ [kept]: 1, [deleted]: 1, [scaled]: 1 }, "the processes match the restored records");
    assert.equal(processes().get(keptBefore)?.[0], keptPid, "the instance both states share kept running as the same process");
    assert.equal([...processes().keys()].filter((id) => id.startsWith(`${created}-`)).length, 0);
  });
});
