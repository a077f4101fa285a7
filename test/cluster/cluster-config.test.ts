// The cluster-shared config on a real controller (single-member Raft): patch and rollback routes,
// their validation and roles, CLUSTER_CONFIG_CHANGED published once per change, the audit records,
// the version history with parents, the values in force changing without a restart (crash-loop
// threshold, share switch, start pacing, audit retention), and the active version applied again
// after a restart.
import assert from "node:assert/strict";
import { rm } from "node:fs/promises";
import { after, before, describe, it } from "node:test";
import type { CloudEvent } from "../../src/events/types.js";
import { startTestApp, type TestApp } from "../support/http-app.js";

describe("cluster-shared config", () => {
  let t: TestApp;
  const seen: CloudEvent[] = [];
  before(async () => {
    t = await startTestApp({ scheduler: true });
    t.events.subscribeAll((event) => void seen.push(event));
  });
  let restartedDir: string | null = null;
  after(async () => {
    await t.close();
    if (restartedDir) await rm(restartedDir, { recursive: true, force: true });
  });

  const call = async (method: string, path: string, body?: unknown, role = "ADMIN") => t.request(method, path, { token: await t.tokenFor(role), body });
  const changes = async () => {
    await t.events.flush();
    return seen.filter((e) => e.type === "CLUSTER_CONFIG_CHANGED").map((e) => e.data);
  };
  const effective = async () =>
    Object.fromEntries(
      ((await call("GET", "/api/v1/cluster/config")).json.effective as { key: string; value: unknown; source: string }[]).map((s) => [
        s.key,
        `${s.value} ${s.source}`,
      ]),
    );

  it("starts empty: every value from controller.yml", async () => {
    const res = await call("GET", "/api/v1/cluster/config", undefined, "VIEWER");
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.activeVersion, null);
    assert.deepEqual(res.json.config, {});
    assert.equal((await effective())["crashes.crashLoopThreshold"], "3 controller.yml");
  });

  it("refuses bad patches and roles below CLUSTER_MANAGE, changing nothing", async () => {
    assert.equal((await call("PATCH", "/api/v1/cluster/config", { settings: { "crashes.crashLoopThreshold": 5 } }, "OPERATOR")).status, 403);
    for (const bad of [
      { settings: { "no.such.key": 1 } },
      { settings: { "crashes.crashLoopThreshold": 0 } },
      { settings: { "share.enabled": 1 } },
      { settings: {}, extra: 1 },
    ]) {
      const res = await call("PATCH", "/api/v1/cluster/config", bad);
      assert.equal(res.status, 422, `${JSON.stringify(bad)}: ${res.text}`);
    }
    assert.equal((await call("GET", "/api/v1/cluster/config")).json.activeVersion, null);
    assert.deepEqual(await changes(), []);
  });

  it("a patch is a new version applied at once, announced once and audited", async () => {
    assert.equal(t.logsAndSharing.share.enabled, false);
    const res = await call("PATCH", "/api/v1/cluster/config", {
      settings: { "crashes.crashLoopThreshold": 5, "share.enabled": true, "scheduler.maxStartingPerNode": 2, "scheduler.auditRetentionDays": 30 },
      comment: "tournament weekend",
    });
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(
      { changed: res.json.changed, activeVersion: res.json.activeVersion, parentVersion: res.json.parentVersion },
      { changed: true, activeVersion: 1, parentVersion: null },
    );
    assert.deepEqual(await changes(), [{ version: 1, parentVersion: null, mutator: "admin", action: "patched" }]);
    assert.equal(t.capabilities.settings.crashLoop.crashLoopThreshold, 5, "the crash-loop detector's threshold");
    assert.equal(t.logsAndSharing.share.enabled, true, "the share service's switch");
    assert.equal(t.capabilities.settings.maxStartingPerNode(), 2);
    assert.equal(t.scheduler.tuning.startingPerNodeMax, 2, "the scheduler's start pacing");
    assert.equal(t.capabilities.settings.auditRetentionDays(), 30);
    assert.equal((await effective())["crashes.crashLoopThreshold"], "5 cluster");
    assert.equal((await effective())["crashes.crashLoopWindowSeconds"], "300 controller.yml");

    const same = await call("PATCH", "/api/v1/cluster/config", { settings: { "share.enabled": true } });
    assert.equal(same.json.changed, false, "nothing to change: no version");
    const removed = await call("PATCH", "/api/v1/cluster/config", { settings: { "crashes.crashLoopThreshold": null } });
    assert.deepEqual([removed.json.activeVersion, removed.json.parentVersion], [2, 1]);
    assert.equal(t.capabilities.settings.crashLoop.crashLoopThreshold, 3, "back to controller.yml");
    assert.equal(t.scheduler.tuning.startingPerNodeMax, 2, "a key the patch left alone keeps its cluster value");

    const versions = (await call("GET", "/api/v1/cluster/config/versions")).json;
    assert.equal(versions.activeVersion, 2);
    assert.deepEqual(
      versions.versions.map((v: { version: number; parentVersion: number | null; comment: string }) => [v.version, v.parentVersion, v.comment]),
      [
        [1, null, "tournament weekend"],
        [2, 1, ""],
      ],
    );
    assert.equal((await call("GET", "/api/v1/cluster")).json.activeConfigVersion, 2);
    const audits = (await t.audit.keyset({ cursor: "", pageSize: 20 })).data.filter((e) => e.action === "cluster.config.patched");
    assert.equal(audits.length, 2, "one record per new version");
    assert.equal(JSON.parse(audits[1].after!)["crashes.crashLoopThreshold"], 5);
  });

  it("a rollback activates an earlier version, announced and audited; the values follow", async () => {
    const res = await call("POST", "/api/v1/cluster/config/rollback", { version: 1 });
    assert.equal(res.status, 200, res.text);
    assert.deepEqual([res.json.activeVersion, res.json.parentVersion], [1, 2]);
    assert.equal(t.capabilities.settings.crashLoop.crashLoopThreshold, 5);
    assert.deepEqual((await changes()).at(-1), { version: 1, parentVersion: 2, mutator: "admin", action: "rolled_back" });
    assert.equal((await call("POST", "/api/v1/cluster/config/rollback", { version: 1 })).json.error.code, "CONFIG_VERSION_ACTIVE");
    assert.equal((await call("POST", "/api/v1/cluster/config/rollback", { version: 99 })).json.error.code, "CONFIG_VERSION_NOT_FOUND");
    const audit = (await t.audit.keyset({ cursor: "", pageSize: 5 })).data.find((e) => e.action === "cluster.config.rolled_back");
    assert.ok(audit);
    assert.equal(audit.resourceId, "1");
  });

  it("after a restart the active version is applied again", async () => {
    const dir = t.dir;
    await t.stop();
    restartedDir = dir;
    t = await startTestApp({ dir });
    assert.equal(t.capabilities.settings.crashLoop.crashLoopThreshold, 5);
    assert.equal(t.logsAndSharing.share.enabled, true);
    assert.equal((await call("GET", "/api/v1/cluster/config")).json.activeVersion, 1);
  });
});
