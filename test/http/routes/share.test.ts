/**
 * Diagnostics and sharing (spec document 2) on a real server, sharing to a real HTTP server that
 * speaks the PrivateBin API (test/support/privatebin-server.ts): the redacted bundle with every
 * planted secret absent, the three share routes and their options, SHARE_DISABLED,
 * PASTE_UPSTREAM_ERROR and the cloud_share_* metrics.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { loadOrCreateSigningSecret } from "../../../src/auth/signing-key.js";
import { systemClock } from "../../../src/shared/clock.js";
import { startTestApp, type TestApp } from "../../support/http-app.js";
import { startPrivateBinServer, type PrivateBinServer } from "../../support/privatebin-server.js";

const PLANTED = {
  adminPassword: "planted-admin-password-7Qx",
  kvPassword: "planted-kv-password-9Zr",
  logUriPassword: "planted-log-uri-password-2Wd",
  bearer: "planted.bearer.token-5Tn",
};

describe("diagnostics and sharing", () => {
  let paste: PrivateBinServer;
  let t: TestApp;
  let admin: string;
  let crashId: string;

  before(async () => {
    paste = await startPrivateBinServer();
    t = await startTestApp({
      config: {
        share: { enabled: true, defaultPrivate: true, serviceUrl: paste.url },
        auth: { adminPassword: PLANTED.adminPassword },
        kvstore: { uri: `redis://cloud:${PLANTED.kvPassword}@127.0.0.1:6399/0` },
      },
      env: { CLOUD_ADMIN_PASSWORD: undefined },
    });
    admin = await t.login("admin", PLANTED.adminPassword);
    t.logs.logger("test.share").warn(`Connecting to postgres://cloud:${PLANTED.logUriPassword}@db.internal:5432/cloud failed`);
    t.logs.logger("test.share").info(`Header was Authorization: Bearer ${PLANTED.bearer}`);
    crashId = (
      await t.crashes.record({
        instanceId: "lobby-1",
        group: "lobby",
        nodeId: "n1",
        exitCode: 1,
        classification: "EXCEPTION",
        logTail: ["[main] starting", `joining redis://:${PLANTED.kvPassword}@cache:6379`, "boom"],
        uptimeMs: 1234,
      })
    ).id;
  });
  after(async () => {
    await t.close();
    await paste.close();
  });

  /** Every secret the controller holds or was given: none may appear in what leaves it. */
  async function secrets(): Promise<Record<string, string>> {
    const signing = Buffer.from(await loadOrCreateSigningSecret(t.documents, systemClock)).toString("base64url");
    const seed = t.cluster.seed()?.secret;
    assert.ok(seed, "the cluster has a seed secret");
    return { ...PLANTED, signingSecret: signing, clusterSeed: seed, caKey: t.cluster.material()!.caKeyPem.split("\n")[1]! };
  }

  async function assertNoSecret(text: string, where: string): Promise<void> {
    for (const [name, value] of Object.entries(await secrets())) assert.ok(!text.includes(value), `${where} carries the ${name}`);
  }

  it("answers the redacted diagnostics bundle with every section and no secret", async () => {
    const res = await t.request("GET", "/api/v1/system/diagnostics?logLines=2000&logLevel=DEBUG", { token: admin });
    assert.equal(res.status, 200, res.text);
    for (const section of ["generatedAt", "readiness", "overview", "settings", "config", "kv", "leases", "logs"]) assert.ok(section in res.json, section);
    assert.equal(res.json.readiness.status, "READY");
    assert.equal(res.json.config.auth.adminPassword, "[REDACTED]");
    assert.equal(res.json.config.kvstore.uri, "redis://[REDACTED]@127.0.0.1:6399/0", "the URI keeps scheme and host");
    assert.equal(res.json.logs.capacity, 2000);
    const uriLine = res.json.logs.records.find((r: { message: string }) => r.message.startsWith("Connecting to postgres://"));
    assert.equal(uriLine?.message, "Connecting to postgres://[REDACTED]@db.internal:5432/cloud failed");
    assert.ok(res.json.kv.keyCount >= 0);
    await assertNoSecret(res.text, "the diagnostics bundle");

    const noLogs = await t.request("GET", "/api/v1/system/diagnostics?logLines=0", { token: admin });
    assert.deepEqual(noLogs.json.logs.records, []);
    for (const query of ["logLines=-1", "logLines=2001", "logLevel=LOUD"]) {
      const bad = await t.request("GET", `/api/v1/system/diagnostics?${query}`, { token: admin });
      assert.equal(bad.status, 422, query);
      assert.equal(bad.json.error.code, "VALIDATION_ERROR");
    }
    assert.equal((await t.request("GET", "/api/v1/system/diagnostics", { token: await t.tokenFor("OPERATOR") })).status, 403);
  });

  it("shares the redacted diagnostics privately by default: the paste opens with the link and the password only", async () => {
    const res = await t.request("POST", "/api/v1/system/diagnostics/share", { token: admin, body: {} });
    assert.equal(res.status, 200, res.text);
    assert.ok(res.json.url.startsWith(`${paste.url}?`), res.json.url);
    assert.equal(res.json.public, false);
    assert.equal(res.json.expiry, "1d");
    assert.equal(typeof res.json.password, "string");
    assert.ok(res.json.deleteUrl.includes("deletetoken="));
    assert.equal(paste.requests.at(-1)?.requestedWith, "JSONHttpRequest");
    assert.throws(() => paste.open(res.json.url), "without the password the paste does not open");
    const text = paste.open(res.json.url, res.json.password);
    assert.ok(text.includes('"readiness"') && text.includes("--- logs"), text.slice(0, 200));
    assert.ok(text.includes("postgres://[REDACTED]@db.internal:5432/cloud"));
    await assertNoSecret(text, "the shared diagnostics");
    const stored = [...paste.pastes.values()].at(-1)!;
    assert.equal(stored.meta.expire, "1day");
    assert.equal(stored.adata[3], 0, "not burn after reading");
  });

  it("shares the controller log with the options: public, 30d, burn after read", async () => {
    const res = await t.request("POST", "/api/v1/system/logs/share", {
      token: admin,
      body: { logger: "test.share", expiry: "30d", public: true, burnAfterRead: true },
    });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.public, true);
    assert.equal(res.json.password, undefined);
    assert.equal(res.json.burnAfterRead, true);
    assert.ok(Date.parse(res.json.expiresAt) - Date.now() > 29 * 86_400_000);
    const text = paste.open(res.json.url);
    assert.match(text, /WARN {2}share - Connecting to postgres:\/\/\[REDACTED\]@db\.internal:5432\/cloud failed/);
    assert.match(text, /Bearer \[REDACTED\]/);
    assert.equal(text.trim().split("\n").length, 2, "only the test.share records");
    await assertNoSecret(text, "the shared log");
    const stored = [...paste.pastes.values()].at(-1)!;
    assert.equal(stored.meta.expire, "1month");
    assert.equal(stored.adata[3], 1);

    const never = await t.request("POST", "/api/v1/system/logs/share", { token: admin, body: { expiry: "never", public: true } });
    assert.equal(never.json.expiresAt, null);
    assert.equal([...paste.pastes.values()].at(-1)!.meta.expire, "never");
  });

  it("shares a redacted crash report, 404 for an unknown crash", async () => {
    const res = await t.request("POST", `/api/v1/crashes/${crashId}/share`, { token: admin, body: { expiry: "1h", public: true } });
    assert.equal(res.status, 200, res.text);
    const text = paste.open(res.json.url);
    assert.ok(text.includes('"instanceId": "lobby-1"') && text.includes("boom"), text);
    assert.ok(text.includes("redis://[REDACTED]@cache:6379"));
    await assertNoSecret(text, "the shared crash");
    assert.equal([...paste.pastes.values()].at(-1)!.meta.expire, "1hour");
    const missing = await t.request("POST", "/api/v1/crashes/000000000000000000000000/share", { token: admin, body: {} });
    assert.equal(missing.status, 404, missing.text);
  });

  it("refuses bad share options and roles without share.invoke, changing nothing", async () => {
    const before = paste.pastes.size;
    for (const body of [{ expiry: "2d" }, { public: "yes" }, { surprise: 1 }]) {
      const res = await t.request("POST", "/api/v1/system/logs/share", { token: admin, body });
      assert.equal(res.status, 422, JSON.stringify(body));
      assert.equal(res.json.error.code, "VALIDATION_ERROR");
    }
    const operator = await t.tokenFor("OPERATOR");
    for (const path of ["/api/v1/system/logs/share", "/api/v1/system/diagnostics/share", `/api/v1/crashes/${crashId}/share`]) {
      assert.equal((await t.request("POST", path, { token: operator, body: {} })).status, 403, path);
    }
    assert.equal(paste.pastes.size, before);
  });

  it("answers 502 PASTE_UPSTREAM_ERROR when the paste service fails, and counts every attempt", async () => {
    paste.failWith = 503;
    try {
      const res = await t.request("POST", "/api/v1/system/logs/share", { token: admin, body: {} });
      assert.equal(res.status, 502, res.text);
      assert.equal(res.json.error.code, "PASTE_UPSTREAM_ERROR");
    } finally {
      paste.failWith = null;
    }
    const metrics = await t.metrics.render();
    assert.match(metrics, /cloud_share_attempts_total\{kind="logs",outcome="error"\} 1/);
    assert.match(metrics, /cloud_share_attempts_total\{kind="logs",outcome="success"\} 2/);
    assert.match(metrics, /cloud_share_attempts_total\{kind="diagnostics",outcome="success"\} 1/);
    assert.match(metrics, /cloud_share_upstream_errors_total\{status="503"\} 1/);
    assert.match(metrics, /cloud_share_upload_bytes_count [1-9]/);
  });
});

describe("sharing switched off", () => {
  let t: TestApp;
  let paste: PrivateBinServer;
  before(async () => {
    paste = await startPrivateBinServer();
    t = await startTestApp({ config: { share: { enabled: false, serviceUrl: paste.url } } });
  });
  after(async () => {
    await t.close();
    await paste.close();
  });

  it("answers 409 SHARE_DISABLED on every share route and uploads nothing", async () => {
    const admin = await t.tokenFor("ADMIN");
    const crash = await t.crashes.record({ instanceId: "a-1", group: "a", nodeId: "n", exitCode: 1, classification: "EXCEPTION", logTail: [], uptimeMs: 1 });
    for (const path of ["/api/v1/system/logs/share", "/api/v1/system/diagnostics/share", `/api/v1/crashes/${crash.id}/share`]) {
      const res = await t.request("POST", path, { token: admin, body: {} });
      assert.equal(res.status, 409, `${path}: ${res.text}`);
      assert.deepEqual(res.json.error, { code: "SHARE_DISABLED", message: "Sharing is disabled (share.enabled is false)", status: 409 });
    }
    assert.equal(paste.requests.length, 0);
  });
});
