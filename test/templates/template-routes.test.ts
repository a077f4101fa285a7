/**
 * The template routes on the real in-process app: spec outcomes (rollback, PROTECTED, NOT_FOUND),
 * multipart upload and import, export, confinement over HTTP, audit actions, and the daemon's cache
 * fetching through the manifest and blob routes (a second unpack downloads nothing).
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { HttpTemplateSource, TemplateCache } from "../../src/daemon/template-cache.js";
import { startTestApp, type TestApp } from "../support/http-app.js";
import { buildRawTarGz, buildZip } from "./archive-fixtures.js";

describe("template routes", () => {
  let t: TestApp;
  let admin: string;
  let scratch: string;
  before(async () => {
    t = await startTestApp();
    admin = await t.tokenFor("ADMIN");
    scratch = await mkdtemp(join(tmpdir(), "cloud-template-routes-"));
  });
  after(async () => {
    await t.close();
    await rm(scratch, { recursive: true, force: true });
  });

  const call = (method: string, path: string, body?: unknown) => t.request(method, path, { token: admin, body });
  const multipart = async (path: string, files: { name: string; data: Uint8Array }[], token = admin) => {
    const form = new FormData();
    for (const f of files) form.append("file", new Blob([f.data]), f.name);
    const res = await fetch(t.baseUrl + path, { method: "POST", headers: { authorization: `Bearer ${token}` }, body: form });
    const text = await res.text();
    return { status: res.status, json: text ? JSON.parse(text) : undefined };
  };

  it("create, get, list, patch, and the spec's rollback outcomes", async () => {
    assert.equal((await call("POST", "/api/v1/templates", { name: "lobby", platform: "paper" })).status, 201);
    assert.equal((await call("POST", "/api/v1/templates", { name: "Bad Name" })).status, 422);
    const v1 = await call("PUT", "/api/v1/templates/lobby/files/content", { path: "config/motd.txt", content: "Welcome to {{server}}" });
    assert.equal(v1.status, 200, v1.text);
    const v2 = await call("PUT", "/api/v1/templates/lobby/files/content", { path: "config/motd.txt", content: "v2" });
    const versions = await call("GET", "/api/v1/templates/lobby/versions");
    assert.deepEqual(
      versions.json.slice(0, 2).map((v: { hash: string }) => v.hash),
      [v2.json.newHash, v1.json.newHash],
    );
    assert.deepEqual(Object.keys(versions.json[0]).sort(), ["createdAt", "hash", "sizeBytes", "templateName"]);

    const rb = await call("POST", "/api/v1/templates/lobby/rollback", { hash: v1.json.newHash });
    assert.deepEqual(rb.json, { status: "restored", hash: v1.json.newHash });
    assert.equal((await call("POST", "/api/v1/templates/lobby/rollback", {})).json.error.code, "BAD_REQUEST");
    assert.equal((await call("POST", "/api/v1/templates/lobby/rollback", { hash: " " })).status, 400);
    assert.equal((await t.request("POST", "/api/v1/templates/lobby/rollback", { token: admin })).status, 400);
    const unknown = await call("POST", "/api/v1/templates/ghost/rollback", { hash: v1.json.newHash });
    assert.equal(unknown.status, 404);
    assert.equal(unknown.json.error.message, "Template not found: ghost");
    assert.equal((await call("POST", "/api/v1/templates/lobby/rollback", { hash: "f".repeat(64) })).status, 404);

    const patched = await call("PATCH", "/api/v1/templates/lobby", { description: "The lobby" });
    assert.deepEqual(Object.keys(patched.json).sort(), ["description", "hash", "name", "platform", "sizeBytes"]);
    assert.equal((await call("GET", "/api/v1/templates")).json.length, 1);
    assert.equal((await call("GET", "/api/v1/templates/lobby/files/content?path=config/motd.txt")).json.content, "Welcome to {{server}}");
    assert.equal((await call("GET", "/api/v1/templates/lobby/files?path=config")).json.entries[0].name, "motd.txt");
  });

  it("DELETE of a _module-plugins- template is 400 PROTECTED", async () => {
    await t.templates.create({ name: "_module-plugins-core" });
    const res = await call("DELETE", "/api/v1/templates/_module-plugins-core");
    assert.equal(res.status, 400);
    assert.equal(res.json.error.code, "PROTECTED");
    assert.equal(
      (await call("GET", "/api/v1/templates")).json.some((x: { name: string }) => x.name.startsWith("_")),
      false,
    );
  });

  it("refuses path escapes over HTTP with 422 and writes nothing", async () => {
    const before = (await call("GET", "/api/v1/templates/lobby")).json.hash;
    for (const path of ["../../etc/passwd", "/etc/passwd", "a\\b", "a\u0000b", "p".repeat(300)]) {
      const put = await call("PUT", "/api/v1/templates/lobby/files/content", { path, content: "x" });
      assert.equal(put.status, 422, `${JSON.stringify(path)} ${put.text}`);
      assert.equal((await call("GET", `/api/v1/templates/lobby/files/content?path=${encodeURIComponent(path)}`)).status, 422);
      assert.equal((await call("POST", "/api/v1/templates/lobby/files/rename", { from: "config", to: path })).status, 422);
    }
    const zipSlip = await multipart("/api/v1/templates/lobby/files/upload?extract=true", [
      { name: "evil.zip", data: buildZip([{ name: "../../evil", data: "x" }]) },
    ]);
    assert.equal(zipSlip.status, 422);
    const symlink = await multipart("/api/v1/templates/lobby/files/upload?extract=true", [
      { name: "l.zip", data: buildZip([{ name: "l", data: "/", unixMode: 0o120777 }]) },
    ]);
    assert.equal(symlink.status, 422);
    assert.equal((await call("GET", "/api/v1/templates/lobby")).json.hash, before);
  });

  it("upload, extract, download, export and import round-trip; audit records the template actions", async () => {
    const up = await multipart("/api/v1/templates/lobby/files/upload?path=plugins", [
      { name: "p.zip", data: buildZip([{ name: "a/b.yml", data: "k: {{v}}" }]) },
    ]);
    assert.equal(up.status, 200);
    assert.equal((await call("POST", "/api/v1/templates/lobby/files/extract", { path: "plugins/p.zip" })).status, 200);
    const dl = await fetch(`${t.baseUrl}/api/v1/templates/lobby/files/download?path=plugins/a/b.yml`, { headers: { authorization: `Bearer ${admin}` } });
    assert.equal(await dl.text(), "k: {{v}}");
    const exported = await fetch(`${t.baseUrl}/api/v1/templates/lobby/export`, { headers: { authorization: `Bearer ${admin}` } });
    assert.equal(exported.headers.get("content-type"), "application/gzip");
    const archive = new Uint8Array(await exported.arrayBuffer());
    const imported = await multipart("/api/v1/templates/import?name=lobby-copy", [{ name: "lobby.tar.gz", data: archive }]);
    assert.equal(imported.status, 201);
    assert.equal(imported.json.hash, exported.headers.get("x-template-hash"));
    const hostile = await multipart("/api/v1/templates/import?name=hostile", [
      { name: "h.tar.gz", data: buildRawTarGz([{ name: "x", typeflag: "1", linkName: "/etc/shadow" }]) },
    ]);
    assert.equal(hostile.status, 422);
    assert.equal((await call("GET", "/api/v1/templates/hostile")).status, 404);
    const viewer = await t.tokenFor("VIEWER");
    assert.equal((await multipart("/api/v1/templates/import?name=v", [{ name: "a.tar.gz", data: archive }], viewer)).status, 403);
    assert.equal((await call("POST", "/api/v1/templates/import?name=nobody", { not: "multipart" })).status, 400);

    const search = await call("GET", "/api/v1/templates/lobby/search?q=k:&maxResults=5");
    assert.equal(search.json.results[0].path, "plugins/a/b.yml");
    assert.equal((await call("GET", "/api/v1/templates/lobby/search?q=x&maxResults=201")).status, 422);
    assert.equal((await call("PUT", "/api/v1/templates/lobby/variables", { variables: { v: "1" } })).status, 200);
    assert.equal((await call("DELETE", "/api/v1/templates/lobby/files?path=plugins/p.zip")).status, 200);

    const actions = new Set((await call("GET", "/api/v1/audit?pageSize=500")).json.data?.map((e: { action: string }) => e.action) ?? []);
    for (const action of [
      "template.create",
      "template.update",
      "template.rollback",
      "template.file.upload",
      "template.file.extract",
      "template.export",
      "template.import",
      "template.variables.update",
      "template.file.delete",
    ]) {
      assert.ok(actions.has(action), `${action} audited (${[...actions].join(", ")})`);
    }
  });

  it("an upload above the default 1 MiB body limit is accepted (uploads have their own limit)", async () => {
    const big = await multipart("/api/v1/templates/lobby/files/upload", [{ name: "big.bin", data: new Uint8Array(1024 * 1024 + 1) }]);
    assert.equal(big.status, 200);
    assert.equal((await call("GET", "/api/v1/templates/lobby/files")).json.entries.find((e: { name: string }) => e.name === "big.bin").size, 1024 * 1024 + 1);
    assert.equal((await call("DELETE", "/api/v1/templates/lobby/files?path=big.bin")).status, 200);
  });

  it("the daemon cache unpacks layers with variables, and a second unpack downloads nothing", async () => {
    await call("POST", "/api/v1/templates", { name: "base" });
    await call("PUT", "/api/v1/templates/base/files/content", { path: "server.properties", content: "motd={{motd}}\nport=25565\n" });
    await call("PUT", "/api/v1/templates/base/variables", { variables: { motd: "base" } });
    await call("PUT", "/api/v1/templates/lobby/variables", { variables: { motd: "Lobby!", v: "1" } });
    const cache = await TemplateCache.open({
      directory: join(scratch, "cache"),
      sizeBytesMax: 1 << 20,
      source: new HttpTemplateSource({ baseUrl: t.baseUrl, token: admin }),
    });
    const cold = await cache.unpack([{ name: "base" }, { name: "lobby" }], join(scratch, "run1"));
    assert.ok(cold.blobsDownloaded > 0);
    assert.equal(await readFile(join(scratch, "run1", "server.properties"), "utf8"), "motd=Lobby!\nport=25565\n");
    assert.equal(await readFile(join(scratch, "run1", "plugins", "a", "b.yml"), "utf8"), "k: 1");
    const warm = await cache.unpack([{ name: "base" }, { name: "lobby" }], join(scratch, "run2"));
    assert.equal(warm.blobsDownloaded, 0);
    assert.equal(warm.bytesDownloaded, 0);
    assert.equal(warm.filesWritten, cold.filesWritten);
    assert.ok(cache.status().sizeBytes > 0);
    // A blob not in the version is refused by the controller.
    assert.equal((await call("GET", `/api/v1/templates/lobby/blobs/${"a".repeat(64)}`)).status, 404);
  });
});
