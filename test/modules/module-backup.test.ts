// A platform module's data survives a backup and restore: its key-value keys (with the time to live
// they had left) are a part of the bundle, its documents and record are bundled collections, its
// installed bundle a blob. After the module is removed and its storage dropped, a restore brings the
// record, the bundle, the documents and the keys back, and the module runs again over them; a key
// written after the backup is gone (the module's keys are replaced, not merged).
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { buildMotdModule } from "../../examples/motd-module/build.js";
import { KV_PARTS, MODULE_KV_PREFIX } from "../../src/backup/bundle-format.js";
import { MODULE_KV_PREFIX as STORAGE_PREFIX, moduleKvPrefix } from "../../src/modules/host/module-storage.js";
import { ADMIN_PASSWORD, startTestApp, type TestApp } from "../support/http-app.js";
import { eventually } from "../support/wait.js";
import { tamperBundle } from "../backup/bundle-tamper.js";
import { call, uploadModule } from "./support/module-api.js";

describe("a module's storage in backups", () => {
  let t: TestApp;
  let dir: string;
  let admin: string;
  const api = (method: string, path: string, body?: unknown) => call(t.baseUrl, admin, method, path, body === undefined ? undefined : JSON.stringify(body));

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "module-backup-"));
    t = await startTestApp();
    admin = await t.login("admin", ADMIN_PASSWORD);
  });
  after(async () => {
    await t.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("names the module key prefix the storage writes under", () => {
    assert.equal(MODULE_KV_PREFIX, STORAGE_PREFIX);
    assert.deepEqual(
      KV_PARTS.find((p) => p.prefix === MODULE_KV_PREFIX),
      { part: "module-kv", prefix: MODULE_KV_PREFIX, restore: "replace", required: false },
    );
  });

  it("restores the keys, documents and bundle of a removed module, and the module runs again", async () => {
    const built = await buildMotdModule({ outDir: dir });
    const installed = await uploadModule(t.baseUrl, admin, built.bundle, await readFile(built.signature, "utf8"));
    assert.equal(installed.status, 201, installed.text);
    for (let i = 0; i < 3; i++) assert.equal((await api("POST", "/api/v1/modules/motd/views")).status, 200);
    assert.equal((await api("PUT", "/api/v1/modules/motd/message", { text: "Kept by the backup" })).status, 200);
    const expiring = `${moduleKvPrefix("motd")}banner`;
    await t.kv.set(expiring, "short-lived", { ttlMs: 600_000 });

    const backup = await api("POST", "/api/v1/backups");
    assert.equal(backup.status, 201, backup.text);
    assert.deepEqual(
      backup.json.kv.find((k: { part: string }) => k.part === "module-kv"),
      {
        part: "module-kv",
        prefix: MODULE_KV_PREFIX,
        keyCount: 2,
        file: "kv/module-kv.ndjson",
        sizeBytes: backup.json.kv.find((k: { part: string }) => k.part === "module-kv").sizeBytes,
        sha256: backup.json.kv.find((k: { part: string }) => k.part === "module-kv").sha256,
      },
    );
    const verified = await api("POST", `/api/v1/backups/${backup.json.id}/verify`);
    assert.equal(verified.json.valid, true, verified.text);

    // After the backup: one more view, a stray key, then the module removed and its storage dropped.
    assert.equal((await api("POST", "/api/v1/modules/motd/views")).json.views, 4);
    await t.kv.set(`${moduleKvPrefix("motd")}stray`, "written after the backup");
    assert.equal((await api("DELETE", "/api/v1/modules/platform/motd")).status, 204);
    const dropped = await api("DELETE", "/api/v1/modules/platform/motd/storage");
    assert.equal(dropped.status, 200, dropped.text);
    await t.kv.set(`${moduleKvPrefix("motd")}stray`, "written after the backup");
    assert.equal(await t.kv.get(`${moduleKvPrefix("motd")}views`), null);
    assert.equal((await api("GET", "/api/v1/modules/motd/message")).status, 404);

    const restored = await api("POST", "/api/v1/restore", { id: backup.json.id });
    assert.equal(restored.status, 200, restored.text);
    assert.ok(restored.json.datastores.redisPrefixes.includes(MODULE_KV_PREFIX), restored.text);

    // A restore replaces the users: earlier tokens stop verifying.
    admin = await t.login("admin", ADMIN_PASSWORD);
    const message = await eventually(async () => {
      const answer = await api("GET", "/api/v1/modules/motd/message");
      return answer.status === 200 ? answer : null;
    }, "the restored module to answer");
    assert.equal(message.json.text, "Kept by the backup");
    const listed = (await api("GET", "/api/v1/modules")).json;
    assert.deepEqual(
      listed.map((m: { id: string; state: string; version: string }) => [m.id, m.state, m.version]),
      [["motd", "ACTIVE", "1.0.0"]],
    );
    // The counter is the backup's (3), not the 4 it reached after, and the stray key is gone.
    assert.equal((await api("POST", "/api/v1/modules/motd/views")).json.views, 4);
    assert.equal(await t.kv.get(`${moduleKvPrefix("motd")}stray`), null);
    assert.equal(await t.kv.get(expiring), "short-lived");
    const ttlMs = await t.kv.ttlMs(expiring);
    assert.ok(ttlMs !== null && ttlMs > 0 && ttlMs <= 600_000, `the restored key keeps a time to live (${ttlMs})`);
  });

  it("restores a bundle written before the module-kv part: valid, and the module keys are left as they are", async () => {
    await t.kv.set(`${moduleKvPrefix("motd")}views`, "41");
    const backup = await api("POST", "/api/v1/backups");
    assert.equal(backup.status, 201, backup.text);
    const bytes = Buffer.from(
      await (await fetch(`${t.baseUrl}/api/v1/backups/${backup.json.id}/download`, { headers: { authorization: `Bearer ${admin}` } })).arrayBuffer(),
    );
    const older = await tamperBundle(bytes, (entries, manifest) => {
      entries.splice(
        entries.findIndex((e) => e.name === "kv/module-kv.ndjson"),
        1,
      );
      manifest.kv = manifest.kv.filter((k: { part: string }) => k.part !== "module-kv");
      manifest.id = "20261101T000000000Z-0000aaaa";
    });
    const uploaded = await fetch(`${t.baseUrl}/api/v1/backups/upload`, { method: "POST", headers: { authorization: `Bearer ${admin}` }, body: older });
    assert.equal(uploaded.status, 201, await uploaded.text());
    const verified = await api("POST", "/api/v1/backups/20261101T000000000Z-0000aaaa/verify");
    assert.deepEqual(verified.json.missingRedisPrefixes, []);
    await t.kv.set(`${moduleKvPrefix("motd")}views`, "42");
    // Its manifest was rewritten, so this cluster no longer authenticates it: restored as foreign.
    const restored = await api("POST", "/api/v1/restore", { id: "20261101T000000000Z-0000aaaa", foreign: true });
    assert.equal(restored.status, 200, restored.text);
    assert.ok(!restored.json.datastores.redisPrefixes.includes(MODULE_KV_PREFIX), restored.text);
    assert.equal(await t.kv.get(`${moduleKvPrefix("motd")}views`), "42");
    admin = await t.login("admin", ADMIN_PASSWORD);
  });
});
