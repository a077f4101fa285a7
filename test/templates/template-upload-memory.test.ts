/**
 * The server's resident memory while a separate process uploads 64 MiB: streamed, it grows by a few
 * chunks; a route that buffers the same body grows by at least the body, which shows the bound can
 * fail. A file of its own, so the process has not grown through other tests before it measures.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { join } from "node:path";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { addRoute } from "../../src/http/route.js";
import { TEMPLATE_BODY_LIMIT_ROUTES, TEMPLATE_UPLOAD_BYTES_MAX } from "../../src/http/routes/templates.js";
import { startTestApp, type TestApp } from "../support/http-app.js";
import { streamUpload, type StreamUploadResult } from "./stream-upload.js";

const MiB = 1024 * 1024;
const UPLOAD_BYTES = 64 * MiB;
/**
 * Growth allowed while streaming: half the upload. Streaming measured 15-17 MiB here (socket reads
 * and one 4 MiB chunk buffer awaiting collection); a buffered body alone would be the whole upload.
 */
const STREAMED_GROWTH_BYTES_MAX = UPLOAD_BYTES / 2;

setFlagsFromString("--expose-gc");
const collectGarbage = runInNewContext("gc") as () => void;

/** How far the resident set rose above its level at the start while `work` ran. */
async function rssGrowthDuring(work: () => Promise<void>): Promise<number> {
  collectGarbage();
  const start = process.memoryUsage.rss();
  let peak = start;
  const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage.rss())), 5);
  try {
    await work();
  } finally {
    clearInterval(sampler);
  }
  return Math.max(peak, process.memoryUsage.rss()) - start;
}

/** Runs the upload client in a child process, so its memory is not counted as the server's. */
async function uploadFromChild(url: string, token: string, sizeBytes: number): Promise<StreamUploadResult> {
  const main = join(import.meta.dirname, "stream-upload-main.ts");
  const child = spawn(process.execPath, ["--import", "tsx", main, url, token, "huge.bin", String(sizeBytes)], { stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  child.stdout.setEncoding("utf8").on("data", (text: string) => (out += text));
  const code = await new Promise<number | null>((resolve) => child.on("exit", resolve));
  assert.equal(code, 0, "the upload client exits cleanly");
  return JSON.parse(out.trim().split("\n").pop()!);
}

describe("template upload memory", () => {
  let t: TestApp;
  let admin: string;
  before(async () => {
    const buffering = { method: "POST", path: "/api/v1/test/buffered-upload", maxBytes: TEMPLATE_UPLOAD_BYTES_MAX };
    t = await startTestApp({
      bodyLimitRoutes: [...TEMPLATE_BODY_LIMIT_ROUTES, buffering],
      routeModules: [
        (app, registry) =>
          addRoute(app, registry, { method: "post", path: buffering.path, summary: "Reads the whole body into memory", tag: "Test" }, async ({ c }) => ({
            bytes: (await c.req.arrayBuffer()).byteLength,
          })),
      ],
    });
    admin = await t.tokenFor("ADMIN");
    await t.templates.create({ name: "big" });
    // Warm-up: the code paths of an upload are loaded before anything is measured.
    const warm = await streamUpload({ url: `${t.baseUrl}/api/v1/templates/big/files/upload`, token: admin, fileName: "warm-up.bin", sizeBytes: 6 * MiB });
    assert.equal(warm.status, 200);
  });
  after(() => t.close());

  it("a 64 MiB upload grows the server's resident memory by far less than the upload", async (context) => {
    let sent: StreamUploadResult | undefined;
    const growthBytes = await rssGrowthDuring(async () => {
      sent = await uploadFromChild(`${t.baseUrl}/api/v1/templates/big/files/upload`, admin, UPLOAD_BYTES);
    });
    assert.equal(sent!.status, 200, JSON.stringify(sent!.json));
    const listing = await t.templates.listFiles("big", "");
    assert.equal(listing.entries.find((e) => e.name === "huge.bin")?.sha256, sent!.sha256);
    const throughput = UPLOAD_BYTES / MiB / (sent!.elapsedMs / 1000);
    context.diagnostic(
      `streamed 64 MiB upload: RSS growth ${(growthBytes / MiB).toFixed(1)} MiB, ${sent!.elapsedMs.toFixed(0)} ms (${throughput.toFixed(0)} MiB/s)`,
    );
    assert.ok(growthBytes < STREAMED_GROWTH_BYTES_MAX, `RSS grew by ${(growthBytes / MiB).toFixed(1)} MiB`);
  });

  it("the same measurement sees a route that buffers the body grow by more than the upload", async (context) => {
    let sent: StreamUploadResult | undefined;
    const growthBytes = await rssGrowthDuring(async () => {
      sent = await uploadFromChild(`${t.baseUrl}/api/v1/test/buffered-upload`, admin, UPLOAD_BYTES);
    });
    assert.equal(sent!.status, 200);
    context.diagnostic(`buffered 64 MiB upload: RSS growth ${(growthBytes / MiB).toFixed(1)} MiB`);
    assert.ok(growthBytes > UPLOAD_BYTES, `RSS grew by ${(growthBytes / MiB).toFixed(1)} MiB`);
  });
});
