// A lost player registry heals from the plugins: the SDK remembers the registry epoch of its event
// stream's connected frame, and when a later connected frame (or a registry-epoch frame) names
// another one, it reports every player it holds again with player-join — through the client rules
// (sequence numbers, retries), a few at a time. The first connection and an unchanged epoch report
// nothing. Against a real HTTP server speaking the plugin routes (spec-server.ts).
import assert from "node:assert/strict";
import { after, beforeEach, describe, it } from "node:test";
import { connectToCloud, rejoinsInFlightMax, type CloudPlugin } from "../../src/sdk/index.js";
import { eventually } from "../support/wait.js";
import { startSpecServer, type RecordedRequest, type SpecServer } from "./spec-server.js";

const uuidOf = (i: number) => `00000000-0000-4000-8000-${String(i).padStart(12, "0")}`;
const quiet = { info: () => {}, warn: () => {} };

describe("plugin SDK: re-reporting players after the registry was lost", { timeout: 60_000 }, () => {
  let server: SpecServer;
  const servers: SpecServer[] = [];
  const plugins: CloudPlugin[] = [];
  const connect = (kind: "server" | "proxy" = "server") => {
    const plugin = connectToCloud({
      env: {},
      controllerUrl: server.url,
      token: "token-0",
      instanceId: kind === "proxy" ? "proxy-1" : "lobby-1",
      group: kind === "proxy" ? "proxy" : "lobby",
      kind,
      logger: quiet,
      eventStream: { reconnectDelayMsMin: 20, reconnectDelayMsMax: 50 },
    });
    plugins.push(plugin);
    return plugin;
  };
  const joins = (from = 0): RecordedRequest[] => server.requests.slice(from).filter((r) => r.method === "POST" && r.path === "/api/plugin/player-join");
  /** Drops the stream and waits for the next connected frame. */
  const reconnect = async (plugin: CloudPlugin) => {
    const before = plugin.eventStream.connectCount;
    server.dropStreams();
    await eventually(() => plugin.eventStream.connectCount > before && plugin.eventStream.connected, "reconnected", 10_000);
  };
  const settle = () => new Promise((resolve) => setTimeout(resolve, 300));

  beforeEach(async () => {
    server = await startSpecServer();
    servers.push(server);
  });
  after(async () => {
    for (const plugin of plugins) await plugin.close();
    for (const s of servers) await s.close();
  });

  it("a changed epoch re-sends a join for each player held here (not those that left); the first and an unchanged epoch send none", async () => {
    server.setRegistryEpoch("epoch-a");
    const plugin = connect();
    for (const [i, name] of [
      [1, "alice"],
      [2, "bob"],
      [3, "carol"],
    ] as const) {
      plugin.players.trackLocalJoin(uuidOf(i), name);
      plugin.client.reportPlayerJoin(uuidOf(i), name);
    }
    plugin.players.trackLocalLeave(uuidOf(2)); // bob moved on
    plugin.eventStream.start();
    await plugin.eventStream.whenConnected();
    assert.equal(plugin.eventStream.registryEpoch, "epoch-a");
    await eventually(() => joins().length === 3, "the three original joins", 10_000);
    await settle();
    assert.equal(joins().length, 3, "the first connection re-reports nothing");

    await reconnect(plugin);
    await settle();
    assert.equal(joins().length, 3, "the same epoch after a reconnect re-reports nothing");
    assert.equal(plugin.rejoiner.rejoinedCount, 0);

    const mark = server.requests.length;
    server.setRegistryEpoch("epoch-b");
    await reconnect(plugin);
    assert.equal(plugin.eventStream.registryEpoch, "epoch-b");
    const again = await eventually(() => (joins(mark).length === 2 ? joins(mark) : null), "two joins re-sent", 10_000);
    assert.deepEqual(
      again.map((r) => r.body).sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b))),
      [
        { uuid: uuidOf(1), name: "alice", group: "lobby", rejoin: true },
        { uuid: uuidOf(3), name: "carol", group: "lobby", rejoin: true },
      ],
    );
    const sequences = again.map((r) => Number(r.headers["x-cloud-sequence"]));
    const earlier = joins(0)
      .slice(0, 3)
      .map((r) => Number(r.headers["x-cloud-sequence"]));
    for (const s of sequences) assert.ok(s > Math.max(...earlier), `re-sent joins take new sequence numbers (${s})`);
    assert.equal(new Set(sequences).size, 2);
    await settle();
    assert.equal(joins(mark).length, 2, "each once");
  });

  it("a registry-epoch frame on an open stream re-reports too; a proxy re-reports the players it holds", async () => {
    server.setRegistryEpoch("epoch-a");
    const proxy = connect("proxy");
    proxy.players.trackLocalJoin(uuidOf(7), "dave", "proxy-1");
    proxy.eventStream.start();
    await proxy.eventStream.whenConnected();
    const mark = server.requests.length;
    server.sendFrame("registry-epoch", { registryEpoch: "epoch-a" });
    await settle();
    assert.equal(joins(mark).length, 0, "the epoch it already has");
    server.sendFrame("registry-epoch", { registryEpoch: "epoch-c" });
    const [join] = await eventually(() => (joins(mark).length === 1 ? joins(mark) : null), "dave re-sent", 10_000);
    assert.deepEqual(join.body, { uuid: uuidOf(7), name: "dave", group: "proxy", rejoin: true });
    assert.equal(proxy.eventStream.connectCount, 1, "no reconnect was needed");
  });

  it("re-reports a full server a few at a time, retrying a 503 with the same sequence number", async () => {
    server.setRegistryEpoch("epoch-a");
    const plugin = connect();
    const players = 20;
    for (let i = 1; i <= players; i++) plugin.players.trackLocalJoin(uuidOf(i), `p${i}`);
    plugin.eventStream.start();
    await plugin.eventStream.whenConnected();

    let inFlight = 0;
    let most = 0;
    let failedOnce = false;
    server.handle("POST /api/plugin/player-join", async (req) => {
      inFlight += 1;
      most = Math.max(most, inFlight);
      await new Promise((resolve) => setTimeout(resolve, 40));
      inFlight -= 1;
      if (!failedOnce && (req.body as { uuid: string }).uuid === uuidOf(5)) {
        failedOnce = true;
        return { status: 503, body: { error: { code: "SERVICE_UNAVAILABLE", message: "relay: no controller", status: 503 } } };
      }
      return { status: 200, body: { instanceId: "lobby-1", playerCount: 1 } };
    });
    const mark = server.requests.length;
    server.setRegistryEpoch("epoch-b");
    await reconnect(plugin);
    await eventually(() => new Set(joins(mark).map((r) => (r.body as { uuid: string }).uuid)).size === players, "every player re-sent", 20_000);
    await plugin.rejoiner.idle();
    assert.ok(most <= rejoinsInFlightMax, `at most ${rejoinsInFlightMax} in flight, saw ${most}`);
    assert.ok(most > 1, `several at once, saw ${most}`);
    const fifth = joins(mark).filter((r) => (r.body as { uuid: string }).uuid === uuidOf(5));
    assert.equal(fifth.length, 2, "the 503 was retried");
    assert.equal(fifth[0].headers["x-cloud-sequence"], fifth[1].headers["x-cloud-sequence"], "with its number (the outcome was unknown)");
    assert.equal(joins(mark).length, players + 1);
  });
});
