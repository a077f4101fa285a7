// A restore interrupted by a kill and finished at the next start, on a cluster: the restarting
// controller raises the restore maintenance flag for it like a restore through the API, so the
// other controllers pause (and reload from the restored records afterwards) instead of
// scheduling while the datastores are written again. Two in-process apps over one real Redis;
// the killed restore is the state it leaves before it changes anything: its journal beside the
// bundle. A flag the interrupted restore left up (a restart within its TTL) is taken over.
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { RESTORE_GENERATION_KEY, RESTORE_MAINTENANCE_KEY } from "../../src/backup/restore-coordination.js";
import type { KvStore } from "../../src/store/ports.js";
import { openRedisKvStore } from "../../src/store/redis/redis-kv-store.js";
import { startTestApp, type TestApp } from "../support/http-app.js";
import { startRedisServer, type RedisServer } from "../support/redis-server.js";

describe("finishing an interrupted restore on a cluster", () => {
  let redis: RedisServer;
  const stores: KvStore[] = [];
  const apps: TestApp[] = [];
  const dirs: string[] = [];

  before(async () => {
    redis = await startRedisServer();
  });
  after(async () => {
    for (const app of apps) await app.close();
    for (const kv of stores) await kv.close();
    for (const dir of dirs) await rm(dir, { recursive: true, force: true });
    await redis?.stop();
  });

  const kvStore = async () => {
    const kv = await openRedisKvStore({ uri: redis.uri });
    stores.push(kv);
    return kv;
  };

  /** App `a` backs up, changes its groups, and is stopped with a restore journal left behind. */
  const interruptedRestore = async (tag: string) => {
    const dir = await mkdtemp(join(tmpdir(), "cloud-restore-finish-"));
    dirs.push(dir);
    const kv = await kvStore();
    const a = await startTestApp({ kv, dir });
    apps.push(a);
    await a.groups.create({ name: `${tag}-kept`, platform: "simulated" });
    const backup = await a.backups.create();
    await a.groups.create({ name: `${tag}-later`, platform: "simulated" });
    await a.stop();
    const journal = {
      id: backup.id,
      startedAt: new Date().toISOString(),
      parts: { datastores: true, filesystem: false },
      rollbackRoot: join(dir, "backups", "rollback", "x"),
    };
    await writeFile(join(dir, "backups", "restore-journal.json"), JSON.stringify(journal));
    return { dir, kv, backupId: backup.id };
  };

  it("the other controllers follow the flag while the restarting one finishes the restore", async () => {
    const b = await startTestApp({ kv: await kvStore() });
    apps.push(b);
    const { dir, kv, backupId } = await interruptedRestore("one");
    const generation = Number(await kv.get(RESTORE_GENERATION_KEY)) || 0;

    const a = await startTestApp({ kv, dir });
    apps.push(a);
    assert.deepEqual(
      (await a.groups.list()).map((g) => g.name),
      ["one-kept"],
      "restored",
    );
    assert.match(a.logLines.join(""), new RegExp(`Finishing the restore of backup ${backupId}`));
    assert.equal(Number(await kv.get(RESTORE_GENERATION_KEY)), generation + 1, "the generation moved: every controller reloads");
    assert.equal(await kv.get(RESTORE_MAINTENANCE_KEY), null, "the flag is lifted");
    const bLog = () => b.logLines.join("");
    // B saw the flag (pub/sub or its poll), or at least the generation move on its next poll; either way it re-adopted.
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    assert.match(bLog(), /Scheduling resumed from the stored records \((maintenance lifted|a restore finished meanwhile)\)/);
  });

  it("the flag the interrupted restore left up is taken over; another controller's or another restore's flag refuses the start", async () => {
    const { dir, kv, backupId } = await interruptedRestore("two");
    // The flag names the backup and this controller (its member id, kept in its Raft directory).
    const ownId = (await readFile(join(dir, "raft", "node-id"), "utf8")).trim();
    const flagOf = (controllerId: string) => JSON.stringify({ id: backupId, controllerId, startedAt: new Date().toISOString() });
    // The same backup restored by another controller right now is not taken over.
    await kv.set(RESTORE_MAINTENANCE_KEY, flagOf("ctl-another"), { ttlMs: 60_000 });
    await assert.rejects(startTestApp({ kv, dir }), new RegExp(`A restore is in progress \\(backup ${backupId} on controller ctl-another\\)`));
    await kv.set(RESTORE_MAINTENANCE_KEY, flagOf(ownId), { ttlMs: 60_000 });
    const a = await startTestApp({ kv, dir });
    apps.push(a);
    assert.deepEqual(
      (await a.groups.list()).map((g) => g.name),
      ["two-kept"],
    );
    assert.equal(await kv.get(RESTORE_MAINTENANCE_KEY), null);
    await a.stop();

    const other = await interruptedRestore("three");
    await other.kv.set(RESTORE_MAINTENANCE_KEY, JSON.stringify({ id: "someone-elses", controllerId: "ctl-x", startedAt: new Date().toISOString() }), {
      ttlMs: 60_000,
    });
    await assert.rejects(startTestApp({ kv: other.kv, dir: other.dir }), /A restore is in progress \(backup someone-elses on controller ctl-x\)/);
    await other.kv.delete(RESTORE_MAINTENANCE_KEY);
  });
});
