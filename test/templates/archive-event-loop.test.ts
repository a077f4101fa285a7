/**
 * Archive work leaves the event loop free: while a 48 MiB template is imported and exported over
 * HTTP, the server's event-loop delay stays under a bound. Whole-archive gunzipSync/gzipSync (what
 * the archive code did before it streamed) stalled the loop for over a second at this size, so the
 * bound fails with it. The client here only streams bytes, so the loop's stalls are the server's.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { createWriteStream } from "node:fs";
import { mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { monitorEventLoopDelay, performance } from "node:perf_hooks";
import { promisify } from "node:util";
import { pipeline } from "node:stream/promises";
import { createGzip } from "node:zlib";
import tarStream from "tar-stream";
import { startTestApp, type TestApp } from "../support/http-app.js";
import { multipartFromFile } from "./archive-fixtures.js";

const MiB = 1024 * 1024;
/** Largest event-loop delay allowed while an archive is imported or exported. */
const LOOP_DELAY_MAX_MS = 200;
const randomBytesAsync = promisify(randomBytes);

/**
 * Writes a tar.gz of 12 files (48 MiB: 8 incompressible, 4 of repeated text) to `path`. tar-stream
 * and streaming gzip, not the code under test, so this test runs against any version of it.
 */
async function writeTemplateArchive(path: string): Promise<number> {
  const pack = tarStream.pack();
  const written = pipeline(pack, createGzip(), createWriteStream(path));
  let totalBytes = 0;
  for (let i = 0; i < 12; i++) {
    const data = i < 8 ? await randomBytesAsync(4 * MiB + 1234 * i) : Buffer.alloc(4 * MiB, `motd=Welcome {{player}} to server ${i}\n`);
    totalBytes += data.byteLength;
    await new Promise<void>((resolve, reject) =>
      pack.entry({ name: `worlds/w${i}/region.${i < 8 ? "mca" : "yml"}`, size: data.byteLength, mode: 0o644 }, data, (err) => (err ? reject(err) : resolve())),
    );
  }
  pack.finalize();
  await written;
  return totalBytes;
}

/** The loop delay (max and p99, ms) of this process while `work` runs. */
async function loopDelayDuring<T>(work: () => Promise<T>): Promise<{ value: T; maxMs: number; p99Ms: number; elapsedMs: number }> {
  const histogram = monitorEventLoopDelay({ resolution: 10 });
  histogram.enable();
  const startMs = performance.now();
  try {
    const value = await work();
    return { value, maxMs: histogram.max / 1e6, p99Ms: histogram.percentile(99) / 1e6, elapsedMs: performance.now() - startMs };
  } finally {
    histogram.disable();
  }
}

describe("archive work and the event loop", () => {
  let t: TestApp;
  let admin: string;
  let dir: string;
  let archivePath: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "cloud-archive-loop-"));
    archivePath = join(dir, "template.tar.gz");
    t = await startTestApp({ templateSpoolDirectory: dir });
    admin = await t.tokenFor("ADMIN");
  });
  after(async () => {
    await t.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("a 48 MiB import and its export keep the event-loop delay under 200 ms", { timeout: 120_000 }, async (context) => {
    const fileBytes = await writeTemplateArchive(archivePath);
    const archiveBytes = (await stat(archivePath)).size;

    const imported = await loopDelayDuring(async () => {
      const { body, contentType } = multipartFromFile(archivePath, "template.tar.gz");
      const res = await fetch(`${t.baseUrl}/api/v1/templates/import?name=loop`, {
        method: "POST",
        headers: { authorization: `Bearer ${admin}`, "content-type": contentType },
        body,
        duplex: "half",
      } as RequestInit);
      return { status: res.status, json: (await res.json()) as { hash: string; sizeBytes: number } };
    });
    assert.equal(imported.value.status, 201, JSON.stringify(imported.value.json));
    assert.equal(imported.value.json.sizeBytes, fileBytes);

    const exported = await loopDelayDuring(async () => {
      const res = await fetch(`${t.baseUrl}/api/v1/templates/loop/export`, { headers: { authorization: `Bearer ${admin}` } });
      let bytes = 0;
      for await (const chunk of res.body!) bytes += chunk.byteLength;
      return { status: res.status, hash: res.headers.get("x-template-hash"), bytes };
    });
    assert.equal(exported.value.status, 200);
    assert.equal(exported.value.hash, imported.value.json.hash);
    assert.ok(exported.value.bytes > fileBytes / 2, `exported ${exported.value.bytes} bytes`);

    const line = (what: string, m: { maxMs: number; p99Ms: number; elapsedMs: number }) =>
      `${what}: ${m.elapsedMs.toFixed(0)} ms, loop delay p99 ${m.p99Ms.toFixed(1)} ms, max ${m.maxMs.toFixed(1)} ms`;
    context.diagnostic(`${(archiveBytes / MiB).toFixed(1)} MiB tar.gz of ${(fileBytes / MiB).toFixed(0)} MiB`);
    context.diagnostic(line("import", imported));
    context.diagnostic(line("export", exported));
    assert.ok(imported.maxMs < LOOP_DELAY_MAX_MS, line("import", imported));
    assert.ok(exported.maxMs < LOOP_DELAY_MAX_MS, line("export", exported));
  });
});
