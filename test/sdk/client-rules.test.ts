// The client rules of spec document 3 against a real HTTP server speaking the plugin routes: one
// single-flight refresh on 401 and one retry, the 10 s timeout (shortened here), X-Cloud-Sequence on
// mutating POSTs only, a traceparent per request, fire-and-forget reports with bounded retries.
import assert from "node:assert/strict";
import { after, beforeEach, describe, it } from "node:test";
import { CloudApiError, connectToCloud, PluginTransport, sequencedInFlightMax, tokenExpiryOf, type CloudPlugin } from "../../src/sdk/index.js";
import { eventually } from "../support/wait.js";
import { startSpecServer, type SpecServer } from "./spec-server.js";

const TRACEPARENT = /^00-[0-9a-f]{32}-[0-9a-f]{16}-00$/;

describe("plugin SDK client rules", { timeout: 60_000 }, () => {
  // Each test gets its own server, so scripted answers and tokens never leak between tests.
  let server: SpecServer;
  const servers: SpecServer[] = [];
  const plugins: CloudPlugin[] = [];
  const connect = (overrides: Parameters<typeof connectToCloud>[0] = {}) => {
    const plugin = connectToCloud({ env: {}, controllerUrl: server.url, token: "token-0", instanceId: "lobby-1", group: "lobby", ...overrides });
    plugins.push(plugin);
    return plugin;
  };

  beforeEach(async () => {
    server = await startSpecServer();
    servers.push(server);
  });
  after(async () => {
    for (const plugin of plugins) await plugin.close();
    for (const s of servers) await s.close();
  });

  it("refreshes once for many concurrent 401s (single flight), retries each request once with the new token", async () => {
    const warnings: string[] = [];
    const plugin = connect({ logger: { info: () => {}, warn: (m) => warnings.push(m) } });
    const refreshedBefore = server.refreshCount();
    // The token expired: every request of the burst gets a 401 first; only the refresh route still takes it.
    server.expire("token-0");
    server.handle("POST /api/plugin/auth/refresh", (req) => {
      assert.equal(req.headers.authorization, "Bearer token-0");
      server.validTokens.add("token-fresh");
      return { status: 200, body: { token: "token-fresh", expiresAt: new Date().toISOString() }, delayMs: 150 };
    });
    const started = server.requests.length;
    const results = await Promise.all(Array.from({ length: 8 }, () => plugin.client.fetchGroups()));
    assert.equal(results.length, 8);
    for (const groups of results) assert.equal(groups[0].name, "lobby");
    const sent = server.requests.slice(started);
    assert.equal(sent.filter((r) => r.path === "/api/plugin/auth/refresh").length, 1, "one refresh for the whole burst");
    const groupCalls = sent.filter((r) => r.path === "/api/plugin/groups");
    assert.equal(groupCalls.length, 16, "each request sent twice: once with the old token, once with the new");
    assert.equal(groupCalls.filter((r) => r.headers.authorization === "Bearer token-0").length, 8);
    assert.equal(groupCalls.filter((r) => r.headers.authorization === "Bearer token-fresh").length, 8);
    assert.equal(plugin.transport.token, "token-fresh");
    assert.equal(plugin.transport.stats.refreshes, 1);
    assert.equal(server.refreshCount(), refreshedBefore, "the scripted refresh answered, not the default");
    assert.deepEqual(warnings, []);
  });

  it("gives up after one retry: a 401 after the refresh fails the call, and a refused refresh fails it with the refresh's error", async () => {
    const plugin = connect();
    server.handle("GET /api/plugin/players", () => ({ status: 401, body: { error: { code: "UNAUTHORIZED", message: "still no", status: 401 } } }));
    server.handle("POST /api/plugin/auth/refresh", () => {
      server.validTokens.add("token-again");
      server.validTokens.delete("token-0");
      return { status: 200, body: { token: "token-again", expiresAt: new Date().toISOString() } };
    });
    const before = server.requests.length;
    await assert.rejects(
      plugin.client.fetchPlayers(),
      (error: unknown) => error instanceof CloudApiError && error.status === 401 && error.code === "UNAUTHORIZED",
    );
    const sent = server.requests.slice(before).map((r) => r.path);
    assert.deepEqual(sent, ["/api/plugin/players", "/api/plugin/auth/refresh", "/api/plugin/players"]);

    server.handle("POST /api/plugin/auth/refresh", () => ({ status: 401, body: { error: { code: "UNAUTHORIZED", message: "token revoked", status: 401 } } }));
    server.expire("token-again");
    const again = server.requests.length;
    await assert.rejects(plugin.client.fetchInstances(), (error: unknown) => error instanceof CloudApiError && error.message === "token revoked");
    assert.deepEqual(
      server.requests.slice(again).map((r) => r.path),
      ["/api/plugin/instances", "/api/plugin/auth/refresh"],
    );
  });

  it("times out a request that gets no answer within the request timeout", async () => {
    const transport = new PluginTransport({ controllerUrl: server.url, token: "token-0", requestTimeoutMs: 300 });
    server.handle("POST /api/plugin/ready", () => ({ status: 200, body: {}, delayMs: 3_000 }));
    const startedMs = Date.now();
    await assert.rejects(
      transport.post("/api/plugin/ready", {}),
      (error: unknown) => error instanceof CloudApiError && error.code === "TIMEOUT" && error.status === 0,
    );
    const tookMs = Date.now() - startedMs;
    assert.ok(tookMs >= 290 && tookMs < 2_500, `timed out after ${tookMs} ms`);
    assert.equal(new PluginTransport({ controllerUrl: server.url, token: "t" }).stats.refreshes, 0);
  });

  it("puts a growing X-Cloud-Sequence on mutating POSTs only, and a new traceparent on every request", async () => {
    const plugin = connect();
    server.handle("POST /api/plugin/ready", () => ({ status: 200, body: { ready: true } }));
    server.handle("POST /api/plugin/transfer", () => ({ status: 200, body: {} }));
    const before = server.requests.length;
    await plugin.client.markReady();
    await plugin.client.transferPlayerTo("5627dd98-e6be-3c21-b8a8-e92344183641", "lobby-2");
    await plugin.client.fetchInstances();
    await plugin.transport.post("/api/plugin/events/ticket");
    plugin.client.publishEvent("sim:hello", { n: 1 });
    await eventually(() => server.requests.slice(before).some((r) => r.path === "/api/plugin/events"), "the published event", 5_000);
    const sent = server.requests.slice(before);
    const sequenced = sent.filter((r) => r.headers["x-cloud-sequence"] !== undefined);
    assert.deepEqual(
      sequenced.map((r) => r.path),
      ["/api/plugin/ready", "/api/plugin/transfer", "/api/plugin/events"],
    );
    const numbers = sequenced.map((r) => Number(r.headers["x-cloud-sequence"]));
    // Counted per process from 1 (the controller counts per start of the instance), one more each time.
    assert.deepEqual(numbers, [1, 2, 3]);
    // A restarted plugin is a new start of the instance (a new workload token): it counts from 1 again.
    const restarted = connect();
    assert.equal(restarted.transport.nextSequence(), 1);
    const traces = sent.map((r) => String(r.headers.traceparent));
    for (const trace of traces) assert.match(trace, TRACEPARENT);
    assert.equal(new Set(traces).size, traces.length, "a new trace per request");
    assert.equal(sent.find((r) => r.path === "/api/plugin/events")?.headers["content-type"], "application/json");
  });

  it("reports are fire-and-forget: the call returns at once, a 5xx or lost connection is sent again (up to 6 attempts), a 4xx is not", async () => {
    const warnings: string[] = [];
    const plugin = connect({ logger: { info: () => {}, warn: (m) => warnings.push(m) } });
    const joinAnswers = [503, 503, 200];
    server.handle("POST /api/plugin/player-join", () => ({ status: joinAnswers.shift() ?? 200, body: {}, delayMs: 50 }));
    server.handle("POST /api/plugin/player-leave", () => ({ status: 404, body: { error: { code: "NOT_FOUND", message: "not here", status: 404 } } }));
    const before = server.requests.length;
    const startedMs = Date.now();
    assert.equal(plugin.client.reportPlayerJoin("5627dd98-e6be-3c21-b8a8-e92344183641", "Steve"), undefined);
    plugin.client.reportPlayerLeave("5627dd98-e6be-3c21-b8a8-e92344183641");
    assert.ok(Date.now() - startedMs < 40, "reports return without waiting for an answer");
    await eventually(() => plugin.transport.stats.reportsInFlight === 0, "reports to settle", 10_000);
    const sent = server.requests.slice(before);
    assert.equal(sent.filter((r) => r.path === "/api/plugin/player-join").length, 3);
    assert.equal(sent.filter((r) => r.path === "/api/plugin/player-leave").length, 1);
    assert.deepEqual(sent.find((r) => r.path === "/api/plugin/player-join")?.body, {
      uuid: "5627dd98-e6be-3c21-b8a8-e92344183641",
      name: "Steve",
      group: "lobby",
    });
    assert.deepEqual(
      warnings.sort(),
      [
        "Plugin API player-join answered 503 (attempt 1/6)",
        "Plugin API player-join answered 503 (attempt 2/6)",
        "Plugin API player-leave answered 404 (attempt 1/6)",
      ].sort(),
    );
  });

  it("expects 200 from GETs and reads a non-JSON or unexpected answer as an error", async () => {
    const plugin = connect();
    server.handle("GET /api/plugin/groups", () => ({ status: 204 }));
    await assert.rejects(
      plugin.client.fetchGroups(),
      (error: unknown) => error instanceof CloudApiError && error.status === 204 && error.code === "UNEXPECTED_STATUS",
    );
    server.handle("GET /api/plugin/groups", () => ({ status: 200, body: { something: "else" } }));
    await assert.rejects(plugin.client.fetchGroups(), (error: unknown) => error instanceof CloudApiError && error.code === "UNEXPECTED_BODY");
    // The controller answers the list routes with a bare JSON array; an object around it is not its answer.
    server.handle("GET /api/plugin/groups", () => ({ status: 200, body: { groups: [{ name: "bedwars", runningInstances: 0, totalPlayers: 0 }] } }));
    await assert.rejects(plugin.client.fetchGroups(), (error: unknown) => error instanceof CloudApiError && error.code === "UNEXPECTED_BODY");
    server.handle("GET /api/plugin/groups", () => ({ status: 200, body: [{ name: "bedwars", runningInstances: 0, totalPlayers: 0 }] }));
    assert.deepEqual(await plugin.client.fetchGroups(), [{ name: "bedwars", runningInstances: 0, totalPlayers: 0 }]);
  });

  it("a report retried after no answer or a 502/503/504 keeps its sequence number (SEQUENCE_REPEATED then counts as done); after a 500 it takes a new one", async () => {
    const warnings: string[] = [];
    const plugin = connect({ logger: { info: () => {}, warn: (m) => warnings.push(m) } });
    const repeated = { status: 409, body: { error: { code: "SEQUENCE_REPEATED", message: "already accepted", status: 409 } } };
    // The first join was carried out but its answer was lost behind a 503; the retry is recognised.
    const joinAnswers = [{ status: 503, body: {} }, repeated];
    server.handle("POST /api/plugin/player-join", () => joinAnswers.shift() ?? { status: 200, body: {} });
    const metricsAnswers = [
      { status: 500, body: {} },
      { status: 200, body: {} },
    ];
    server.handle("POST /api/plugin/metrics", () => metricsAnswers.shift() ?? { status: 200, body: {} });
    const before = server.requests.length;
    plugin.client.reportPlayerJoin("5627dd98-e6be-3c21-b8a8-e92344183641", "Steve");
    await eventually(() => plugin.transport.stats.reportsInFlight === 0, "the join report to settle", 10_000);
    plugin.client.reportMetrics({ tps1m: 20 } as never);
    await eventually(() => plugin.transport.stats.reportsInFlight === 0, "the metrics report to settle", 10_000);
    const numbers = (path: string) =>
      server.requests
        .slice(before)
        .filter((r) => r.path === path)
        .map((r) => Number(r.headers["x-cloud-sequence"]));
    assert.deepEqual(numbers("/api/plugin/player-join"), [1, 1], "the retry after a 503 sends the same number");
    assert.deepEqual(numbers("/api/plugin/metrics"), [2, 3], "the retry after a 500 takes a new number");
    assert.deepEqual(warnings.sort(), ["Plugin API metrics answered 500 (attempt 1/6)", "Plugin API player-join answered 503 (attempt 1/6)"]);
  });

  it("keeps at most sequencedInFlightMax mutating POSTs on the way, numbered in the order they are sent", async () => {
    const plugin = connect();
    let inFlight = 0;
    let most = 0;
    // The requests are held until sequencedInFlightMax of them are on the way at once (the client
    // uses its whole window, whatever the machine's speed), and a while longer: a request beyond the
    // bound would arrive meanwhile and show as a peak above it.
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    server.handle("POST /api/plugin/ready", async () => {
      inFlight += 1;
      most = Math.max(most, inFlight);
      await held;
      inFlight -= 1;
      return { status: 200, body: {} };
    });
    const before = server.requests.length;
    const all = Promise.all(Array.from({ length: 100 }, () => plugin.client.markReady()));
    await eventually(
      () => inFlight >= sequencedInFlightMax,
      () => `${sequencedInFlightMax} POSTs on the way at once (${inFlight} so far)`,
      30_000,
    );
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.ok(most <= sequencedInFlightMax, `at most ${sequencedInFlightMax} at once while they were held (saw ${most})`);
    release();
    await all;
    assert.ok(most <= sequencedInFlightMax, `at most ${sequencedInFlightMax} at once (saw ${most})`);
    const numbers = server.requests.slice(before).map((r) => Number(r.headers["x-cloud-sequence"]));
    assert.deepEqual(
      [...numbers].sort((a, b) => a - b),
      Array.from({ length: 100 }, (_, i) => i + 1),
    );
  });

  it("renews the token ahead of its expiry (expiresAt of the refresh answer, or the exp claim of the first token); the old one is not what requests depend on", async () => {
    const soon = Date.now() + 1_500;
    const claims = Buffer.from(JSON.stringify({ iid: "lobby-1", exp: soon })).toString("base64url");
    const first = `wl.${claims}.sig`;
    assert.equal(tokenExpiryOf(first), soon);
    assert.equal(tokenExpiryOf("token-0"), null);
    server.validTokens.add(first);
    const refreshed: string[] = [];
    server.handle("POST /api/plugin/auth/refresh", (req) => {
      assert.equal(req.headers.authorization, `Bearer ${refreshed.at(-1) ?? first}`, "renewed with the token in use, before it expired");
      const token = `token-renewed-${refreshed.length + 1}`;
      refreshed.push(token);
      server.validTokens.add(token);
      return { status: 200, body: { token, expiresAt: new Date(Date.now() + 1_500).toISOString() } };
    });
    const plugin = connect({ token: first, refreshAheadMs: 1_000 });
    assert.equal(plugin.transport.tokenExpiresAtMs, soon);
    // Halfway through the remaining life (0.75 s) it renews; then again for the new token's expiry.
    await eventually(() => refreshed.length >= 2, "two renewals on the timer", 10_000);
    assert.equal(plugin.transport.token, refreshed.at(-1));
    assert.ok((plugin.transport.tokenExpiresAtMs ?? 0) > soon);
    await plugin.client.fetchGroups();
    assert.equal(
      server.requests.filter((r) => r.path === "/api/plugin/groups" && r.headers.authorization === `Bearer ${first}`).length,
      0,
      "the request went with the renewed token",
    );
    await plugin.close();
    const count = refreshed.length;
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    assert.equal(refreshed.length, count, "a closed plugin renews nothing");
  });

  it("fails a call to a closed port as CONNECTION_FAILED, without a refresh", async () => {
    const transport = new PluginTransport({ controllerUrl: "http://127.0.0.1:1", token: "x" });
    await assert.rejects(
      transport.get("/api/plugin/groups"),
      (error: unknown) => error instanceof CloudApiError && error.code === "CONNECTION_FAILED" && error.status === 0,
    );
    assert.equal(transport.stats.refreshes, 0);
    assert.throws(() => new PluginTransport({ controllerUrl: "ftp://x", token: "x" }), /http or https/);
    assert.throws(() => connectToCloud({ env: {} }), /CLOUD_CONTROLLER_URL/);
  });
});
