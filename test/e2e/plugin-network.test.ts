// The plugin API's network routes end to end: a real controller, a real `cloud-daemon` and two
// simulated servers. The test plays the servers' plugins with the servers' own workload tokens and
// through the daemon's loopback relay (the address in each process's environment), as an in-server
// plugin calls: players join, a plugin event stream is opened through the relay, a transfer to the
// group is queued, delivered on the holder's stream, and completed by the join on the target;
// metrics reach the REST view.
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { INSTANCE_ENV } from "../../src/daemon/simulated-server/contract.js";
import {
  api,
  cleanupDirs,
  createToken,
  eventsOf,
  spawnDaemon,
  startGatewayController,
  type DaemonProcess,
  type GatewayController,
} from "../gateway/harness.js";
import { environOf, serverProcesses } from "../support/instance-processes.js";
import { frameJson, openSse, type SseStream } from "../support/sse-client.js";
import { eventually } from "../support/wait.js";

const waitMs = 60_000;
const uuid = "00000000-0000-4000-8000-0000000000aa";

describe("plugin network routes through the daemon's relay", { timeout: 240_000 }, () => {
  const controllers: GatewayController[] = [];
  const daemons: DaemonProcess[] = [];
  const streams: SseStream[] = [];
  after(async () => {
    for (const s of streams) s.close();
    for (const d of daemons) await d.stop();
    for (const c of controllers) await c.stop();
    cleanupDirs();
  });

  it("players, the plugin event stream, a transfer to the group and metrics, all through the relay", async () => {
    const controller = await startGatewayController({ scheduler: { evaluationIntervalMs: 1_000 } });
    controllers.push(controller);
    const daemon = spawnDaemon([controller.grpcAddress], (await createToken(controller)).token, { maxMemoryMb: 2048 });
    daemons.push(daemon);
    await eventually(
      () => eventsOf(controller, "NODE_CONNECTED")[0],
      () => `daemon connected\n${daemon.output()}`,
      waitMs,
    );
    const created = await api(controller, "POST", "/api/v1/groups", {
      name: "arena",
      platform: "simulated",
      scalingMode: "STATIC",
      minInstances: 2,
      maxInstances: 2,
      maxPlayers: 20,
      memoryMb: 64,
      portRange: { start: 28500, end: 28520 },
    });
    assert.equal(created.status, 201, JSON.stringify(created.json));
    const running = await eventually(
      async () => {
        const list = (await api(controller, "GET", "/api/v1/services?group=arena")).json as { id: string; state: string }[];
        const up = list.filter((r) => r.state === "RUNNING" && (serverProcesses().get(r.id) ?? []).length === 1);
        return up.length === 2 ? up : null;
      },
      () => `two RUNNING servers\n${daemon.output().slice(-2000)}`,
      waitMs,
    );
    const [a, b] = running.map((r) => {
      const env = environOf(serverProcesses().get(r.id)![0]);
      return { id: r.id, relay: env.get(INSTANCE_ENV.controllerUrl)!, token: env.get(INSTANCE_ENV.workloadToken)! };
    });
    assert.match(a.relay, /^http:\/\/127\.0\.0\.1:\d+$/);
    assert.ok(!a.relay.endsWith(new URL(controller.url).port), "the relay, not the controller");
    // Above what the servers' own SDK sent with these tokens (the wall clock in microseconds).
    let sequence = (Date.now() + 60_000) * 1000;
    const call = async (server: typeof a, method: string, path: string, body?: unknown) => {
      const res = await fetch(`${server.relay}${path}`, {
        method,
        headers: { authorization: `Bearer ${server.token}`, "content-type": "application/json", "x-cloud-sequence": String(++sequence) },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await res.text();
      return { status: res.status, json: text ? JSON.parse(text) : null, text };
    };

    const joined = await call(a, "POST", "/api/plugin/player-join", { uuid, name: "alice" });
    assert.equal(joined.status, 200, joined.text);
    const players = await call(b, "GET", "/api/plugin/players");
    assert.deepEqual(
      players.json.map((p: any) => [p.uuid, p.instanceId]),
      [[uuid, a.id]],
    );
    assert.deepEqual((await call(a, "GET", "/api/plugin/instances")).json.map((i: any) => i.id).sort(), [a.id, b.id].sort());

    const ticket = await call(a, "POST", "/api/plugin/events/ticket");
    assert.equal(ticket.status, 200, ticket.text);
    const stream = await openSse(`${a.relay}/api/v1/events/stream?ticket=${ticket.json.ticket}`);
    streams.push(stream);
    assert.equal(frameJson((await stream.waitFor(1))[0]).message, "Connected to the plugin event stream");

    const queued = await call(a, "POST", "/api/plugin/transfer-to-group", { playerUuid: uuid, group: "arena" });
    assert.equal(queued.status, 202, queued.text);
    assert.equal(queued.json.targetInstanceId, b.id, "the other RUNNING server");
    assert.equal(queued.json.holderInstanceId, a.id, "no proxy: the server holding the player moves it");
    const [transfer] = await stream.waitFor(1, (f) => f.event === "transfer", waitMs);
    assert.equal(frameJson(transfer).id, queued.json.id);

    assert.equal((await call(b, "POST", "/api/plugin/player-join", { uuid, name: "alice" })).status, 200);
    await stream.waitFor(1, (f) => f.event === "transfer-completed", waitMs);
    const moved = await eventually(() => eventsOf(controller, "PLAYER_TRANSFER")[0], "PLAYER_TRANSFER", waitMs);
    assert.deepEqual(moved.data, { uuid, name: "alice", fromInstanceId: a.id, toInstanceId: b.id });
    await eventually(async () => (await api(controller, "GET", `/api/v1/services/${b.id}`)).json.playerCount === 1, "playerCount on the target", waitMs);

    const empty = await call(a, "POST", "/api/plugin/transfer-to-group", { playerUuid: uuid, group: "lobby" });
    assert.equal(empty.status, 404, empty.text);
    const metrics = await call(b, "POST", "/api/plugin/metrics", { tps1m: 18.2, msptAvg: 48, playerCount: 1 });
    assert.equal(metrics.status, 200, metrics.text);
    const snapshot = await api(controller, "GET", `/api/v1/services/${b.id}/metrics`);
    assert.equal(snapshot.json.tps1m, 18.2);
    const repeated = await fetch(`${b.relay}/api/plugin/metrics`, {
      method: "POST",
      headers: { authorization: `Bearer ${b.token}`, "content-type": "application/json", "x-cloud-sequence": String(sequence) },
      body: "{}",
    });
    assert.equal(repeated.status, 409, "the same sequence number again, through the relay");
  });
});
