/**
 * The middleware chain on a real server: order, request and correlation ids with the logging MDC,
 * the subnet guard, both rate limits (429 + Retry-After), HTTP metrics and the error envelope on
 * 400/404/413/422/500.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { Hono } from "hono";
import { Type } from "@sinclair/typebox";
import { CidrSet, InvalidCidrError, normalizeIp } from "../../src/http/cidr.js";
import { sanitizeCorrelationId } from "../../src/http/middleware/request-context.js";
import { addRoute, type RouteModule } from "../../src/http/route.js";
import type { AppEnv } from "../../src/http/types.js";
import { TokenBuckets } from "../../src/http/token-buckets.js";
import { FakeClock } from "../support/fake-clock.js";
import { startTestApp, type TestApp, type TestResponse } from "../support/http-app.js";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

function assertEnvelope(res: TestResponse, status: number, code: string): void {
  assert.equal(res.status, status, res.text);
  assert.deepEqual(Object.keys(res.json ?? {}), ["error"], res.text);
  assert.equal(res.json.error.status, status);
  assert.equal(res.json.error.code, code);
  assert.equal(typeof res.json.error.message, "string");
}

/** Test-only routes: one reports the MDC seen by a handler and logs, one throws a plain Error. */
function probeRoutes(app: () => TestApp): RouteModule {
  return (root, registry) => {
    const sub = new Hono<AppEnv>();
    addRoute(sub, registry, { method: "get", path: "/api/v1/test/mdc", summary: "mdc", tag: "test", auth: "public" }, async () => {
      await new Promise((resolve) => setImmediate(resolve));
      app().logs.logger("cloud.test.probe").info("inside the handler");
      return app().logs.mdc();
    });
    addRoute(sub, registry, { method: "get", path: "/api/v1/test/boom", summary: "boom", tag: "test", auth: "public" }, () => {
      throw new Error("secret detail: database password is hunter2");
    });
    addRoute(sub, registry, { method: "get", path: "/api/v1/test/raw", summary: "raw", tag: "test", auth: "public" }, () => new Response("raw"));
    addRoute(
      sub,
      registry,
      { method: "post", path: "/api/v1/test/echo", summary: "echo", tag: "test", auth: "public", body: Type.Object({ n: Type.Integer() }) },
      ({ body }) => body,
    );
    root.route("/", sub);
  };
}

describe("request id and correlation", () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp({ routeModules: [probeRoutes(() => t)] });
  });
  after(() => t.close());

  it("generates both ids and echoes them as headers", async () => {
    const res = await t.request("GET", "/api/v1/system/version");
    assert.equal(res.status, 200);
    assert.match(res.headers.get("x-request-id") ?? "", UUID);
    assert.match(res.headers.get("x-correlation-id") ?? "", UUID);
    assert.notEqual(res.headers.get("x-request-id"), res.headers.get("x-correlation-id"));
  });

  it("keeps a safe inbound correlation id and replaces an unsafe one", async () => {
    const kept = await t.request("GET", "/api/v1/system/version", { headers: { "x-correlation-id": "trace.abc_DEF-123" } });
    assert.equal(kept.headers.get("x-correlation-id"), "trace.abc_DEF-123");
    for (const bad of ["has space", "semi;colon", "x".repeat(129), "<script>"]) {
      const res = await t.request("GET", "/api/v1/system/version", { headers: { "x-correlation-id": bad } });
      assert.match(res.headers.get("x-correlation-id") ?? "", UUID, bad);
    }
    assert.equal(sanitizeCorrelationId("x".repeat(128)), "x".repeat(128));
    assert.equal(sanitizeCorrelationId(""), null);
  });

  it("puts requestId, correlationId, httpMethod and httpPath into the MDC for the request only", async () => {
    const res = await t.request("GET", "/api/v1/test/mdc", { headers: { "x-correlation-id": "corr-1" } });
    assert.deepEqual(res.json, {
      requestId: res.headers.get("x-request-id"),
      correlationId: "corr-1",
      httpMethod: "GET",
      httpPath: "/api/v1/test/mdc",
    });
    const line = t.logLines.map((l) => JSON.parse(l)).find((r) => r.message === "inside the handler");
    assert.equal(line.mdc.correlationId, "corr-1");
    assert.equal(line.mdc.requestId, res.headers.get("x-request-id"));
    assert.deepEqual(t.logs.mdc(), {}, "MDC cleared outside the request");
  });

  it("echoes the ids on responses a route builds itself", async () => {
    const res = await t.request("GET", "/api/v1/test/raw", { headers: { "x-correlation-id": "corr-raw" } });
    assert.equal(res.text, "raw");
    assert.equal(res.headers.get("x-correlation-id"), "corr-raw");
    assert.match(res.headers.get("x-request-id") ?? "", UUID);
  });

  it("echoes the ids on error responses too", async () => {
    const res = await t.request("GET", "/api/v1/nope", { headers: { "x-correlation-id": "corr-404" } });
    assertEnvelope(res, 404, "NOT_FOUND");
    assert.equal(res.headers.get("x-correlation-id"), "corr-404");
    assert.match(res.headers.get("x-request-id") ?? "", UUID);
  });
});

describe("error envelope", () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp({ routeModules: [probeRoutes(() => t)] });
  });
  after(() => t.close());

  it("answers unknown routes with 404 NOT_FOUND", async () => {
    assertEnvelope(await t.request("GET", "/api/v1/does-not-exist"), 404, "NOT_FOUND");
    assertEnvelope(await t.request("DELETE", "/whatever"), 404, "NOT_FOUND");
  });

  it("answers validation failures with 422 VALIDATION_ERROR naming the field", async () => {
    const res = await t.request("POST", "/api/v1/test/echo", { body: { n: "seven" } });
    assertEnvelope(res, 422, "VALIDATION_ERROR");
    assert.match(res.json.error.message, /^n: /);
  });

  it("answers malformed JSON with 400 BAD_REQUEST", async () => {
    assertEnvelope(await t.request("POST", "/api/v1/test/echo", { rawBody: "{not json" }), 400, "BAD_REQUEST");
  });

  it("answers oversized bodies with 413 PAYLOAD_TOO_LARGE", async () => {
    const res = await t.request("POST", "/api/v1/test/echo", { rawBody: JSON.stringify({ n: 1, pad: "x".repeat(2 * 1024 * 1024) }) });
    assertEnvelope(res, 413, "PAYLOAD_TOO_LARGE");
  });

  it("answers unexpected errors with a generic 500 and logs the details", async () => {
    const res = await t.request("GET", "/api/v1/test/boom");
    assertEnvelope(res, 500, "INTERNAL_ERROR");
    assert.equal(res.json.error.message, "An internal error occurred");
    assert.ok(!res.text.includes("hunter2"));
    const logged = t.logLines.map((l) => JSON.parse(l)).find((r) => r.level === "ERROR" && String(r.exception).includes("hunter2"));
    assert.ok(logged, "details are in the log");
    assert.equal(logged.mdc.httpPath, "/api/v1/test/boom");
  });
});

describe("subnet guard", () => {
  it("refuses callers outside the allowed CIDRs with 403 before the request id, but not /metrics", async () => {
    const t = await startTestApp({ config: { http: { allowedCidrs: ["10.0.0.0/8", "fd00::/8"] } } });
    try {
      const res = await t.request("GET", "/api/v1/system/version");
      assertEnvelope(res, 403, "FORBIDDEN");
      assert.equal(res.headers.get("x-request-id"), null, "the guard runs before the request-id middleware");
      const metrics = await t.request("GET", "/metrics");
      assert.equal(metrics.status, 200);
      const preflight = await t.request("OPTIONS", "/api/v1/groups", {
        headers: { origin: "https://dash.example", "access-control-request-method": "POST" },
      });
      assert.equal(preflight.status, 204, "CORS answers preflights before the guard");
      assert.equal(preflight.headers.get("access-control-allow-origin"), "*");
    } finally {
      await t.close();
    }
  });

  it("lets allowed callers through, matching IPv4 and IPv4-mapped IPv6 forms", async () => {
    const t = await startTestApp({ config: { http: { allowedCidrs: ["::ffff:127.0.0.0/104"] } } });
    try {
      assert.equal((await t.request("GET", "/api/v1/system/version")).status, 200);
    } finally {
      await t.close();
    }
  });

  it("matches CIDRs of both families", () => {
    const set = new CidrSet(["192.168.1.0/24", "2001:db8::/32", "10.1.2.3"]);
    assert.ok(set.contains("192.168.1.77"));
    assert.ok(set.contains("::ffff:192.168.1.77"));
    assert.ok(!set.contains("192.168.2.1"));
    assert.ok(set.contains("2001:db8:ffff::1"));
    assert.ok(set.contains("[2001:db8::1]"));
    assert.ok(!set.contains("2001:db9::1"));
    assert.ok(set.contains("10.1.2.3"));
    assert.ok(!set.contains("10.1.2.4"));
    assert.ok(!set.contains("not an ip"));
    assert.equal(normalizeIp("::FFFF:1.2.3.4"), "1.2.3.4");
    assert.equal(normalizeIp("fe80::1%eth0"), "fe80::1");
    for (const bad of ["10.0.0.0/33", "::/129", "banana", "10.0.0.0/x", "1.2.3.4/8/9"]) {
      assert.throws(() => new CidrSet([bad]), InvalidCidrError, bad);
    }
  });
});

describe("CORS", () => {
  it("answers browsers (requests with an Origin) and leaves other clients alone", async () => {
    const t = await startTestApp({ config: { http: { corsOrigins: ["https://dash.example"] } } });
    try {
      const allowed = await t.request("GET", "/api/v1/system/version", { headers: { origin: "https://dash.example" } });
      assert.equal(allowed.headers.get("access-control-allow-origin"), "https://dash.example");
      assert.match(allowed.headers.get("access-control-expose-headers") ?? "", /X-Request-Id/);
      const other = await t.request("GET", "/api/v1/system/version", { headers: { origin: "https://evil.example" } });
      assert.equal(other.headers.get("access-control-allow-origin"), null);
      const cli = await t.request("GET", "/api/v1/system/version");
      assert.equal(cli.status, 200);
      assert.equal(cli.headers.get("access-control-allow-origin"), null);
      const preflight = await t.request("OPTIONS", "/api/v1/groups", {
        headers: { origin: "https://dash.example", "access-control-request-method": "PATCH", "access-control-request-headers": "authorization" },
      });
      assert.equal(preflight.status, 204);
      assert.match(preflight.headers.get("access-control-allow-methods") ?? "", /PATCH/);
    } finally {
      await t.close();
    }
  });
});

describe("rate limits", () => {
  it("limits per IP with 429 RATE_LIMITED and Retry-After, counting requests before authentication", async () => {
    const clock = new FakeClock(Date.now());
    const t = await startTestApp({ clock, config: { rateLimit: { perIpPerMinute: 3, perUserPerMinute: 1000 } } });
    try {
      for (let i = 0; i < 3; i++) assert.equal((await t.request("GET", "/api/v1/system/version")).status, 200);
      const limited = await t.request("GET", "/api/v1/groups", { token: "not-a-token" });
      assertEnvelope(limited, 429, "RATE_LIMITED");
      assert.equal(limited.headers.get("retry-after"), "20", "one token refills every 60/3 s");
      assert.match(limited.headers.get("x-request-id") ?? "", UUID, "the request id runs before the limit");
      clock.advance(19_000);
      assert.equal((await t.request("GET", "/api/v1/system/version")).status, 429);
      clock.advance(1_000);
      assert.equal((await t.request("GET", "/api/v1/system/version")).status, 200);
    } finally {
      await t.close();
    }
  });

  it("limits per user after authentication, independently for each user", async () => {
    const clock = new FakeClock(Date.now());
    const t = await startTestApp({ clock, config: { rateLimit: { perIpPerMinute: 10_000, perUserPerMinute: 2 } } });
    try {
      const admin = await t.tokenFor("ADMIN");
      const viewer = await t.tokenFor("VIEWER");
      assert.equal((await t.request("GET", "/api/v1/groups", { token: admin })).status, 200);
      assert.equal((await t.request("GET", "/api/v1/groups", { token: admin })).status, 200);
      const limited = await t.request("GET", "/api/v1/groups", { token: admin });
      assertEnvelope(limited, 429, "RATE_LIMITED");
      assert.equal(limited.headers.get("retry-after"), "30");
      assert.equal((await t.request("GET", "/api/v1/groups", { token: viewer })).status, 200);
      assert.equal((await t.request("GET", "/api/v1/system/version")).status, 200, "anonymous callers are not user-limited");
    } finally {
      await t.close();
    }
  });

  it("keeps the bucket map bounded, forgetting the least recently used key", () => {
    const clock = new FakeClock(0);
    const buckets = new TokenBuckets({ capacity: 1, windowMs: 60_000, keysMax: 2, clock });
    assert.equal(buckets.take("a").allowed, true);
    assert.equal(buckets.take("b").allowed, true);
    assert.equal(buckets.take("a").allowed, false);
    assert.equal(buckets.take("c").allowed, true, "evicts b, the least recently used");
    assert.equal(buckets.size, 2);
    assert.equal(buckets.take("a").allowed, false, "a is still tracked");
    assert.equal(buckets.take("b").allowed, true, "b starts over with a full bucket");
    const refused = buckets.take("b");
    assert.deepEqual(refused, { allowed: false, retryAfterMs: 60_000 });
  });
});

describe("metrics", () => {
  it("records every request by lower-case method and status class, and serves /metrics without auth", async () => {
    const t = await startTestApp();
    try {
      await t.request("GET", "/api/v1/system/version");
      await t.request("GET", "/api/v1/groups");
      await t.request("POST", "/api/v1/auth/login", { body: { username: "admin", password: "wrong-password" } });
      const res = await t.request("GET", "/metrics");
      assert.equal(res.status, 200);
      assert.match(res.headers.get("content-type") ?? "", /^text\/plain; version=0\.0\.4/);
      assert.match(res.text, /cloud_http_requests_total\{method="get",status_class="2xx"\} [1-9]/);
      assert.match(res.text, /cloud_http_requests_total\{method="get",status_class="4xx"\} [1-9]/);
      assert.match(res.text, /cloud_http_requests_total\{method="post",status_class="4xx"\} 1/);
      assert.match(res.text, /cloud_http_request_duration_seconds_bucket\{le="[^"]+",method="get",status_class="2xx"\}/);
    } finally {
      await t.close();
    }
  });

  it("answers /metrics with 404 NOT_FOUND when metrics are disabled", async () => {
    const t = await startTestApp({ config: { metrics: { enabled: false } } });
    try {
      await t.request("GET", "/api/v1/system/version");
      assertEnvelope(await t.request("GET", "/metrics"), 404, "NOT_FOUND");
    } finally {
      await t.close();
    }
  });
});
