// The SDK against the real controller (startTestApp, the composition root) for the plugin routes it
// has today: ready, player-join, player-leave and auth/refresh, all with the workload token.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { CloudApiError, connectToCloud, type CloudPlugin } from "../../src/sdk/index.js";
import { startTestApp, type TestApp } from "../support/http-app.js";
import { eventually } from "../support/wait.js";

const STEVE = "5627dd98-e6be-3c21-b8a8-e92344183641";

describe("plugin SDK against the controller", { timeout: 60_000 }, () => {
  let t: TestApp;
  let plugin: CloudPlugin;
  const warnings: string[] = [];

  before(async () => {
    t = await startTestApp();
    await t.groups.create({ name: "lobby", platform: "simulated" });
    await t.nodes.upsert("node-a", { host: "127.0.0.1" });
    await t.instances.save({
      id: "lobby-1",
      group: "lobby",
      node: "node-a",
      port: 30000,
      memoryMb: 256,
      state: "RUNNING",
      playerCount: 0,
      startedAt: null,
      deploymentRevision: 1,
    });
    const token = t.credentials.issueWorkloadToken({ instanceId: "lobby-1", group: "lobby", node: "node-a" }).token;
    plugin = connectToCloud({
      env: { CLOUD_CONTROLLER_URL: t.baseUrl, CLOUD_WORKLOAD_TOKEN: token, CLOUD_INSTANCE_ID: "lobby-1", CLOUD_GROUP: "lobby" },
      logger: { info: () => {}, warn: (m) => warnings.push(m) },
    });
  });
  after(async () => {
    await plugin?.close();
    await t?.close();
  });

  it("marks the instance ready: with no daemon connected for its node the readiness is not delivered, a 503 the SDK surfaces", async () => {
    // No daemon gateway runs here, so node-a's daemon cannot take mark_instance_ready: the route
    // answers 503 READY_NOT_DELIVERED (report it again) rather than a 200 for a readiness nobody got.
    // A readiness delivered through a real daemon: test/e2e/tracing.test.ts.
    await assert.rejects(
      plugin.client.markReady(),
      (error: unknown) =>
        error instanceof CloudApiError &&
        error.status === 503 &&
        error.code === "READY_NOT_DELIVERED" &&
        /node-a.*lobby-1.*NODE_NOT_CONNECTED/.test(error.message),
    );
  });

  it("reports a player joining and leaving (fire-and-forget); the controller's records follow", async () => {
    plugin.client.reportPlayerJoin(STEVE, "Steve");
    await eventually(async () => (await t.instances.get("lobby-1")).playerCount === 1, "playerCount 1", 15_000);
    plugin.client.reportPlayerLeave(STEVE);
    await eventually(async () => (await t.instances.get("lobby-1")).playerCount === 0, "playerCount 0", 15_000);
    // Leaving twice: the controller answers 404, which is not sent again.
    plugin.client.reportPlayerLeave(STEVE);
    await eventually(() => warnings.some((w) => w === "Plugin API player-leave answered 404 (attempt 1/6)"), "the 404 logged", 15_000);
    await eventually(() => plugin.transport.stats.reportsInFlight === 0, "reports settled", 15_000);
    assert.equal(warnings.filter((w) => w.includes("player-leave")).length, 1);
  });

  it("a token the controller refuses fails after one refresh attempt, with the envelope; the refresh route answers a new workload token", async () => {
    const before = plugin.transport.token;
    // A request with a token the controller does not know: its 401 starts the refresh, which fails too.
    const stranger = connectToCloud({ env: {}, controllerUrl: t.baseUrl, token: "wl.not-a-token.x", instanceId: "lobby-1", group: "lobby" });
    await assert.rejects(
      stranger.client.markReady(),
      (error: unknown) => error instanceof CloudApiError && error.status === 401 && error.code === "UNAUTHORIZED",
    );
    await stranger.close();
    // The refresh route itself, through the transport's single-flight path.
    const answer = await plugin.transport.post<{ token: string; expiresAt: string }>("/api/plugin/auth/refresh");
    assert.match(answer.token, /^wl\./);
    assert.ok(Date.parse(answer.expiresAt) > Date.now());
    assert.equal(plugin.transport.token, before, "a direct call does not replace the token; only the 401 path does");
  });

  it("a transfer of a player who is not online is a failed TransferResult (NOT_FOUND), not a throw", async () => {
    const result = await plugin.client.transferPlayer(STEVE, "lobby");
    assert.equal(result.success, false);
    assert.match(result.failureReason ?? "", /^NOT_FOUND/);
  });
});
