// kill -9 of a real controller process in the middle of a backup and in the middle of a restore
// (embedded store, development profile). After a kill mid-backup the next start has no half
// bundle and the store is as before; after a kill mid-restore the next start finishes the restore
// from its journal before serving, so the store is as restored, never a blend. Both starts work.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { login, startTestController, type TestController } from "../support/controller.js";
import { eventually } from "../support/wait.js";

const TEMPLATE_FILES = 6;
const TEMPLATE_FILE_BYTES = 6 * 1024 * 1024;

async function call(c: TestController, token: string, method: string, path: string, body?: unknown): Promise<{ status: number; json: any }> {
  const res = await fetch(c.url + path, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : undefined };
}

/** Groups and a template with large random files (so a backup and a restore take a while). */
async function populate(c: TestController, token: string, tag: string, groups: number): Promise<void> {
  for (let n = 0; n < groups; n++) assert.equal((await call(c, token, "POST", "/api/v1/groups", { name: `${tag}-${n}`, platform: "simulated" })).status, 201);
  assert.equal((await call(c, token, "POST", "/api/v1/templates", { name: `${tag}-files`, platform: "simulated" })).status, 201);
  for (let n = 0; n < TEMPLATE_FILES; n++) {
    const form = new FormData();
    form.append("file", new Blob([randomBytes(TEMPLATE_FILE_BYTES)]), `part-${n}.bin`);
    const res = await fetch(`${c.url}/api/v1/templates/${tag}-files/files/upload`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}` },
      body: form,
    });
    assert.equal(res.status, 200, await res.text());
  }
}

async function groupNames(c: TestController, token: string): Promise<string[]> {
  const res = await call(c, token, "GET", "/api/v1/groups");
  assert.equal(res.status, 200);
  return (res.json as { name: string }[]).map((g) => g.name).sort();
}

describe("kill -9 during backup and restore", { timeout: 600_000 }, () => {
  const controllers: TestController[] = [];
  after(async () => {
    for (const c of controllers) await c.stop().catch(() => undefined);
  });

  it("mid-backup: no half bundle, the store as before, the next start and the next backup work", async () => {
    let c = await startTestController();
    controllers.push(c);
    await populate(c, c.adminToken, "kb", 10);
    const before = await groupNames(c, c.adminToken);
    const tmp = join(c.dataDir, "backups", "tmp");
    void fetch(`${c.url}/api/v1/backups`, { method: "POST", headers: { authorization: `Bearer ${c.adminToken}` } }).catch(() => undefined);
    await eventually(async () => existsSync(tmp) && (await readdir(tmp)).some((f) => f.endsWith(".tar.gz")), "a bundle being written", {
      timeoutMs: 60_000,
      intervalMs: 5,
    });
    await c.kill9();
    c = await c.restart();
    controllers.push(c);
    const token = await login(c.url, c.adminUsername, c.adminPassword);
    assert.deepEqual((await call(c, token, "GET", "/api/v1/backups")).json, [], "a bundle cut short never becomes a backup");
    assert.deepEqual(await readdir(tmp), [], "the start emptied tmp/");
    assert.deepEqual(await groupNames(c, token), before);
    const created = await call(c, token, "POST", "/api/v1/backups");
    assert.equal(created.status, 201);
    assert.equal((await call(c, token, "POST", `/api/v1/backups/${created.json.id}/verify`)).json.valid, true);
  });

  it("mid-restore: the next start finishes the restore from its journal, then serves the restored store", async () => {
    let c = await startTestController();
    controllers.push(c);
    await populate(c, c.adminToken, "kr", 10);
    const backedUp = await groupNames(c, c.adminToken);
    const created = await call(c, c.adminToken, "POST", "/api/v1/backups");
    assert.equal(created.status, 201);
    // Change everything the restore will replace: other groups, other template blobs.
    for (const name of backedUp.slice(0, 5)) assert.equal((await call(c, c.adminToken, "DELETE", `/api/v1/groups/${name}`)).status < 300, true);
    await populate(c, c.adminToken, "later", 5);
    assert.notDeepEqual(await groupNames(c, c.adminToken), backedUp);

    const journal = join(c.dataDir, "backups", "restore-journal.json");
    void fetch(`${c.url}/api/v1/restore`, {
      method: "POST",
      headers: { authorization: `Bearer ${c.adminToken}`, "content-type": "application/json" },
      body: JSON.stringify({ id: created.json.id }),
    }).catch(() => undefined);
    await eventually(() => existsSync(journal), "the restore journal", { timeoutMs: 60_000, intervalMs: 2 });
    await c.kill9();
    assert.ok(existsSync(journal), "killed while the restore was under way");

    c = await c.restart();
    controllers.push(c);
    assert.ok(!existsSync(journal), "the start finished the restore");
    assert.match(c.output(), /Finishing the restore of backup/);
    const token = await login(c.url, c.adminUsername, c.adminPassword);
    assert.deepEqual(await groupNames(c, token), backedUp);
    const templates = (await call(c, token, "GET", "/api/v1/templates")).json as { name: string }[];
    assert.deepEqual(templates.map((t) => t.name).sort(), ["kr-files"]);
    const files = await fetch(`${c.url}/api/v1/templates/kr-files/export`, { headers: { authorization: `Bearer ${token}` } });
    assert.equal(files.status, 200, "every blob of the restored template is there");
    assert.ok((await files.arrayBuffer()).byteLength >= TEMPLATE_FILES * TEMPLATE_FILE_BYTES);
  });
});
