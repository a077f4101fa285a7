/**
 * The plugin event stream's keep-alive reaches a plugin through the daemon's relay while the
 * cluster is busy with events the plugin's stream skips (NODE_STATUS every few seconds on a real
 * network). The stream promises a comment after each keep-alive period without a write; the SDK
 * reconnects after three periods of silence. A real controller (its keep-alive shortened to
 * 400 ms), a real relay in front of it, and a plugin stream opened through the relay.
 */
import assert from "node:assert/strict";
import { request as httpRequest, type IncomingMessage } from "node:http";
import { after, before, describe, it } from "node:test";
import { PluginRelay } from "../../src/daemon/plugin-relay.js";
import { EventTypes } from "../../src/events/event-types.js";
import { PluginEventBus } from "../../src/sdk/plugin/event-bus.js";
import { PluginEventStream } from "../../src/sdk/plugin/event-stream.js";
import { PluginTransport } from "../../src/sdk/plugin/transport.js";
import { startTestApp, type TestApp } from "../support/http-app.js";
import { eventually } from "../support/wait.js";

const KEEP_ALIVE_MS = 400;

describe("plugin event stream keep-alive through the relay", () => {
  let t: TestApp;
  let relay: PluginRelay;
  let token: string;
  let publisher: NodeJS.Timeout | undefined;

  before(async () => {
    t = await startTestApp({ eventStreamTuning: { keepAliveMs: KEEP_ALIVE_MS } });
    await t.groups.create({ name: "lobby", platform: "paper" });
    await t.nodes.upsert("n1", { host: "127.0.0.1" });
    await t.instances.save({
      id: "lobby-1",
      group: "lobby",
      node: "n1",
      port: 30000,
      memoryMb: 512,
      state: "RUNNING",
      playerCount: 0,
      startedAt: null,
      deploymentRevision: 1,
    });
    token = t.credentials.issueWorkloadToken({ instanceId: "lobby-1", group: "lobby", node: "n1" }).token;
    relay = new PluginRelay({ port: 0, waitMs: 5_000, waitingRequestsMax: 10, replayBodyBytesMax: 1024 * 1024 });
    await relay.start();
    relay.sessionOpened(t.baseUrl);
    // The network's node status, every quarter of a keep-alive period: the plugin stream skips it.
    publisher = setInterval(
      () =>
        t.events.publish(EventTypes.NODE_STATUS, { nodeId: "n1", cpuUsage: 0.1, usedMemoryMb: 1, totalMemoryMb: 2, lastHeartbeatAt: new Date().toISOString() }),
      KEEP_ALIVE_MS / 4,
    );
  });
  after(async () => {
    clearInterval(publisher);
    await relay?.close();
    await t?.close();
  });

  it("comments arrive through the relay while skipped events keep coming", async () => {
    const ticket = await fetch(`${relay.url}/api/plugin/events/ticket`, { method: "POST", headers: { authorization: `Bearer ${token}` } });
    assert.equal(ticket.status, 200, await ticket.clone().text());
    const { ticket: value } = (await ticket.json()) as { ticket: string };
    const comments: number[] = [];
    let text = "";
    const response = await new Promise<IncomingMessage>((resolve, reject) => {
      const req = httpRequest(`${relay.url}/api/v1/events/stream?ticket=${value}`, { agent: false }, resolve);
      req.on("error", reject);
      req.end();
    });
    try {
      assert.equal(response.statusCode, 200);
      response.setEncoding("utf8");
      response.on("data", (chunk: string) => {
        text += chunk;
        for (let at = text.indexOf(": keep-alive\n\n"); at >= 0; at = text.indexOf(": keep-alive\n\n")) {
          comments.push(Date.now());
          text = text.slice(at + 1);
        }
      });
      await eventually(
        () => comments.length >= 3,
        () => `three keep-alive comments through the relay (got ${comments.length})`,
        20_000,
      );
      assert.ok(!text.includes("NODE_STATUS"), "the skipped events never reached the plugin");
    } finally {
      response.destroy();
    }
  });

  it("the SDK's stream stays connected: no reconnect for silence", async () => {
    const warnings: string[] = [];
    const logger = { info: () => undefined, warn: (message: string) => warnings.push(message) };
    const transport = new PluginTransport({ controllerUrl: relay.url!, token, logger });
    const stream = new PluginEventStream(transport, new PluginEventBus(null, logger), { idleTimeoutMs: KEEP_ALIVE_MS * 3, logger });
    stream.start();
    try {
      await stream.whenConnected();
      // Five idle timeouts' worth of skipped events: a stream without keep-alives would reconnect.
      await new Promise((resolve) => setTimeout(resolve, KEEP_ALIVE_MS * 3 * 5));
      assert.equal(stream.connectCount, 1, `one connection, no reconnect (warnings: ${warnings.join(" | ")})`);
      assert.ok(!warnings.some((w) => w.includes("nothing received")), warnings.join(" | "));
    } finally {
      await stream.stop();
      transport.close();
    }
  });
});
