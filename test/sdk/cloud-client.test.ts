// CloudClient, PlayerManager / CloudPlayer, TransferResult, the plugin-side event bus and the event
// stream (ticket, SSE, reconnect with lastSequence, RESYNC_REQUIRED) against a real HTTP server
// speaking the spec's plugin routes.
import assert from "node:assert/strict";
import { after, beforeEach, describe, it } from "node:test";
import {
  connectToCloud,
  InvalidArgumentError,
  PluginEventBus,
  SseParser,
  TransferResult,
  type CloudEvent,
  type CloudPlugin,
  type Transfer,
} from "../../src/sdk/index.js";
import { eventually } from "../support/wait.js";
import { startSpecServer, type SpecServer } from "./spec-server.js";

const STEVE = "5627dd98-e6be-3c21-b8a8-e92344183641";
const ALEX = "0b3f4a5c-2d6e-3f70-8a91-b2c3d4e5f607";

describe("plugin SDK objects", { timeout: 60_000 }, () => {
  let server: SpecServer;
  const servers: SpecServer[] = [];
  const plugins: CloudPlugin[] = [];
  const connect = (overrides: Parameters<typeof connectToCloud>[0] = {}) => {
    const plugin = connectToCloud({
      env: { CLOUD_CONTROLLER_URL: server.url, CLOUD_WORKLOAD_TOKEN: "token-0", CLOUD_INSTANCE_ID: "proxy-1", CLOUD_GROUP: "proxy" },
      eventStream: { reconnectDelayMsMin: 20, reconnectDelayMsMax: 200 },
      ...overrides,
    });
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

  it("maps transferPlayer to transfer-to-group and transferPlayerTo to transfer; refusals are failed results with the reason", async () => {
    const plugin = connect();
    server.handle("POST /api/plugin/transfer-to-group", (req) => {
      const body = req.body as { playerUuid: string; group: string };
      if (body.group === "empty") return { status: 409, body: { error: { code: "CONFLICT", message: "Group empty has no RUNNING instance", status: 409 } } };
      return { status: 200, body: { playerUuid: body.playerUuid, targetInstanceId: "lobby-2" } };
    });
    server.handle("POST /api/plugin/transfer", (req) => {
      const body = req.body as { playerUuid: string; targetInstanceId: string };
      if (body.targetInstanceId === "gone") return { status: 404, body: { error: { code: "NOT_FOUND", message: "Instance gone not found", status: 404 } } };
      return { status: 200, body: {} };
    });
    assert.deepEqual(await plugin.client.transferPlayer(STEVE, "lobby"), TransferResult.success("lobby-2"));
    assert.deepEqual(await plugin.client.transferPlayer(STEVE, "empty"), TransferResult.failure("CONFLICT: Group empty has no RUNNING instance"));
    assert.deepEqual(await plugin.client.transferPlayerTo(STEVE, "lobby-3"), TransferResult.success("lobby-3"));
    const refused = await plugin.client.transferPlayerTo(STEVE, "gone");
    assert.equal(refused.success, false);
    assert.equal(refused.targetInstanceId, null);
    assert.equal(refused.failureReason, "NOT_FOUND: Instance gone not found");
    const bodies = server.requests.filter((r) => r.path.startsWith("/api/plugin/transfer")).map((r) => [r.path, r.body]);
    assert.deepEqual(bodies, [
      ["/api/plugin/transfer-to-group", { playerUuid: STEVE, group: "lobby" }],
      ["/api/plugin/transfer-to-group", { playerUuid: STEVE, group: "empty" }],
      ["/api/plugin/transfer", { playerUuid: STEVE, targetInstanceId: "lobby-3" }],
      ["/api/plugin/transfer", { playerUuid: STEVE, targetInstanceId: "gone" }],
    ]);
  });

  it("reads the 202 Transfer (target and id); transfers for this instance arrive as frames, once per id, and their outcome as a TransferResult", async () => {
    const plugin = connect();
    const transfer: Transfer = {
      id: "7d1f0c1e-0000-4000-8000-000000000001",
      playerUuid: STEVE,
      playerName: "Steve",
      fromInstanceId: "lobby-1",
      targetInstanceId: "game-2",
      targetGroup: "game",
      holderInstanceId: "proxy-1",
      requestedBy: "proxy-1",
      requestedAt: new Date().toISOString(),
      state: "PENDING",
      failureReason: null,
    };
    server.handle("POST /api/plugin/transfer-to-group", () => ({ status: 202, body: transfer }));
    const queued = await plugin.client.transferPlayer(STEVE, "game");
    assert.deepEqual(queued, TransferResult.success("game-2", transfer.id));
    const received: Transfer[] = [];
    const outcomes: [string, TransferResult][] = [];
    plugin.transfers.onTransfer((t) => void received.push(t));
    plugin.transfers.onTransfer(() => {
      throw new Error("handler bug");
    });
    plugin.transfers.onOutcome((t, result) => void outcomes.push([t.id, result]));
    plugin.eventStream.start();
    await eventually(() => plugin.eventStream.connected, "the stream to connect", 10_000);
    const outcome = plugin.transfers.outcomeOf(transfer.id);
    server.sendFrame("transfer", transfer);
    server.sendFrame("transfer", transfer);
    server.sendFrame("transfer", { bogus: true });
    server.sendFrame("transfer-completed", { ...transfer, state: "COMPLETED" });
    assert.deepEqual(await outcome, TransferResult.success("game-2", transfer.id));
    const failed = { ...transfer, id: "7d1f0c1e-0000-4000-8000-000000000002", state: "FAILED", failureReason: "TARGET_GONE" };
    server.sendFrame("transfer-failed", failed);
    server.sendFrame("transfer-failed", failed);
    await eventually(() => outcomes.length === 2, "two outcomes", 10_000);
    assert.deepEqual(received, [transfer], "each transfer id is handed out once");
    assert.deepEqual(outcomes, [
      [transfer.id, TransferResult.success("game-2", transfer.id)],
      [failed.id, TransferResult.failure("TARGET_GONE", failed.id)],
    ]);
    // A resend after the outcome (a reconnect) is not carried out again; a known outcome answers at once.
    server.sendFrame("transfer", transfer);
    assert.deepEqual(await plugin.transfers.outcomeOf(failed.id), TransferResult.failure("TARGET_GONE", failed.id));
    assert.deepEqual(await plugin.transfers.outcomeOf("never", 50), TransferResult.failure("NO_OUTCOME", "never"));
    assert.equal(received.length, 1);
    assert.equal(plugin.eventStream.lastSequence, null, "transfer frames are not journal events: no sequence");
  });

  it("fetchInstance filters the instances list and throws invalid-argument when absent; markStopping and reportCrash send nothing", async () => {
    const plugin = connect();
    assert.equal((await plugin.client.fetchInstance("lobby-1")).playerCount, 1);
    await assert.rejects(plugin.client.fetchInstance("nope"), (error: unknown) => error instanceof InvalidArgumentError && /nope/.test(error.message));
    const before = server.requests.length;
    await plugin.client.markStopping();
    await plugin.client.reportCrash(1, ["boom"]);
    assert.equal(server.requests.length, before);
    assert.equal(plugin.client.instanceId(), "proxy-1");
    assert.equal(plugin.client.group(), "proxy");
    assert.throws(() => plugin.client.publishEvent("NOT_CUSTOM", {}), InvalidArgumentError);
  });

  it("PlayerManager loads the network's players, finds them by UUID or name, and CloudPlayer transfers through the client", async () => {
    const plugin = connect();
    server.handle("GET /api/plugin/players", () => ({
      status: 200,
      body: [
        {
          uuid: STEVE.toUpperCase(),
          name: "Steve",
          instanceId: "lobby-1",
          group: "lobby",
          proxyInstanceId: "proxy-1",
          connectedAt: "2025-01-01T00:00:00.000Z",
        },
        { uuid: ALEX, name: "Alex", instanceId: "game-1", group: "game", proxyInstanceId: null, connectedAt: null },
      ],
    }));
    server.handle("POST /api/plugin/transfer-to-group", () => ({ status: 200, body: { targetInstanceId: "game-2" } }));
    assert.equal(plugin.players.onlineCount(), 0);
    await plugin.players.refresh();
    assert.equal(plugin.players.onlineCount(), 2);
    const steve = plugin.players.getPlayer("steve");
    assert.ok(steve);
    assert.equal(steve.uniqueId(), STEVE);
    assert.equal(plugin.players.getPlayer(STEVE.toUpperCase())?.name(), "Steve");
    assert.equal(steve.currentInstanceId(), "lobby-1");
    assert.equal(steve.currentGroup(), "lobby");
    assert.deepEqual(steve.toView(), {
      uuid: STEVE,
      name: "Steve",
      instanceId: "lobby-1",
      group: "lobby",
      proxyInstanceId: "proxy-1",
      connectedAt: "2025-01-01T00:00:00.000Z",
    });
    assert.ok(Object.isFrozen(steve.toView()));
    assert.equal(await steve.transfer("game"), true);
    server.handle("POST /api/plugin/transfer", () => ({ status: 404, body: { error: { code: "NOT_FOUND", message: "no", status: 404 } } }));
    assert.equal(await steve.transferTo("nowhere"), false);
    assert.equal(steve.sendMessage("hi"), false, "no connections supplied: not delivered");
    const delivered: string[] = [];
    plugin.players.setConnections({ sendMessage: (uuid, text) => (delivered.push(`${uuid}:${text}`), true), kick: () => true });
    assert.equal(plugin.players.getPlayer("Steve")?.sendMessage("hello"), true);
    assert.deepEqual(delivered, [`${STEVE}:hello`]);
    assert.equal(plugin.players.getPlayer("nobody"), undefined);
  });

  it("the event stream delivers events in order to typed, custom, filtered and catch-all subscribers; a throwing handler is isolated", async () => {
    const warnings: string[] = [];
    const plugin = connect({ logger: { info: () => {}, warn: (m) => warnings.push(m) } });
    const typed: string[] = [];
    const custom: CloudEvent[] = [];
    const filtered: string[] = [];
    const all: string[] = [];
    plugin.events.subscribe("PLAYER_CONNECTED", (e) => typed.push(String(e.data.name)));
    plugin.events.subscribe("PLAYER_CONNECTED", () => {
      throw new Error("handler bug");
    });
    plugin.events.subscribeByType("sim:hello", (e) => custom.push(e));
    plugin.events
      .on("PLAYER_CONNECTED")
      .field("group", "game")
      .where((e) => String(e.data.name).startsWith("A"))
      .subscribe((e) => filtered.push(String(e.data.name)));
    const handle = plugin.events.subscribeAll((e) => all.push(e.type));
    plugin.eventStream.start();
    await eventually(() => plugin.eventStream.connected, "the stream to connect", 10_000);
    server.publish({ type: "PLAYER_CONNECTED", data: { uuid: STEVE, name: "Steve", instanceId: "lobby-1", group: "lobby" } });
    server.publish({ type: "PLAYER_CONNECTED", data: { uuid: ALEX, name: "Alex", instanceId: "game-1", group: "game" } });
    server.publish({ type: "sim:hello", data: { n: 1 }, source: "lobby-1" });
    await eventually(() => all.length === 3, "three events", 10_000);
    assert.deepEqual(typed, ["Steve", "Alex"]);
    assert.deepEqual(filtered, ["Alex"]);
    assert.deepEqual(all, ["PLAYER_CONNECTED", "PLAYER_CONNECTED", "sim:hello"]);
    assert.equal(custom.length, 1);
    assert.equal(custom[0].source, "lobby-1");
    assert.deepEqual(custom[0].data, { n: 1 });
    assert.equal(custom[0].sequence, 3);
    assert.equal(warnings.filter((w) => w.includes("handler bug")).length, 2);
    // Player events keep the PlayerManager current.
    assert.equal(plugin.players.getPlayer("Alex")?.currentInstanceId(), "game-1");
    server.publish({ type: "PLAYER_DISCONNECTED", data: { uuid: ALEX, name: "Alex", instanceId: "game-1", group: "game" } });
    await eventually(() => plugin.players.getPlayer("Alex") === undefined, "Alex gone from the view", 10_000);
    handle.unsubscribe();
    server.publish({ type: "sim:hello", data: { n: 2 } });
    await eventually(() => custom.length === 2, "the second custom event", 10_000);
    assert.equal(all.length, 4, "an unsubscribed handler gets nothing more");
    assert.equal(plugin.eventStream.lastSequence, 5);
  });

  it("reconnects with a fresh ticket and lastSequence after the connection drops: nothing lost, nothing twice", async () => {
    const plugin = connect();
    const seen: number[] = [];
    plugin.events.subscribeAll((e) => seen.push(e.sequence));
    plugin.eventStream.start();
    await eventually(() => plugin.eventStream.connected, "the stream to connect", 10_000);
    server.publish({ type: "sim:a", data: {} });
    await eventually(() => seen.length === 1, "the first event", 10_000);
    server.dropStreams();
    // Published while the client is away: replayed on reconnect.
    server.publish({ type: "sim:b", data: {} });
    server.publish({ type: "sim:c", data: {} });
    await eventually(
      () => plugin.eventStream.connectCount === 2 && seen.length === 3,
      () => `the replay (seen ${seen.join(",")})`,
      10_000,
    );
    server.publish({ type: "sim:d", data: {} });
    await eventually(() => seen.length === 4, "the live event after reconnecting", 10_000);
    assert.deepEqual(seen, [1, 2, 3, 4]);
    const streamCalls = server.requests.filter((r) => r.path === "/api/v1/events/stream");
    assert.equal(streamCalls.length, 2);
    assert.equal(streamCalls[0].query.get("lastSequence"), null, "the first connection asks for new events only");
    assert.equal(streamCalls[1].query.get("lastSequence"), "1");
    assert.notEqual(streamCalls[0].query.get("ticket"), streamCalls[1].query.get("ticket"), "one ticket per connection");
    const tickets = server.requests.filter((r) => r.path === "/api/plugin/events/ticket");
    assert.ok(tickets.every((r) => r.headers["x-cloud-sequence"] === undefined && r.headers.authorization === "Bearer token-0"));
  });

  it("retries a refused ticket (503) and a stream that answers Unauthorized, and connects once a ticket is good", async () => {
    const plugin = connect();
    const answers: ("refuse" | "bogus" | "issue")[] = ["refuse", "bogus"];
    const issue = server.ticketHandler();
    server.handle("POST /api/plugin/events/ticket", (req) => {
      const next = answers.shift() ?? "issue";
      if (next === "refuse") return { status: 503, body: { error: { code: "SERVICE_UNAVAILABLE", message: "no stream", status: 503 } } };
      if (next === "bogus") return { status: 200, body: { ticket: "never-issued" } };
      return issue(req);
    });
    plugin.eventStream.start();
    await eventually(() => plugin.eventStream.connected, "the stream to connect after two failures", 10_000);
    assert.equal(server.requests.filter((r) => r.path === "/api/plugin/events/ticket").length, 3);
    assert.equal(server.requests.filter((r) => r.path === "/api/v1/events/stream").length, 2, "the refused ticket opened no stream");
  });

  it("RESYNC_REQUIRED reaches the bus and reloads the players over REST", async () => {
    const plugin = connect();
    const resyncs: CloudEvent[] = [];
    plugin.events.subscribe("RESYNC_REQUIRED", (e) => resyncs.push(e));
    server.handle("GET /api/plugin/players", () => ({ status: 200, body: [{ uuid: STEVE, name: "Steve", instanceId: "lobby-1", group: "lobby" }] }));
    plugin.eventStream.start();
    await eventually(() => plugin.eventStream.connected, "connected", 10_000);
    server.publish({ type: "sim:a", data: {} });
    await eventually(() => plugin.eventStream.lastSequence === 1, "the first event", 10_000);
    server.publish({ type: "sim:b", data: {} });
    server.publish({ type: "sim:c", data: {} });
    server.forgetBefore(3);
    server.dropStreams();
    await eventually(() => resyncs.length === 1, "RESYNC_REQUIRED", 10_000);
    assert.equal(resyncs[0].data.earliestSequence, 3);
    await eventually(() => plugin.players.onlineCount() === 1, "the players reloaded", 10_000);
    assert.equal(plugin.eventStream.lastSequence, 3, "resumes from the latest sequence the resync named");
  });

  it("parses SSE frames split anywhere, with comments, CRLF and multi-line data; the bus refuses publishing without a client", () => {
    const parser = new SseParser();
    const text = ': keep-alive\r\n\r\nid: 7\r\nevent: message\r\ndata: {"a":\r\ndata: 1}\r\n\r\nevent: connected\ndata: {}\n\n';
    const frames = [];
    for (const char of text) frames.push(...parser.push(char));
    assert.deepEqual(frames, [
      { event: "message", data: '{"a":\n1}', id: "7" },
      { event: "connected", data: "{}", id: null },
    ]);
    assert.throws(() => new PluginEventBus(null).publish("a:b"), /no client/);
  });
});
