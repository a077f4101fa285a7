/**
 * The controllers' build mirror against a real local HTTP server as the download source: a good
 * build is downloaded once, stored in chunks and served back byte for byte; a wrong digest, a 404
 * and a download that stalls each give their issue (and store nothing), kept until `retryAfterMs`
 * has passed on the injected clock; then a corrected source is mirrored.
 */
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { createServer, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { BuildMirror } from "../../src/catalog/build-mirror.js";
import type { Logger } from "../../src/logs/types.js";
import { FILE_CHUNK_BYTES } from "../../src/templates/file-content.js";
import { openFsBlobStore, type FsBlobStore } from "../../src/store/fs-blob-store.js";
import { openStoreFixture, type StoreFixture } from "../support/store-fixture.js";
import { eventually } from "../support/wait.js";

const silentLogger: Logger = { name: "cloud.catalog", trace: () => {}, debug: () => {}, info: () => {}, warn: () => {}, error: () => {} };
const sha = (data: Uint8Array) => createHash("sha256").update(data).digest("hex");

describe("build mirror", () => {
  let fixture: StoreFixture;
  let blobs: FsBlobStore;
  let server: Server;
  let base = "";
  const good = randomBytes(FILE_CHUNK_BYTES + 12_345);
  const later = randomBytes(10_000);
  const requests = new Map<string, number>();
  const stalled: ServerResponse[] = [];
  let slowStarted = false;
  let fixed = false;

  before(async () => {
    fixture = await openStoreFixture("cloud-mirror-");
    blobs = await openFsBlobStore(join(fixture.dir, "blobs"));
    server = createServer((req, res) => {
      requests.set(req.url!, (requests.get(req.url!) ?? 0) + 1);
      if (req.url === "/good.jar") return void res.end(good);
      if (req.url === "/later.jar" && fixed) return void res.end(later);
      if (req.url === "/later.jar") return void res.end(Buffer.from("not the build"));
      if (req.url === "/slow.jar") {
        res.writeHead(200, { "content-length": String(good.byteLength) });
        res.write(good.subarray(0, 1000), () => (slowStarted = true));
        stalled.push(res);
        return;
      }
      res.writeHead(404).end("no such file");
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    for (const res of stalled) res.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await fixture.close();
  });

  const mirror = () =>
    new BuildMirror({
      documents: fixture.store,
      blobs,
      clock: fixture.clock,
      logger: silentLogger,
      downloadTimeoutMs: 600_000,
      stallTimeoutMs: 30_000,
      downloadBytesMax: 64 * 1024 * 1024,
      retryAfterMs: 60_000,
    });
  const build = (path: string, digest = sha(good)) => ({ version: "1.0.0", sha256: digest, downloadUrl: `${base}${path}` });
  const bytesOf = async (stream: ReadableStream<Uint8Array>) => {
    const parts: Uint8Array[] = [];
    for await (const part of stream as unknown as AsyncIterable<Uint8Array>) parts.push(part);
    return Buffer.concat(parts);
  };

  it("downloads a build once, in chunks, and serves it back", async () => {
    const m = mirror();
    const first = await m.check(build("/good.jar"));
    assert.equal(first.ok, false);
    assert.equal(!first.ok && first.code, "BUILD_DOWNLOADING");
    assert.deepEqual(await m.ensure(build("/good.jar")), { ok: true });
    assert.deepEqual(await m.check(build("/good.jar")), { ok: true });
    assert.equal(requests.get("/good.jar"), 1, "one download");
    const opened = await m.open(sha(good));
    assert.ok(opened);
    assert.equal(opened.size, good.byteLength);
    assert.ok((await bytesOf(opened.stream)).equals(good));
    // Another controller's mirror (same store) finds it without downloading.
    assert.deepEqual(await mirror().check(build("/good.jar")), { ok: true });
    assert.equal(requests.get("/good.jar"), 1);
  });

  it("a wrong digest and a 404 are issues kept until the retry time, then tried again", async () => {
    const m = mirror();
    const wrong = build("/later.jar", sha(later));
    const mismatch = await m.ensure({ ...wrong, sha256: "ab".repeat(32) });
    assert.equal(!mismatch.ok && mismatch.code, "BUILD_HASH_MISMATCH");
    assert.match(!mismatch.ok ? mismatch.message : "", /has sha256 [0-9a-f]{64}, the catalog says abab/);
    const missing = await m.ensure(build("/missing.jar", "cd".repeat(32)));
    assert.equal(!missing.ok && missing.code, "BUILD_DOWNLOAD_FAILED");
    assert.match(!missing.ok ? missing.message : "", /answered 404/);
    assert.equal(await m.open(sha(Buffer.from("not the build"))), null, "nothing recorded for a bad download");

    const failed = await m.ensure(wrong);
    assert.equal(!failed.ok && failed.code, "BUILD_HASH_MISMATCH");
    fixed = true;
    const before = requests.get("/later.jar");
    assert.equal((await m.check(wrong)).ok, false, "the failure is kept");
    assert.equal(requests.get("/later.jar"), before, "no download while it is kept");
    fixture.clock.advance(60_000);
    await m.check(wrong);
    await eventually(async () => (await m.check(wrong)).ok, "mirrored after the retry time");
  });

  it("a download that stalls ends with BUILD_DOWNLOAD_TIMEOUT", async () => {
    const m = mirror();
    const slow = m.ensure(build("/slow.jar", "ef".repeat(32)));
    await eventually(() => slowStarted, "the first bytes were sent");
    await new Promise((resolve) => setTimeout(resolve, 50));
    fixture.clock.advance(30_000);
    const outcome = await slow;
    assert.equal(!outcome.ok && outcome.code, "BUILD_DOWNLOAD_TIMEOUT");
    assert.match(!outcome.ok ? outcome.message : "", /sent nothing for 30000 ms/);
  });
});
