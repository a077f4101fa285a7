/**
 * The dashboard's files as the controller serves them (src/http/routes/dashboard.ts, the security
 * headers of src/http/middleware/security-headers.ts), over a real server and a small built
 * directory: redirects that work under a path prefix, the strict CSP, cache headers by kind of
 * file, ETag revalidation, gzip, no way out of the directory, and the notice when nothing is built.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { DASHBOARD_CSP } from "../../src/http/middleware/security-headers.js";
import { startTestApp, type TestApp } from "../support/http-app.js";

const INDEX = `<!doctype html><html><head><script type="module" src="./assets/index-AbCd1234.js"></script></head><body></body></html>`;
const SCRIPT = `console.log(${JSON.stringify("x".repeat(4000))});`;

describe("the dashboard's files", () => {
  let t: TestApp;
  let empty: TestApp;
  const dir = mkdtempSync(join(tmpdir(), "cloud-dashboard-"));

  before(async () => {
    mkdirSync(join(dir, "assets"));
    writeFileSync(join(dir, "index.html"), INDEX);
    writeFileSync(join(dir, "assets", "index-AbCd1234.js"), SCRIPT);
    writeFileSync(join(dir, "favicon.svg"), "<svg xmlns='http://www.w3.org/2000/svg'/>");
    writeFileSync(join(dir, "notes.unknown"), "not served");
    t = await startTestApp({ dashboardDir: dir });
    empty = await startTestApp({ dashboardDir: join(dir, "missing") });
  });
  after(async () => {
    await t.close();
    await empty.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const get = (path: string, headers: Record<string, string> = {}, app = t) => fetch(app.baseUrl + path, { headers, redirect: "manual" });

  test("/ and /ui redirect to ui/ by a relative URL, so a path prefix in front is kept", async () => {
    for (const path of ["/", "/ui"]) {
      const res = await get(path);
      assert.equal(res.status, 302, path);
      assert.equal(res.headers.get("location"), "ui/");
    }
  });

  test("the page has the strict policy: own scripts and styles only, nothing inline, no framing, nosniff", async () => {
    const res = await get("/ui/");
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("content-type"), "text/html; charset=utf-8");
    assert.equal(await res.text(), INDEX);
    const csp = res.headers.get("content-security-policy")!;
    assert.equal(csp, DASHBOARD_CSP);
    assert.match(csp, /script-src 'self'(;|$)/);
    assert.match(csp, /frame-ancestors 'none'/);
    assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval|\*/);
    assert.equal(res.headers.get("x-content-type-options"), "nosniff");
    assert.equal(res.headers.get("x-frame-options"), "DENY");
    assert.equal(res.headers.get("cache-control"), "no-cache");
  });

  test("hashed assets are immutable for a year; the rest is revalidated by ETag (304)", async () => {
    const script = await get("/ui/assets/index-AbCd1234.js");
    assert.equal(script.status, 200);
    assert.equal(script.headers.get("content-type"), "text/javascript; charset=utf-8");
    assert.equal(script.headers.get("cache-control"), "public, max-age=31536000, immutable");
    const icon = await get("/ui/favicon.svg");
    assert.equal(icon.headers.get("cache-control"), "no-cache");
    const etag = icon.headers.get("etag")!;
    assert.ok(etag);
    const again = await get("/ui/favicon.svg", { "if-none-match": etag });
    assert.equal(again.status, 304);
    assert.equal(await again.text(), "");
    const changed = await get("/ui/favicon.svg", { "if-none-match": '"something-else"' });
    assert.equal(changed.status, 200);
  });

  test("a browser that takes gzip gets the gzipped file; one that does not gets it plain", async () => {
    const zipped = await fetch(`${t.baseUrl}/ui/assets/index-AbCd1234.js`, { headers: { "accept-encoding": "gzip" } });
    assert.equal(zipped.headers.get("content-encoding"), "gzip");
    assert.equal(await zipped.text(), SCRIPT); // fetch decodes it
    const raw = await new Promise<Buffer>((resolve, reject) => {
      import("node:http").then(({ get: httpGet }) =>
        httpGet(`${t.baseUrl}/ui/assets/index-AbCd1234.js`, { headers: { "accept-encoding": "gzip" } }, (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("end", () => resolve(Buffer.concat(chunks)));
        }).on("error", reject),
      );
    });
    assert.ok(raw.length < SCRIPT.length / 4, `${raw.length} bytes gzipped`);
    assert.equal(gunzipSync(raw).toString(), SCRIPT);
    const plain = await get("/ui/assets/index-AbCd1234.js", { "accept-encoding": "identity" });
    assert.equal(plain.headers.get("content-encoding"), null);
  });

  test("only the built files are served: unknown names, other types and paths out of the directory are 404", async () => {
    for (const path of ["/ui/nothing.js", "/ui/notes.unknown", "/ui/%2e%2e/package.json", "/ui/..%2fpackage.json", "/ui/assets/../../package.json"]) {
      const res = await get(path);
      assert.equal(res.status, 404, path);
      assert.equal(res.headers.get("x-content-type-options"), "nosniff");
    }
  });

  test("API answers carry nosniff and a policy that loads nothing and forbids framing", async () => {
    const res = await get("/api/v1/system/version");
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("x-content-type-options"), "nosniff");
    assert.equal(res.headers.get("content-security-policy"), "default-src 'none'; frame-ancestors 'none'");
    const denied = await get("/api/v1/groups");
    assert.equal(denied.status, 401);
    assert.equal(denied.headers.get("content-security-policy"), "default-src 'none'; frame-ancestors 'none'");
  });

  test("without a built dashboard /ui/ says how to build it", async () => {
    const res = await get("/ui/", {}, empty);
    assert.equal(res.status, 404);
    assert.match(await res.text(), /npm run build/);
  });
});
