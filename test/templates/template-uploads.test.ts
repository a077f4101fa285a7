/**
 * Uploads and imports above the default 1 MiB body limit, on the real in-process app: the per-route
 * limit (413 in the envelope, nothing written, no spooled file left), the default limit of every
 * other route, and the bytes round-tripping through chunked storage. Memory: template-upload-memory.test.ts.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { TEMPLATE_UPLOAD_BYTES_MAX } from "../../src/http/routes/templates.js";
import { FILE_CHUNK_BYTES } from "../../src/templates/file-content.js";
import { startTestApp, type TestApp } from "../support/http-app.js";
import { packTarGzBytes } from "./archive-fixtures.js";
import { streamUpload } from "./stream-upload.js";

const MiB = 1024 * 1024;

async function sha256Of(res: Response): Promise<string> {
  const hash = createHash("sha256");
  for await (const part of res.body!) hash.update(part);
  return hash.digest("hex");
}

describe("template uploads at the per-route limit", () => {
  let t: TestApp;
  let admin: string;
  let spoolDirectory: string;
  before(async () => {
    spoolDirectory = await mkdtemp(join(tmpdir(), "cloud-template-spool-"));
    t = await startTestApp({ templateSpoolDirectory: spoolDirectory });
    admin = await t.tokenFor("ADMIN");
    await t.templates.create({ name: "big" });
  });
  after(async () => {
    await t.close();
    await rm(spoolDirectory, { recursive: true, force: true });
  });

  const url = (path: string) => `${t.baseUrl}${path}`;
  const get = (path: string) => fetch(url(path), { headers: { authorization: `Bearer ${admin}` } });

  it("stores a 20 MiB upload in chunks and serves the same bytes back", async (context) => {
    const sent = await streamUpload({ url: url("/api/v1/templates/big/files/upload?path=worlds"), token: admin, fileName: "world.bin", sizeBytes: 20 * MiB });
    assert.equal(sent.status, 200, JSON.stringify(sent.json));
    assert.equal(sent.json.changed, true);

    const downloadStartMs = performance.now();
    const download = await get("/api/v1/templates/big/files/download?path=worlds/world.bin");
    assert.equal(download.status, 200);
    assert.equal(download.headers.get("content-length"), String(20 * MiB));
    assert.equal(download.headers.get("x-content-sha256"), sent.sha256);
    assert.equal(await sha256Of(download), sent.sha256);
    const downloadMs = performance.now() - downloadStartMs;
    context.diagnostic(
      `20 MiB: upload ${sent.elapsedMs.toFixed(0)} ms (${(20 / (sent.elapsedMs / 1000)).toFixed(0)} MiB/s), download ${downloadMs.toFixed(0)} ms (${(20 / (downloadMs / 1000)).toFixed(0)} MiB/s)`,
    );

    const manifest = (await (await get("/api/v1/templates/big/manifest")).json()) as { entries: { path: string }[] };
    const entry = manifest.entries.find((e) => e.path === "worlds/world.bin");
    assert.deepEqual(entry, { path: "worlds/world.bin", mode: 0o100644, size: 20 * MiB, sha256: sent.sha256 });
    const blob = await get(`/api/v1/templates/big/blobs/${sent.sha256}`);
    assert.equal(await sha256Of(blob), sent.sha256);
    assert.ok((await t.blobs.list()).length >= Math.ceil((20 * MiB) / FILE_CHUNK_BYTES), "stored as chunk blobs");
    assert.deepEqual(await readdir(spoolDirectory), [], "the spool is removed");
  });

  it("imports a tar.gz above 1 MiB", async () => {
    const large = randomBytes(FILE_CHUNK_BYTES + 123_457);
    const archive = await packTarGzBytes([
      { path: "plugins", kind: "dir", mode: 0o755 },
      { path: "plugins/big.jar", kind: "file", mode: 0o644, data: large },
      { path: "server.properties", kind: "file", mode: 0o644, data: Buffer.from("motd={{motd}}\n") },
    ]);
    assert.ok(archive.byteLength > MiB);
    const form = new FormData();
    form.append("file", new Blob([archive]), "imported.tar.gz");
    const res = await fetch(url("/api/v1/templates/import?name=imported"), { method: "POST", headers: { authorization: `Bearer ${admin}` }, body: form });
    assert.equal(res.status, 201, await res.clone().text());
    const download = await get("/api/v1/templates/imported/files/download?path=plugins/big.jar");
    assert.equal(await sha256Of(download), createHash("sha256").update(large).digest("hex"));
    const exported = await get("/api/v1/templates/imported/export");
    assert.equal(exported.headers.get("x-template-hash"), ((await res.json()) as { hash: string }).hash);
  });

  it("refuses a body declared above the route's limit with 413 and writes nothing", async () => {
    const before = await t.templates.get("big");
    const blobsBefore = await t.blobs.list();
    const res = await streamUpload({
      url: url("/api/v1/templates/big/files/upload"),
      token: admin,
      fileName: "too-big.bin",
      sizeBytes: 2 * MiB,
      declaredBytes: TEMPLATE_UPLOAD_BYTES_MAX + 1,
    });
    assert.equal(res.status, 413);
    assert.deepEqual(res.json, { error: { code: "PAYLOAD_TOO_LARGE", message: `Request body exceeds ${TEMPLATE_UPLOAD_BYTES_MAX} bytes`, status: 413 } });
    assert.equal((await t.templates.get("big")).hash, before.hash);
    assert.deepEqual(await t.blobs.list(), blobsBefore);
  });

  it("keeps the 1 MiB limit on every other route", async () => {
    const text = "x".repeat(MiB + 1);
    const put = await t.request("PUT", "/api/v1/templates/big/files/content", { token: admin, body: { path: "a.txt", content: text } });
    assert.equal(put.status, 413);
    assert.equal(put.json.error.code, "PAYLOAD_TOO_LARGE");
    const chunked = await fetch(url("/api/v1/groups"), {
      method: "POST",
      headers: { authorization: `Bearer ${admin}`, "content-type": "application/json" },
      body: new Blob([JSON.stringify({ name: "g", pad: text })]).stream(),
      duplex: "half",
    } as RequestInit);
    assert.equal(chunked.status, 413);
    assert.deepEqual(await chunked.json(), { error: { code: "PAYLOAD_TOO_LARGE", message: `Request body exceeds ${MiB} bytes`, status: 413 } });
    const extract = await t.request("POST", "/api/v1/templates/big/files/extract", { token: admin, body: { path: text } });
    assert.equal(extract.status, 413);
  });
});

describe("template uploads above a small per-route limit", () => {
  const limitBytes = 3 * MiB;
  let t: TestApp;
  let admin: string;
  let spoolDirectory: string;
  before(async () => {
    spoolDirectory = await mkdtemp(join(tmpdir(), "cloud-template-spool-"));
    t = await startTestApp({
      templateSpoolDirectory: spoolDirectory,
      bodyLimitRoutes: [
        { method: "POST", path: "/api/v1/templates/import", maxBytes: limitBytes },
        { method: "POST", path: "/api/v1/templates/:name/files/upload", maxBytes: limitBytes },
      ],
    });
    admin = await t.tokenFor("ADMIN");
    await t.templates.create({ name: "small" });
  });
  after(async () => {
    await t.close();
    await rm(spoolDirectory, { recursive: true, force: true });
  });

  it("a chunked body that streams past the limit is 413, writes nothing and leaves no spooled file", async () => {
    const first = await streamUpload({
      url: `${t.baseUrl}/api/v1/templates/small/files/upload`,
      token: admin,
      fileName: "ok.bin",
      sizeBytes: 2 * MiB,
      declaredBytes: null,
    });
    assert.equal(first.status, 200);
    const before = await t.templates.get("small");
    const blobsBefore = await t.blobs.list();
    const over = await streamUpload({
      url: `${t.baseUrl}/api/v1/templates/small/files/upload`,
      token: admin,
      fileName: "over.bin",
      sizeBytes: limitBytes,
      declaredBytes: null,
    });
    assert.equal(over.status, 413);
    assert.equal(over.json.error.code, "PAYLOAD_TOO_LARGE");
    assert.equal((await t.templates.get("small")).hash, before.hash);
    assert.deepEqual(await t.blobs.list(), blobsBefore);
    assert.deepEqual(await readdir(spoolDirectory), []);

    const imported = await streamUpload({
      url: `${t.baseUrl}/api/v1/templates/import?name=over`,
      token: admin,
      fileName: "over.tar.gz",
      sizeBytes: limitBytes,
      declaredBytes: null,
    });
    assert.equal(imported.status, 413);
    assert.equal((await t.request("GET", "/api/v1/templates/over", { token: admin })).status, 404);
    assert.deepEqual(await readdir(spoolDirectory), []);
  });
});
