// The plugin API's network routes end to end: a real controller, a real `cloud-daemon` and
// simulated servers. The first test plays two servers' plugins by hand; the second runs a network
// of simulated servers built on the plugin SDK (a `simulated-proxy` proxy, servers of two groups)
// driven through their consoles: joins through the proxy, transfers to a group and between
// instances (delivered to the proxy's stream, carried out by connecting the player to the target),
// 409 for a group with nothing running, metrics under load on REST and the general event stream, a
// custom event from one server's SDK to another's, token rotation under load, sequence validation.
//
// The first test: The test plays the servers' plugins with the servers' own workload tokens and
// through the daemon's loopback relay (the address in each process's environment), as an in-server
// plugin calls: players join, a plugin event stream is opened through the relay, a transfer to the
// group is queued, delivered on the holder's stream, and completed by the join on the target;
// metrics reach the REST view.
import assert from "node:assert/strict";
import { readlinkSync } from "node:fs";
import { after, describe, it } from "node:test";
import { INSTANCE_ENV } from "../../src/daemon/simulated-server/contract.js";
import { connectToCloud, PluginTransport } from "../../src/sdk/index.js";
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
import { frameJson, isMessage, openSse, type SseStream } from "../support/sse-client.js";
import { eventually } from "../support/wait.js";

const waitMs = 60_000;

/**
 * The server processes of `id` that `daemon` runs (their working directories are under its
 * directory): other tests on the machine may run instances of the same ids at the same time.
 */
function processesOf(daemon: DaemonProcess, id: string): number[] {
  return (serverProcesses().get(id) ?? []).filter((pid) => {
    try {
      return readlinkSync(`/proc/${pid}/cwd`).startsWith(daemon.dir);
    } catch {
      return false;
    }
  });
}
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
    // This test plays the servers' plugins from its own process with their tokens: exactly what the
    // relay's caller check refuses (test/daemon/plugin-relay-callers.test.ts), so it is off here.
    const daemon = spawnDaemon([controller.grpcAddress], (await createToken(controller)).token, { maxMemoryMb: 2048, pluginRelay: { callerCheck: "off" } });
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
        const up = list.filter((r) => r.state === "RUNNING" && processesOf(daemon, r.id).length === 1);
        return up.length === 2 ? up : null;
      },
      () => `two RUNNING servers\n${daemon.output().slice(-2000)}`,
      waitMs,
    );
    const [a, b] = running.map((r) => {
      const env = environOf(processesOf(daemon, r.id)[0]);
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

  it("a network of simulated servers on the SDK: proxy joins, transfers to a group and to an instance, 409 when nothing runs, metrics, a custom event, rotation under load, sequences", async () => {
    const controller = await startGatewayController({ scheduler: { evaluationIntervalMs: 1_000 } });
    controllers.push(controller);
    // The test also calls with the servers' tokens from its own process (the registry, a plugin under
    // load, sequences): the relay's caller check would refuse it, so it is off here.
    const daemon = spawnDaemon([controller.grpcAddress], (await createToken(controller)).token, { maxMemoryMb: 4096, pluginRelay: { callerCheck: "off" } });
    daemons.push(daemon);
    const ownProcesses = (id: string) => processesOf(daemon, id);
    await eventually(
      () => eventsOf(controller, "NODE_CONNECTED")[0],
      () => `daemon connected\n${daemon.output()}`,
      waitMs,
    );
    const groups = [
      { name: "netproxy", platform: "simulated-proxy", count: 1, ports: 29100 },
      { name: "netlobby", platform: "simulated", count: 2, ports: 29120 },
      { name: "netgame", platform: "simulated", count: 1, ports: 29140 },
      { name: "netarena", platform: "simulated", count: 0, ports: 29160 },
    ];
    for (const g of groups) {
      const created = await api(controller, "POST", "/api/v1/groups", {
        name: g.name,
        platform: g.platform,
        scalingMode: "STATIC",
        minInstances: g.count,
        maxInstances: Math.max(1, g.count),
        maxPlayers: 50,
        memoryMb: 64,
        portRange: { start: g.ports, end: g.ports + 15 },
      });
      assert.equal(created.status, 201, JSON.stringify(created.json));
    }
    let seen: unknown = null;
    const running = await eventually(
      async () => {
        const list = (await api(controller, "GET", "/api/v1/services")).json as { id: string; group: string; state: string; port: number }[];
        seen = list;
        const up = list.filter((r) => r.state === "RUNNING" && ownProcesses(r.id).length === 1);
        return up.length === 4 ? up : null;
      },
      () => `four RUNNING instances (${JSON.stringify(seen)})\n${daemon.output().slice(-2000)}\n${controller.logs().slice(-3000)}`,
      waitMs,
    );
    const idsOf = (group: string) => running.filter((r) => r.group === group).map((r) => r.id);
    const [proxy] = idsOf("netproxy");
    const lobbies = idsOf("netlobby");
    const [game] = idsOf("netgame");
    const envOf = (id: string) => environOf(ownProcesses(id)[0]);

    const consoleOf = (id: string) =>
      eventsOf(controller, "INSTANCE_CONSOLE_OUTPUT")
        .filter((e) => e.data.instanceId === id)
        .map((e) => String(e.data.line));
    const command = async (id: string, line: string) => {
      const res = await api(controller, "POST", `/api/v1/services/${id}/command`, { command: line });
      assert.ok(res.status < 300, `${id} ${line}: ${JSON.stringify(res.json)}`);
    };
    const lineOn = (id: string, pattern: RegExp, after = 0) =>
      eventually(
        () =>
          consoleOf(id)
            .slice(after)
            .find((line) => pattern.test(line)),
        () => `${id}: a line matching ${pattern} (got: ${consoleOf(id).slice(-15).join(" | ")})`,
        waitMs,
      );
    const playerCount = async (id: string) => (await api(controller, "GET", `/api/v1/services/${id}`)).json.playerCount as number;
    const lobbyRelay = envOf(lobbies[0]);
    const players = async () => {
      const res = await fetch(`${lobbyRelay.get(INSTANCE_ENV.controllerUrl)}/api/plugin/players`, {
        headers: { authorization: `Bearer ${lobbyRelay.get(INSTANCE_ENV.workloadToken)}` },
      });
      assert.equal(res.status, 200);
      return (await res.json()) as { uuid: string; name: string; instanceId: string | null; group: string | null; proxyInstanceId: string | null }[];
    };
    for (const id of [proxy, ...lobbies, game]) await lineOn(id, /Connected to the event stream/);

    // Players join the proxy, then go to a lobby (twice: one per lobby, the least-loaded) and to the game.
    for (const name of ["alice", "bob", "carol"]) await command(proxy, `players join ${name}`);
    await eventually(async () => (await playerCount(proxy)) === 3, "three players on the proxy", waitMs);
    const placed = new Map<string, string>();
    for (const [name, group] of [
      ["alice", "netlobby"],
      ["bob", "netlobby"],
      ["carol", "netgame"],
    ]) {
      const mark = consoleOf(proxy).length;
      await command(proxy, `players transfer ${name} ${group}`);
      const queued = await lineOn(proxy, new RegExp(`Transfer of ${name} to group ${group} queued \\((\\S+)\\) as `), mark);
      const target = /\((\S+)\)/.exec(queued)![1];
      await lineOn(proxy, new RegExp(`Transfer \\S+ of ${name} to ${target} completed`), mark);
      await lineOn(target, new RegExp(`${name}\\[/127\\.0\\.0\\.1\\] logged in .* through ${proxy}`));
      placed.set(name, target);
    }
    assert.deepEqual(new Set([placed.get("alice"), placed.get("bob")]), new Set(lobbies), "the least-loaded lobby each time: one player per lobby");
    assert.equal(placed.get("carol"), game);
    const byName = new Map((await players()).map((p) => [p.name, p]));
    for (const [name, target] of placed) {
      assert.equal(byName.get(name)?.instanceId, target, name);
      assert.equal(byName.get(name)?.proxyInstanceId, proxy, `${name} is held by the proxy`);
    }
    for (const id of lobbies) await eventually(async () => (await playerCount(id)) === 1, `${id} playerCount 1`, waitMs);
    await eventually(async () => (await playerCount(game)) === 1, "game playerCount 1", waitMs);

    // Between instances: alice from her lobby to the game server.
    const aliceLobby = placed.get("alice")!;
    let mark = consoleOf(proxy).length;
    await command(proxy, `players send alice ${game}`);
    await lineOn(proxy, new RegExp(`Transfer \\S+ of alice to ${game} completed`), mark);
    await lineOn(aliceLobby, /alice moved on to another server/);
    const moved = await eventually(() => eventsOf(controller, "PLAYER_TRANSFER").find((e) => e.data.name === "alice"), "PLAYER_TRANSFER of alice", waitMs);
    assert.deepEqual(moved.data, { uuid: byName.get("alice")!.uuid, name: "alice", fromInstanceId: aliceLobby, toInstanceId: game });
    await eventually(async () => (await playerCount(game)) === 2 && (await playerCount(aliceLobby)) === 0, "the counts follow the move", waitMs);
    await eventually(async () => (await playerCount(proxy)) === 3, "the proxy keeps its three players", waitMs);
    assert.equal((await players()).find((p) => p.name === "alice")?.instanceId, game);

    // A group with nothing running: 409 NO_RUNNING_INSTANCES, and bob stays where he is.
    mark = consoleOf(proxy).length;
    await command(proxy, "players transfer bob netarena");
    await lineOn(proxy, /Transfer of bob failed: NO_RUNNING_INSTANCES: /, mark);
    assert.equal((await players()).find((p) => p.name === "bob")?.instanceId, placed.get("bob"));

    // Metrics: TPS drops under `load`; the report reaches the REST view and INSTANCE_METRICS the general stream.
    const ticket = await api(controller, "POST", "/api/v1/events/ticket");
    assert.equal(ticket.status, 200, JSON.stringify(ticket.json));
    const general = await openSse(`${controller.url}/api/v1/events/stream?ticket=${ticket.json.ticket}`);
    streams.push(general);
    await general.waitFor(1, (f) => f.event === "connected", waitMs);
    await command(game, "metrics");
    const idle = await eventually(
      async () => {
        const res = await api(controller, "GET", `/api/v1/services/${game}/metrics`);
        return res.status === 200 ? res.json : null;
      },
      "the game's metrics on REST",
      waitMs,
    );
    assert.equal(idle.tps1m, 20);
    assert.equal(idle.playerCount, 2);
    await command(game, "load 600");
    await lineOn(game, /Load set to 600 %/);
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    await command(game, "metrics");
    const loaded = await eventually(
      async () => {
        const res = await api(controller, "GET", `/api/v1/services/${game}/metrics`);
        return res.status === 200 && res.json.tps1m < idle.tps1m ? res.json : null;
      },
      "a lower TPS on REST",
      waitMs,
    );
    assert.ok(loaded.msptAvg > idle.msptAvg, `MSPT rises under load: ${idle.msptAvg} -> ${loaded.msptAvg}`);
    const [metricsFrame] = await general.waitFor(
      1,
      (f) => isMessage(f) && frameJson(f).type === "INSTANCE_METRICS" && frameJson(f).data.instanceId === game && frameJson(f).data.tps1m < 20,
      waitMs,
    );
    assert.equal(frameJson(metricsFrame).data.group, "netgame");

    // A custom event: published by a lobby's SDK, received by the game's SDK event bus (not echoed to its publisher).
    const publisher = lobbies[0];
    await command(publisher, 'event sim:hello {"n":1}');
    await lineOn(game, new RegExp(`\\[event\\] sim:hello from ${publisher} \\{"n":1\\}`));
    await lineOn(lobbies[1], new RegExp(`\\[event\\] sim:hello from ${publisher}`));
    assert.ok(!consoleOf(publisher).some((line) => line.includes("[event] sim:hello")), "the publisher's stream does not echo its own event");

    // Token rotation under load: the SDK with lobbies[1]'s workload token, calls from 8 concurrent
    // workers (GETs and sequenced custom events, about 30 a second) while it rotates; the old token is refused after the grace and no
    // call fails. (lobbies[1]'s own process keeps the old token: it is not used afterwards.)
    const loadEnv = envOf(lobbies[1]);
    const oldToken = loadEnv.get(INSTANCE_ENV.workloadToken)!;
    const sdk = connectToCloud({
      env: {},
      controllerUrl: loadEnv.get(INSTANCE_ENV.controllerUrl)!,
      token: oldToken,
      instanceId: lobbies[1],
      group: "netlobby",
    });
    // The server's process numbered its own requests from 1 under the same start: this client goes on above them.
    for (let i = 0; i < 1_000; i++) sdk.transport.nextSequence();
    const failures: string[] = [];
    let calls = 0;
    let stop = false;
    const worker = async (n: number) => {
      for (let i = 0; !stop; i++) {
        try {
          if ((n + i) % 8 === 0) await sdk.transport.post("/api/plugin/events", { type: "load:tick", data: { n, i } });
          else if ((n + i) % 2 === 0) await sdk.client.fetchPlayers();
          else await sdk.client.fetchGroups();
          calls += 1;
        } catch (err) {
          failures.push(String(err));
        }
        // Below the controller's request rate limits (per user: 3,000 a minute).
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    };
    const workers = Array.from({ length: 8 }, (_, n) => worker(n));
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    await sdk.transport.refreshToken();
    const rotatedAt = Date.now();
    assert.notEqual(sdk.transport.token, oldToken);
    // Past the 10 s grace: by now the old token is refused, and the calls go on with the new one.
    await eventually(
      async () => {
        const res = await fetch(`${loadEnv.get(INSTANCE_ENV.controllerUrl)}/api/plugin/groups`, { headers: { authorization: `Bearer ${oldToken}` } });
        return res.status === 401;
      },
      "the old token refused after the grace",
      30_000,
    );
    assert.ok(Date.now() - rotatedAt >= 9_000, "not before the grace");
    const callsAtRefusal = calls;
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    stop = true;
    await Promise.all(workers);
    await sdk.close();
    console.log(`rotation under load: ${calls} calls, ${failures.length} failed, ${sdk.transport.stats.refreshes} refresh`);
    assert.deepEqual(failures, [], "no call failed across the rotation");
    assert.ok(calls > callsAtRefusal && callsAtRefusal > 100, `calls before and after the old token was refused: ${callsAtRefusal}, ${calls}`);

    // Sequence validation through the relay: a number the plugin already used is refused (409).
    const raw = new PluginTransport({ controllerUrl: loadEnv.get(INSTANCE_ENV.controllerUrl)!, token: sdk.transport.token });
    const first = await raw.call("POST", "/api/plugin/events", { type: "seq:once" }, 900_000);
    assert.equal(first.status, 200, JSON.stringify(first.body));
    const again = await raw.call("POST", "/api/plugin/events", { type: "seq:once" }, 900_000);
    assert.equal(again.status, 409);
    assert.equal((again.body as { error: { code: string } }).error.code, "SEQUENCE_REPEATED");
    const old = await raw.call("POST", "/api/plugin/events", { type: "seq:old" }, 1_001);
    assert.equal((old.body as { error: { code: string } }).error.code, "SEQUENCE_TOO_OLD");
    raw.close();
  });
});
