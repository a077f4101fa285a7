// Plugin traffic follows the cluster: three controller processes on the production profile (shared
// PostgreSQL, Redis, one Raft cluster), one cloud-daemon that knows every controller, a group with
// two simulated servers. Players join and leave through the plugin API the way a server's plugin
// calls it: through the daemon's loopback relay (the instance's CLOUD_CONTROLLER_URL) with the
// instance's workload token, one call every 50–100 ms per instance, a failed call sent again. The
// controller holding the daemon's stream is SIGKILLed and stays down. Then, for each instance:
// - no plugin call goes unanswered-with-success for longer than a bounded window (the daemon's
//   reconnect plus the relay's wait), and every call after that window succeeds;
// - it is still RUNNING on the surviving controllers, as the same single process;
// - the player count its calls leave behind, after a final join, is its playerCount on both survivors.
// The measured outage (longest time without a successful call) and the reconnect time are printed.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Redis } from "ioredis";
import { environOf, serverProcesses } from "../support/instance-processes.js";
import { ClusterHarness, type ClusterMemberProcess } from "./cluster-harness.js";
import { eventually } from "../support/wait.js";
import { frameJson, openSse } from "../support/sse-client.js";
import { cleanupDirs, spawnDaemon, type DaemonProcess } from "../gateway/harness.js";
import { startPostgresServer, type PostgresServer } from "../support/postgres-server.js";
import { startRedisServer, type RedisServer } from "../support/redis-server.js";
import { INSTANCE_ENV } from "../../src/daemon/simulated-server/contract.js";

const evaluationIntervalSeconds = 1;
const reconcileIntervalSeconds = 3;
const waitMs = 90_000;
const group = "plugfail";
/** The plugin client's request timeout (spec document 3). */
const pluginRequestTimeoutMs = 10_000;
/**
 * Longest time without a successful plugin call the test accepts: the daemon notices the broken
 * stream at once (the kernel resets the connection) and reconnects within its backoff (1 s here),
 * the relay waits up to 10 s for the next session; 15 s leaves room for a loaded machine.
 */
const outageBoundMs = 15_000;
/**
 * Calls kept going after the daemon is on a surviving controller (they must all succeed): at least
 * this long, and until each server made {@link callsAfterReconnectMin} of them (a loaded machine
 * makes fewer calls a second).
 */
const callsAfterReconnectMs = 5_000;
const callsAfterReconnectMin = 10;

interface Call {
  op: "join" | "leave";
  uuid: string;
  startMs: number;
  endMs: number;
  /** HTTP status, or 0 when no answer came (connection error, timeout). */
  status: number;
  code: string | null;
}

/** One simulated server as the test sees it: its record id, process, relay address and workload token. */
interface Server {
  id: string;
  pid: number;
  relayUrl: string;
  token: string;
}

const instanceCount = 2;
const uuidOf = (server: number, n: number) => `00000000-0000-4000-8${server.toString(16).padStart(3, "0")}-${n.toString(16).padStart(12, "0")}`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// Bounded for a loaded 2-core machine: three controller starts, a relaunch and two failovers.
describe("plugin calls follow the daemon when its controller dies", { timeout: 900_000 }, () => {
  let postgres: PostgresServer;
  let redis: RedisServer;
  let redisClient: Redis;
  let harness: ClusterHarness;
  let members: ClusterMemberProcess[] = [];
  let daemon: DaemonProcess;
  let nodeId = "";
  let servers: Server[] = [];
  /** The member the first test SIGKILLed (relaunched by the second). */
  let killed: ClusterMemberProcess | null = null;

  const live = () => members.filter((m) => m.process !== null);
  const call = async (method: string, path: string, body?: unknown) => {
    let last: unknown;
    for (const m of live()) {
      try {
        return await m.call(method, path, body);
      } catch (err) {
        last = err;
      }
    }
    throw last ?? new Error("no controller running");
  };
  const controllerIdOf = async (m: ClusterMemberProcess) => {
    const view = (await m.call("GET", "/api/v1/cluster/members")).json.members as { nodeId: string; raftAddr: string }[];
    return view.find((x) => x.raftAddr.endsWith(`:${m.raftPort}`))?.nodeId ?? null;
  };
  const sessionControllerId = async () => {
    const value = await redisClient.get(`cloud:v1:session:node:${nodeId}`);
    return value ? (JSON.parse(value) as { controllerId: string }).controllerId : null;
  };
  const processesOf = (id: string) => serverProcesses().get(id) ?? [];

  /** One plugin call through the relay with the workload token, as the server's plugin sends it. */
  const plugin = async (server: Server, op: "join" | "leave", uuid: string, sequence: number): Promise<Call> => {
    const startMs = Date.now();
    const body = op === "join" ? { uuid, name: `p${sequence}`, group } : { uuid };
    try {
      const res = await fetch(`${server.relayUrl}/api/plugin/player-${op}`, {
        method: "POST",
        headers: { authorization: `Bearer ${server.token}`, "content-type": "application/json", "x-cloud-sequence": String(sequence) },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(pluginRequestTimeoutMs),
      });
      const text = await res.text();
      let code: string | null = null;
      if (res.status >= 400) code = (JSON.parse(text) as { error?: { code?: string } }).error?.code ?? null;
      return { op, uuid, startMs, endMs: Date.now(), status: res.status, code };
    } catch (err) {
      return { op, uuid, startMs, endMs: Date.now(), status: 0, code: (err as Error).name };
    }
  };

  before(async () => {
    [postgres, redis] = await Promise.all([startPostgresServer(), startRedisServer()]);
    redisClient = new Redis(redis.uri, { lazyConnect: false, maxRetriesPerRequest: 2 });
    harness = new ClusterHarness({
      runtime: { profile: "production" },
      database: { uri: postgres.uri },
      kvstore: { uri: redis.uri },
      scheduler: { evaluationIntervalSeconds, reconcileIntervalSeconds },
    });
    members = await harness.startThree();
    const [a] = members;
    const token = (await a.call("POST", "/api/v1/admin/tokens", {})).json.token as string;
    daemon = spawnDaemon(
      members.map((m) => m.grpcAddr),
      token,
      // The test plays the servers' plugins from its own process with their tokens: exactly what the
      // relay's caller check refuses (test/daemon/plugin-relay-callers.test.ts), so it is off here.
      { maxMemoryMb: 4096, reconnectDelayMaxMs: 1_000, pluginRelay: { callerCheck: "off" } },
    );
    const nodes = await eventually(
      async () => {
        const online = (await a.call("GET", "/api/v1/nodes?state=ONLINE")).json as { id: string }[];
        return online.length === 1 ? online : null;
      },
      "the node ONLINE",
      waitMs,
    );
    nodeId = nodes[0].id;
    const created = await a.call("POST", "/api/v1/groups", {
      name: group,
      platform: "simulated",
      minInstances: instanceCount,
      maxInstances: instanceCount,
      memoryMb: 64,
      portRange: { start: 28300, end: 28400 },
    });
    assert.equal(created.status, 201, created.text);
    const running = await eventually(
      async () => {
        const list = (await a.call("GET", `/api/v1/services?group=${group}`)).json as { id: string; state: string }[];
        const up = list.filter((r) => r.state === "RUNNING");
        return up.length === instanceCount && up.every((r) => processesOf(r.id).length === 1) ? up : null;
      },
      `${instanceCount} RUNNING instances with their processes`,
      waitMs,
    ).catch(async (err: unknown) => {
      // Where the group's instances are, and what the controllers and the daemon said, for the failure's reader.
      console.log(`---- group\n${(await a.call("GET", `/api/v1/groups/${group}`)).text}`);
      console.log(`---- services\n${(await a.call("GET", `/api/v1/services?group=${group}`)).text}`);
      for (const m of members) {
        const lines = (m.process?.output() ?? "").split("\n").filter((l) => /WARN|ERROR|plugfail/.test(l));
        console.log(`---- ${m.name}: warnings and the group's lines\n${lines.slice(-40).join("\n")}`);
      }
      console.log(`---- daemon output\n${daemon.output().split("\n").slice(-40).join("\n")}`);
      throw err;
    });
    servers = running.map((r) => {
      const pid = processesOf(r.id)[0];
      const env = environOf(pid);
      return { id: r.id, pid, relayUrl: env.get(INSTANCE_ENV.controllerUrl) ?? "", token: env.get(INSTANCE_ENV.workloadToken) ?? "" };
    });
    for (const server of servers) {
      assert.match(server.relayUrl, /^http:\/\/127\.0\.0\.1:\d+$/, `${server.id} calls the plugin API through the daemon's loopback relay`);
      assert.ok(
        members.every((m) => !server.relayUrl.endsWith(`:${m.httpPort}`)),
        `${server.relayUrl} is the relay, not a controller`,
      );
      assert.notEqual(server.token, "", `${server.id} has a workload token`);
    }
  });

  after(async () => {
    await daemon?.stop();
    await harness?.close();
    redisClient?.disconnect();
    await redis?.stop();
    await postgres?.stop();
    cleanupDirs();
  });

  it("players join and leave through the relay while the daemon's controller is SIGKILLed; calls succeed again within the bound", async () => {
    // The controller holding the daemon's stream.
    const holderId = await eventually(sessionControllerId, "the daemon's session in the registry", waitMs);
    let victim: ClusterMemberProcess | null = null;
    for (const m of members) if ((await controllerIdOf(m)) === holderId) victim = m;
    assert.ok(victim, `a member is controller ${holderId}`);

    // The plugin traffic of each server: join a new player, and once three are on, let the oldest
    // one leave. A failed call is sent again, as the plugin client would: a join twice is one join,
    // and a leave repeated after an answer that never came may find the player gone already (404).
    let stopTraffic = false;
    const streams = servers.map((server, index) => {
      const stream = {
        server,
        calls: [] as Call[],
        present: [] as string[],
        next: 1,
        sequence: 0,
        pending: null as { op: "join" | "leave"; uuid: string; repeated: boolean } | null,
        /** Sends the pending call (or the next one); true when it is done. */
        async step(): Promise<boolean> {
          stream.pending ??=
            stream.present.length >= 3 && stream.sequence % 2 === 1
              ? { op: "leave", uuid: stream.present[0], repeated: false }
              : { op: "join", uuid: uuidOf(index, stream.next++), repeated: false };
          const pending = stream.pending;
          const result = await plugin(server, pending.op, pending.uuid, ++stream.sequence);
          stream.calls.push(result);
          if (result.status === 200 || (pending.op === "leave" && pending.repeated && result.status === 404)) {
            if (pending.op === "join") stream.present.push(pending.uuid);
            else stream.present.splice(stream.present.indexOf(pending.uuid), 1);
            stream.pending = null;
            return true;
          }
          pending.repeated = true;
          return false;
        },
        /** Makes the next call a join of a new player. */
        joinNext(): void {
          stream.pending ??= { op: "join", uuid: uuidOf(index, stream.next++), repeated: false };
        },
        done: Promise.resolve(),
      };
      stream.done = (async () => {
        while (!stopTraffic) {
          await stream.step();
          await sleep(50 + Math.floor(Math.random() * 51));
        }
      })();
      return stream;
    });
    const calls = () => streams.flatMap((s) => s.calls);

    try {
      await eventually(() => streams.every((s) => s.calls.filter((c) => c.status === 200).length >= 10), "plugin calls succeeding before the kill", 30_000);
      const killedAtMs = Date.now();
      await harness.kill9(victim);
      victim.process = null;
      killed = victim;
      // The daemon on a surviving controller: the registry names another controller.
      const newHolder = await eventually(
        async () => {
          const id = await sessionControllerId();
          return id !== null && id !== holderId ? id : null;
        },
        "the daemon's session on a surviving controller",
        { timeoutMs: waitMs, intervalMs: 20 },
      ).catch((err: unknown) => {
        // What the survivors and the daemon said about the node's sessions, for the failure's reader.
        for (const m of live()) {
          const lines = (m.process?.output() ?? "").split("\n").filter((l) => /[Ss]ession|connection of node|MUTEX/.test(l));
          console.log(`---- ${m.name}: session log lines\n${lines.slice(-40).join("\n")}`);
        }
        console.log(`---- daemon output\n${daemon.output().split("\n").slice(-40).join("\n")}`);
        throw err;
      });
      const reconnectMs = Date.now() - killedAtMs;
      const reconnectedAtMs = Date.now();
      await sleep(callsAfterReconnectMs);
      await eventually(
        () => streams.every((s) => s.calls.filter((c) => c.startMs >= reconnectedAtMs).length >= callsAfterReconnectMin),
        `${callsAfterReconnectMin} plugin calls per server after the reconnect`,
        { timeoutMs: waitMs, intervalMs: 100 },
      );
      stopTraffic = true;
      await Promise.all(streams.map((s) => s.done));

      // (1) Per server: the longest time without a successful answer, and what failed.
      let outageMs = 0;
      let longestFailureRun = 0;
      for (const { calls: list } of streams) {
        const succeeded = list.filter((c) => c.status === 200).map((c) => c.endMs);
        for (let i = 1; i < succeeded.length; i++) outageMs = Math.max(outageMs, succeeded[i] - succeeded[i - 1]);
        let failureRun = 0;
        for (const c of list) {
          failureRun = c.status === 200 ? 0 : failureRun + 1;
          longestFailureRun = Math.max(longestFailureRun, failureRun);
        }
      }
      const all = calls();
      const failed = all.filter((c) => c.status !== 200);
      const slowest = Math.max(...all.map((c) => c.endMs - c.startMs));
      const summary =
        `SIGKILL of ${victim.name} (${holderId}) holding the daemon's stream: daemon on ${newHolder} after ${reconnectMs} ms; ` +
        `${all.length} plugin calls, ${failed.length} failed (${failed.map((c) => `${c.status}/${c.code}`).join(", ") || "none"}), ` +
        `longest run of failures ${longestFailureRun}, slowest call ${slowest} ms, longest time without a successful call ${outageMs} ms`;
      console.log(summary);
      assert.ok(outageMs < outageBoundMs, `plugin calls succeed again within ${outageBoundMs} ms: ${summary}`);
      for (const { server, calls: list } of streams) {
        const afterReconnect = list.filter((c) => c.startMs >= reconnectedAtMs);
        assert.ok(afterReconnect.length >= callsAfterReconnectMin, `${server.id}: calls were made after the reconnect: ${afterReconnect.length}`);
        assert.ok(
          afterReconnect.every((c) => c.status === 200),
          `${server.id}: every call started after the reconnect succeeds: ${afterReconnect.filter((c) => c.status !== 200).length} failed`,
        );
        const lastFailure = list.filter((c) => c.status !== 200).at(-1);
        if (lastFailure) {
          assert.ok(
            list.filter((c) => c.startMs > lastFailure.endMs).every((c) => c.status === 200),
            `${server.id}: every call after the last failure succeeds`,
          );
          assert.ok(lastFailure.endMs - killedAtMs < outageBoundMs, `${server.id}: the last failure ends within ${outageBoundMs} ms of the kill: ${summary}`);
        }
      }

      for (const stream of streams) {
        const { server } = stream;
        // (2) Still RUNNING on the survivors, as the same single process.
        await eventually(
          async () => {
            const record = await call("GET", `/api/v1/services/${server.id}`);
            return record.status === 200 && record.json.state === "RUNNING";
          },
          `${server.id} RUNNING on a surviving controller`,
          30_000,
        );
        assert.deepEqual(processesOf(server.id), [server.pid], `${server.id} still runs as pid ${server.pid}, once`);

        // (3) The count its calls left behind, after a final join, on every surviving controller.
        for (let attempt = 0; stream.pending !== null; attempt++) {
          assert.ok(attempt < 3, `${server.id}: the repeated call succeeds: ${JSON.stringify(stream.calls.at(-1))}`);
          await stream.step();
        }
        stream.joinNext();
        assert.ok(await stream.step(), `${server.id}: the final join: ${JSON.stringify(stream.calls.at(-1))}`);
        for (const m of live()) {
          // The group's owner writes the count (at once when the call reached it, else when it hears of the change).
          let record = await m.call("GET", `/api/v1/services/${server.id}`);
          await eventually(
            async () => {
              record = await m.call("GET", `/api/v1/services/${server.id}`);
              return record.status === 200 && record.json.playerCount === stream.present.length;
            },
            () => `${m.name} counts the ${stream.present.length} players on ${server.id}: ${record.text}`,
            10_000,
          );
          assert.equal(record.json.state, "RUNNING", `${m.name}: ${record.text}`);
        }
      }
      console.log(
        `plugin failover: outage ${outageMs} ms, reconnect ${reconnectMs} ms, players counted ${streams.map((s) => `${s.server.id}=${s.present.length}`).join(" ")}`,
      );
    } finally {
      stopTraffic = true;
      await Promise.all(streams.map((s) => s.done));
    }
  });

  it("a transfer requested while the controller holding the daemon's stream is SIGKILLed completes (never lost), and the proxy keeps its players", async () => {
    // Three members again: the one killed above comes back on its data.
    if (killed) {
      await harness.launch(killed);
      const back = killed;
      await eventually(
        async () => {
          const reply = await back.call("GET", "/api/v1/cluster/members").catch(() => null);
          return reply?.status === 200;
        },
        `${back.name} serving again`,
        waitMs,
      );
      killed = null;
    }
    for (const [name, platform, count, start] of [
      ["pfproxy", "simulated-proxy", 1, 28420],
      ["pfgame", "simulated", 2, 28440],
    ] as const) {
      const created = await call("POST", "/api/v1/groups", {
        name,
        platform,
        minInstances: count,
        maxInstances: count,
        maxPlayers: 50,
        memoryMb: 64,
        portRange: { start, end: start + 15 },
      });
      assert.equal(created.status, 201, created.text);
    }
    const running = await eventually(
      async () => {
        const list = (await call("GET", "/api/v1/services")).json as { id: string; group: string; state: string }[];
        const up = list.filter((r) => (r.group === "pfproxy" || r.group === "pfgame") && r.state === "RUNNING" && processesOf(r.id).length === 1);
        return up.length === 3 ? up : null;
      },
      "a RUNNING proxy and two game servers",
      waitMs,
    );
    const proxy = running.find((r) => r.group === "pfproxy")!.id;
    const games = running.filter((r) => r.group === "pfgame").map((r) => r.id);
    const proxyPid = processesOf(proxy)[0];
    const proxyEnv = environOf(proxyPid);
    const relay = proxyEnv.get(INSTANCE_ENV.controllerUrl)!;
    const proxyToken = proxyEnv.get(INSTANCE_ENV.workloadToken)!;
    const gameToken = environOf(processesOf(games[0])[0]).get(INSTANCE_ENV.workloadToken)!;
    const plugin = async (token: string, method: string, path: string, body?: unknown) => {
      try {
        const res = await fetch(`${relay}${path}`, {
          method,
          headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
          body: body === undefined ? undefined : JSON.stringify(body),
          signal: AbortSignal.timeout(pluginRequestTimeoutMs),
        });
        const text = await res.text();
        return { status: res.status, json: text ? JSON.parse(text) : null };
      } catch {
        return { status: 0, json: null };
      }
    };
    type Listed = { uuid: string; name: string; instanceId: string | null; proxyInstanceId: string | null };
    const registry = async (): Promise<Listed[] | null> => {
      const res = await plugin(gameToken, "GET", "/api/plugin/players");
      return res.status === 200 ? (res.json as Listed[]) : null;
    };
    /** The console lines a surviving controller holds for an instance (its backlog), for diagnostics. */
    const consoleBacklog = async (id: string): Promise<string[]> => {
      try {
        const member = live()[0];
        const ticket = (await member.call("POST", `/api/v1/services/${id}/console/ticket`)).json.ticket as string;
        const stream = await openSse(`${member.process!.url}/api/v1/services/${id}/console?ticket=${ticket}`);
        await sleep(2_000);
        stream.close();
        return stream.frames.filter((f) => f.event === "console").map((f) => String(frameJson(f).line));
      } catch (err) {
        return [`(no console: ${(err as Error).message})`];
      }
    };
    const command = async (id: string, line: string) => assert.ok((await call("POST", `/api/v1/services/${id}/command`, { command: line })).status < 300);

    // Four players on the proxy, each placed on a game server by a transfer the proxy carries out.
    const names = ["fa", "fb", "fc", "fd"];
    for (const name of names) await command(proxy, `players join ${name}`);
    for (const name of names) await command(proxy, `players transfer ${name} pfgame`);
    const placed: Listed[] = await eventually(
      async () => {
        const list = await registry();
        const ours = list?.filter((p) => names.includes(p.name)) ?? [];
        return ours.length === 4 && ours.every((p) => p.proxyInstanceId === proxy && games.includes(p.instanceId ?? "")) ? ours : null;
      },
      "four players held by the proxy, each on a game server",
      waitMs,
    );

    // Each player is sent to the other game server while the controller holding the daemon's stream
    // (the relay's controller, which also holds the proxy's plugin event stream) is SIGKILLed.
    const holderId = await eventually(sessionControllerId, "the daemon's session", waitMs);
    let victim: ClusterMemberProcess | null = null;
    for (const m of live()) if ((await controllerIdOf(m)) === holderId) victim = m;
    assert.ok(victim, `a member is controller ${holderId}`);
    const targetOf = new Map(placed.map((p) => [p.uuid, games.find((g) => g !== p.instanceId)!]));
    const requested = new Map<string, number>();
    const request = async (uuid: string) => {
      // As the plugin client would: a request without an answer is sent again; a 409 ALREADY_ON_TARGET means it arrived.
      for (let attempt = 0; attempt < 30; attempt++) {
        const res = await plugin(proxyToken, "POST", "/api/plugin/transfer", { playerUuid: uuid, targetInstanceId: targetOf.get(uuid) });
        if (res.status === 202 || (res.status === 409 && res.json?.error?.code === "ALREADY_ON_TARGET")) {
          requested.set(uuid, Date.now());
          return res.status;
        }
        assert.ok(res.status === 0 || res.status >= 500, `transfer of ${uuid}: ${res.status} ${JSON.stringify(res.json)}`);
        await sleep(1_000);
      }
      assert.fail(`transfer of ${uuid} never accepted`);
    };
    const killedAtMs = Date.now();
    const killedOutput = new Map<string, string>();
    const [statuses] = await Promise.all([
      Promise.all(placed.map((p, i) => sleep(i * 40).then(() => request(p.uuid)))),
      sleep(50).then(async () => {
        const output = victim.process?.output;
        await harness.kill9(victim);
        if (output) killedOutput.set(victim.name, output());
      }),
    ]);
    victim.process = null;
    killed = victim;
    const arrivedAt = new Map<string, number>();
    try {
      await eventually(
        async () => {
          const list = await registry();
          for (const p of list ?? []) if (targetOf.get(p.uuid) === p.instanceId && !arrivedAt.has(p.uuid)) arrivedAt.set(p.uuid, Date.now());
          return arrivedAt.size === placed.length;
        },
        () => `every player on the other game server (arrived: ${arrivedAt.size}/${placed.length})`,
        { timeoutMs: waitMs, intervalMs: 100 },
      );
    } catch (err) {
      // What the proxy and the controllers said about the transfers, for the failure's reader.
      for (const id of [proxy, ...games]) console.log(`---- console of ${id}\n${(await consoleBacklog(id)).join("\n")}`);
      for (const m of members) {
        const lines = (m.process?.output() ?? killedOutput.get(m.name) ?? "").split("\n").filter((l) => /[Tt]ransfer|plugin stream/.test(l));
        console.log(`---- ${m.name}: transfer log lines\n${lines.slice(-60).join("\n")}`);
      }
      throw err;
    }
    const latencies = placed.map((p) => arrivedAt.get(p.uuid)! - requested.get(p.uuid)!).sort((a, b) => a - b);
    const sinceKill = Math.max(...[...arrivedAt.values()].map((t) => t - killedAtMs));
    console.log(
      `transfers across the SIGKILL of ${victim.name} (${holderId}): answers ${statuses.join(",")}; accepted → arrived ${latencies.join(", ")} ms; ` +
        `all arrived ${sinceKill} ms after the kill`,
    );

    // The proxy kept its players: same process, all four held, its count on every survivor.
    assert.deepEqual(processesOf(proxy), [proxyPid], "the proxy still runs as the same process");
    const finalView = await registry();
    assert.ok(finalView);
    for (const p of placed) {
      const now: Listed | undefined = finalView.find((x) => x.uuid === p.uuid);
      assert.equal(now?.proxyInstanceId, proxy, `${p.name} is still held by the proxy`);
      assert.equal(now?.instanceId, targetOf.get(p.uuid), `${p.name} is on its target`);
    }
    for (const m of live()) {
      await eventually(
        async () => (await m.call("GET", `/api/v1/services/${proxy}`)).json?.playerCount === 4,
        `${m.name}: the proxy counts its four players`,
        waitMs,
      );
      // The owner writes the counts from the registry (at once, or at its next pass when the
      // controller that handled a move died before reporting it).
      let counts: number[] = [];
      await eventually(
        async () => {
          counts = await Promise.all(games.map(async (g) => (await m.call("GET", `/api/v1/services/${g}`)).json?.playerCount as number));
          return counts.reduce((a, b) => a + b, 0) === 4 && counts.every((c, i) => c === finalView.filter((p) => p.instanceId === games[i]).length);
        },
        () => `${m.name}: four players on the game servers, as the registry has them (${counts.join(", ")})`,
        waitMs,
      );
    }
    // Nothing left pending: every transfer ended (completed), none waits to be delivered.
    await eventually(async () => (await redisClient.keys("cloud:v1:transfer:*")).length === 0, "no pending transfer records", waitMs);
  });
});
