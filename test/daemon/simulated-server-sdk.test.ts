// The simulated server's plugin side, all through the SDK: metrics with a TPS that drops under
// `load`, custom events both ways, transfers asked for on the console and arriving on the event
// stream as `event: transfer` frames (the holder connects the player to the target's port, the
// target reports the join), and the proxy mode. Real child processes against a real HTTP server
// speaking the plugin routes (test/sdk/spec-server.ts); the tick model alone at the end.
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { after, describe, it } from "node:test";
import { simulatedServerScriptPath } from "../../src/daemon/simulated-server/contract.js";
import { TickModel, tpsAt } from "../../src/daemon/simulated-server/tick-model.js";
import type { Transfer } from "../../src/sdk/index.js";
import { startSpecServer, type SpecServer } from "../sdk/spec-server.js";
import { eventually } from "../support/wait.js";
import { SIM_TEST_ENV, freePort, isAlive } from "./runner-harness.js";

const STEVE = "5627dd98-e6be-3c21-b8a8-e92344183641";
const ALEX = "0b3f4a5c-2d6e-3f70-8a91-b2c3d4e5f607";

/** A transfer as the controller sends it on the plugin event stream. */
const transferOf = (fields: Partial<Transfer> & Pick<Transfer, "id" | "targetInstanceId" | "holderInstanceId">): Transfer => ({
  playerUuid: STEVE,
  playerName: "Steve",
  fromInstanceId: null,
  targetGroup: null,
  requestedBy: fields.holderInstanceId,
  requestedAt: new Date().toISOString(),
  state: "PENDING",
  failureReason: null,
  ...fields,
});
const lineWaitMs = 20_000;

const started: ChildProcess[] = [];
const servers: SpecServer[] = [];
after(async () => {
  for (const child of started) if (child.pid !== undefined && isAlive(child.pid)) child.kill("SIGKILL");
  for (const server of servers) await server.close();
  await eventually(() => started.every((child) => child.pid === undefined || !isAlive(child.pid)), "every simulated server to be gone", 5_000);
});

async function startSim(server: SpecServer, env: Record<string, string>) {
  const port = await freePort();
  const child = spawn(process.execPath, [simulatedServerScriptPath()], {
    env: {
      PATH: process.env.PATH ?? "",
      ...SIM_TEST_ENV,
      CLOUD_INSTANCE_ID: "sim-1",
      CLOUD_GROUP: "lobby",
      CLOUD_PORT: String(port),
      CLOUD_CONTROLLER_URL: server.url,
      CLOUD_WORKLOAD_TOKEN: "token-0",
      ...env,
    },
    stdio: ["pipe", "pipe", "pipe"],
  });
  started.push(child);
  const lines: string[] = [];
  let pending = "";
  child.stdout!.on("data", (chunk: Buffer) => {
    pending += chunk.toString();
    const parts = pending.split("\n");
    pending = parts.pop() ?? "";
    lines.push(...parts);
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  return {
    port,
    lines,
    exited,
    send: (line: string) => child.stdin!.write(`${line}\n`),
    waitForLine: (text: string) =>
      eventually(
        () => lines.find((line) => line.includes(text)),
        () => `console line "${text}" (got: ${lines.join(" | ")})`,
        lineWaitMs,
      ),
  };
}

describe("simulated server on the plugin SDK", { timeout: 120_000 }, () => {
  it("reports metrics whose TPS drops under load, publishes and receives custom events, and moves players on transfers", async () => {
    const server = await startSpecServer();
    servers.push(server);
    server.handle("POST /api/plugin/transfer-to-group", () => ({ status: 200, body: { targetInstanceId: "game-1" } }));
    const sim = await startSim(server, { CLOUD_SIM_EVENT_STREAM: "true", CLOUD_SIM_METRICS_INTERVAL_MS: "300" });
    await sim.waitForLine("Reported ready to the controller");
    await sim.waitForLine("Connected to the event stream");
    const metrics = () => server.requests.filter((r) => r.path === "/api/plugin/metrics").map((r) => r.body as Record<string, any>);
    await eventually(() => metrics().length >= 1, "a periodic metrics report", lineWaitMs);
    const idle = metrics()[0];
    assert.deepEqual(Object.keys(idle).sort(), [
      "daemonThreadCount",
      "gcCollections",
      "gcTimeMs",
      "heapCommittedMb",
      "heapMaxMb",
      "heapUsedMb",
      "maxPlayers",
      "msptAvg",
      "playerCount",
      "pluginCount",
      "serverVersion",
      "threadCount",
      "totalChunks",
      "totalEntities",
      "tps15m",
      "tps1m",
      "tps5m",
      "uptimeMs",
      "worldCount",
      "worlds",
    ]);
    assert.equal(idle.tps1m, 20);
    assert.deepEqual(Object.keys(idle.worlds[0]).sort(), ["chunkCount", "entityCount", "environment", "name", "playerCount"]);

    sim.send("players join Steve");
    await sim.waitForLine("Steve[/127.0.0.1] logged in");
    sim.send("load 400");
    await sim.waitForLine("Load set to 400 %");
    const loadedAt = metrics().length;
    await eventually(() => metrics().length >= loadedAt + 3, "metrics under load", lineWaitMs);
    const loaded = metrics().slice(loadedAt);
    assert.ok(
      loaded.every((m) => m.tps1m < 20 && m.msptAvg > idle.msptAvg),
      `TPS drops under load: ${loaded.map((m) => m.tps1m).join(", ")}`,
    );
    for (let i = 1; i < loaded.length; i++) assert.ok(loaded[i].tps1m < loaded[i - 1].tps1m, "and keeps dropping while the load lasts");
    assert.equal(loaded[loaded.length - 1].playerCount, 1);
    assert.ok(server.requests.filter((r) => r.path === "/api/plugin/metrics").every((r) => r.headers["x-cloud-sequence"] !== undefined));

    sim.send('event sim:hello {"from":"console"}');
    await sim.waitForLine("Published event sim:hello");
    await eventually(() => server.requests.find((r) => r.path === "/api/plugin/events"), "the custom event POST", lineWaitMs);
    assert.deepEqual(server.requests.find((r) => r.path === "/api/plugin/events")?.body, { type: "sim:hello", data: { from: "console" } });
    sim.send("event NOT_CUSTOM {}");
    await sim.waitForLine("event type must look like MODULE:ACTION");
    server.publish({ type: "sim:pong", data: { n: 7 }, source: "game-1" });
    await sim.waitForLine('[event] sim:pong from game-1 {"n":7}');

    // A transfer to the group: queued (202, the Transfer), then delivered as `event: transfer` to
    // the holder, sim-1 (Steve joined it directly): it connects Steve to game-1's port and hands him
    // over; game-1 reports the join (which completes the transfer at the controller).
    const game = await startSim(server, { CLOUD_INSTANCE_ID: "game-1", CLOUD_GROUP: "game", CLOUD_SIM_EVENT_STREAM: "false" });
    await game.waitForLine("Reported ready to the controller");
    server.handle("GET /api/plugin/instances", () => ({
      status: 200,
      body: [{ id: "game-1", group: "game", state: "RUNNING", port: game.port, playerCount: 0 }],
    }));
    const queued = transferOf({ id: "t-1", targetInstanceId: "game-1", targetGroup: "game", holderInstanceId: "sim-1", fromInstanceId: "sim-1" });
    server.handle("POST /api/plugin/transfer-to-group", () => ({ status: 202, body: queued }));
    sim.send("players transfer Steve game");
    await sim.waitForLine("Transfer of Steve to group game queued (game-1) as t-1");
    assert.deepEqual(server.requests.find((r) => r.path === "/api/plugin/transfer-to-group")?.body, { playerUuid: STEVE, group: "game" });
    server.sendFrame("transfer", queued);
    await game.waitForLine(`Steve[/127.0.0.1] logged in (uuid ${STEVE}) through sim-1`);
    await sim.waitForLine("Steve left by transfer to game-1");
    const gameJoins = () => server.requests.filter((r) => r.path === "/api/plugin/player-join" && (r.body as { group: string }).group === "game");
    await eventually(() => gameJoins().length === 1, "game-1's join report", lineWaitMs);
    assert.deepEqual(gameJoins()[0].body, { uuid: STEVE, name: "Steve", group: "game" });
    // Delivery is at least once: the same transfer again (a reconnected stream) is not carried out twice.
    server.sendFrame("transfer", queued);
    server.sendFrame("transfer-completed", { ...queued, state: "COMPLETED" });
    await sim.waitForLine("Transfer t-1 of Steve to game-1 completed");
    assert.equal(sim.lines.filter((line) => line.includes("left by transfer")).length, 1);
    assert.equal(gameJoins().length, 1);
    assert.ok(!server.requests.some((r) => r.path === "/api/plugin/player-leave"), "the holder reports no leave: the target's join is the move");
    game.send("list");
    await game.waitForLine("There are 1 of a max of 100 players online: Steve");
    sim.send("list");
    await sim.waitForLine("There are 0 of a max of 100 players online");
    server.sendFrame("transfer-failed", { ...queued, id: "t-2", targetInstanceId: "game-2", state: "FAILED", failureReason: "TARGET_GONE" });
    await sim.waitForLine("Transfer t-2 of Steve to game-2 failed: TARGET_GONE");
    game.send("stop");
    assert.equal(await game.exited, 0);
    sim.send("players send Nobody game-2");
    await sim.waitForLine("Nobody is not online");
    sim.send("stop");
    assert.equal(await sim.exited, 0);
  });

  it("as a proxy holds its players and connects them to the servers transfers name; the backends report joins, not moves or quits", async () => {
    const server = await startSpecServer();
    servers.push(server);
    const proxy = await startSim(server, { CLOUD_SIM_MODE: "proxy", CLOUD_INSTANCE_ID: "proxy-1", CLOUD_GROUP: "proxy" });
    const backend = (id: string) => startSim(server, { CLOUD_INSTANCE_ID: id, CLOUD_GROUP: "game", CLOUD_SIM_EVENT_STREAM: "false" });
    const [game1, game2] = await Promise.all([backend("game-1"), backend("game-2")]);
    // The backends listen before a transfer names them, as RUNNING servers do.
    await Promise.all([game1, game2].map((game) => game.waitForLine("Done (")));
    server.handle("GET /api/plugin/instances", () => ({
      status: 200,
      body: [game1, game2].map((g, i) => ({ id: `game-${i + 1}`, group: "game", state: "RUNNING", port: g.port, playerCount: 0 })),
    }));
    await proxy.waitForLine("Running as a proxy");
    await proxy.waitForLine("Connected to the event stream");
    proxy.send("players join Steve");
    await eventually(() => server.requests.some((r) => r.path === "/api/plugin/player-join"), "the join report", lineWaitMs);
    assert.deepEqual(server.requests.find((r) => r.path === "/api/plugin/player-join")?.body, { uuid: STEVE, name: "Steve", group: "proxy" });
    server.sendFrame(
      "transfer",
      transferOf({ id: "t-alex", playerUuid: ALEX, playerName: "Alex", targetInstanceId: "game-1", holderInstanceId: "proxy-1", fromInstanceId: "lobby-1" }),
    );
    server.sendFrame("transfer", transferOf({ id: "t-1", targetInstanceId: "game-1", holderInstanceId: "proxy-1" }));
    await proxy.waitForLine("Moving Steve to game-1");
    await game1.waitForLine(`Steve[/127.0.0.1] logged in (uuid ${STEVE}) through proxy-1`);
    assert.ok(!proxy.lines.some((line) => line.includes("Alex")), "a transfer of a player the proxy does not hold is not its business");
    proxy.send("list");
    await proxy.waitForLine("There are 1 of a max of 100 players online: Steve");

    // On to game-2: the proxy connects Steve there first, then tells game-1 he moved on.
    server.sendFrame("transfer", transferOf({ id: "t-2", targetInstanceId: "game-2", holderInstanceId: "proxy-1", fromInstanceId: "game-1" }));
    await proxy.waitForLine("Moving Steve to game-2");
    await game2.waitForLine(`Steve[/127.0.0.1] logged in (uuid ${STEVE}) through proxy-1`);
    await game1.waitForLine("Steve moved on to another server");
    // Each server reports on its own: game-2's join report is awaited before the proxy's leave, so the order below is fixed.
    const backendJoins = () => server.requests.filter((r) => r.path === "/api/plugin/player-join" && (r.body as { group?: string }).group === "game");
    await eventually(() => backendJoins().length >= 2, "game-2's join report", lineWaitMs);
    // Steve leaves the network at the proxy: the proxy reports it, game-2 drops him without a report.
    proxy.send("players leave Steve");
    await game2.waitForLine("Steve left the network");
    await eventually(() => server.requests.some((r) => r.path === "/api/plugin/player-leave"), "the proxy's leave report", lineWaitMs);
    await new Promise((resolve) => setTimeout(resolve, 500));
    assert.deepEqual(
      server.requests.filter((r) => r.path.startsWith("/api/plugin/player-")).map((r) => [r.path, (r.body as { group?: string }).group ?? null]),
      [
        ["/api/plugin/player-join", "proxy"],
        ["/api/plugin/player-join", "game"],
        ["/api/plugin/player-join", "game"],
        ["/api/plugin/player-leave", null],
      ],
      "joins from the proxy and each backend, one leave (the proxy's)",
    );
    for (const sim of [game1, game2]) {
      sim.send("list");
      await sim.waitForLine("There are 0 of a max of 100 players online");
    }
    for (const sim of [proxy, game1, game2]) sim.send("stop");
    assert.deepEqual(await Promise.all([proxy.exited, game1.exited, game2.exited]), [0, 0, 0]);
  });

  it("the tick model: 20 TPS idle, lower under load, averages moving like exponential averages over 1, 5 and 15 minutes", () => {
    assert.equal(tpsAt(0), 20);
    assert.ok(Math.abs(tpsAt(300) - 1000 / 152) < 1e-9);
    const model = new TickModel(0);
    model.setLoad(300, 0);
    const minute = model.read(60_000);
    const target = tpsAt(300);
    assert.ok(Math.abs(minute.tps1m - (target + (20 - target) * Math.exp(-1))) < 1e-9);
    assert.ok(minute.tps1m < minute.tps5m && minute.tps5m < minute.tps15m);
    model.setLoad(0, 60_000);
    assert.ok(model.read(600_000).tps1m > 19.99);
    assert.throws(() => model.setLoad(1_001, 0), RangeError);
  });
});
