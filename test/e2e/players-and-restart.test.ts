// Players and controller restarts, with a real daemon and simulated servers: players joining through
// the plugin API fill a DYNAMIC group, which scales up; a controller restart adopts the running
// instances — same ids, same processes, nothing started again. The restarted controller's player
// registry (the development profile's memory store) starts empty under a new epoch: the simulated
// servers' SDK sees it on its reconnected event stream and reports its players again, so they are
// listed on their instance once more and a later leave counts.
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { serverProcesses } from "../support/instance-processes.js";
import { freePorts } from "../cluster/support/free-ports.js";
import {
  api,
  cleanupDirs,
  createToken,
  eventsOf,
  spawnDaemon,
  startGatewayController,
  tempDir,
  type DaemonProcess,
  type GatewayController,
} from "../gateway/harness.js";
import { eventually } from "../support/wait.js";

const waitMs = 45_000;

interface Instance {
  id: string;
  node: string;
  state: string;
  playerCount: number;
}

/** The pid of each instance's process. */
const serverPidOf = () => new Map([...serverProcesses()].map(([id, pids]) => [id, pids[0]]));

describe("players and controller restarts", { timeout: 240_000 }, () => {
  const controllers: GatewayController[] = [];
  const daemons: DaemonProcess[] = [];
  after(async () => {
    for (const d of daemons) await d.stop();
    for (const c of controllers) await c.stop();
    cleanupDirs();
  });

  it("players fill a DYNAMIC group, which scales up; a controller restart restarts nothing", async () => {
    const [grpcPort] = await freePorts(1);
    const dataDir = tempDir("cloud-e2e-restart-");
    const scheduler = { evaluationIntervalMs: 1_000 };
    const first = await startGatewayController({ dataDir, grpcPort, scheduler });
    controllers.push(first);
    const daemon = spawnDaemon([first.grpcAddress], (await createToken(first)).token, { maxMemoryMb: 2048 });
    daemons.push(daemon);
    await eventually(() => eventsOf(first, "NODE_CONNECTED")[0], `daemon connected\n${daemon.output()}`, waitMs);

    await api(first, "POST", "/api/v1/groups", {
      name: "arena",
      platform: "simulated",
      scalingMode: "DYNAMIC",
      minInstances: 1,
      maxInstances: 3,
      maxPlayers: 2,
      memoryMb: 128,
      portRange: { start: 24000, end: 24010 },
    });
    const instancesOf = async (c: GatewayController) => (await api(c, "GET", "/api/v1/services?group=arena")).json as Instance[];
    const [only] = await eventually(
      async () => {
        const list = (await instancesOf(first)).filter((i) => i.state === "RUNNING");
        return list.length === 1 ? list : null;
      },
      "one RUNNING",
      waitMs,
    );

    for (const name of ["alice", "bob"]) await api(first, "POST", `/api/v1/services/${only.id}/command`, { command: `players join ${name}` });
    await eventually(async () => (await api(first, "GET", `/api/v1/services/${only.id}`)).json.playerCount === 2, "playerCount 2 from the plugin API", waitMs);
    assert.equal(eventsOf(first, "PLAYER_CONNECTED").filter((e) => e.data.instanceId === only.id).length, 2);
    const group = (await api(first, "GET", "/api/v1/groups/arena")).json;
    assert.equal(group.totalPlayers, 2);
    // 2 players on 2 slots is above the 80 % scale-up fill: a second instance starts.
    const scaled = await eventually(
      async () => {
        const list = (await instancesOf(first)).filter((i) => i.state === "RUNNING");
        return list.length === 2 ? list : null;
      },
      "scaled up to 2",
      waitMs,
    );
    await api(first, "POST", `/api/v1/services/${only.id}/command`, { command: "players leave bob" });
    await eventually(async () => (await api(first, "GET", `/api/v1/services/${only.id}`)).json.playerCount === 1, "playerCount 1 after a leave", waitMs);

    const pidsBefore = serverPidOf();
    const idsBefore = scaled.map((i) => i.id).sort();
    await first.stop();
    const second = await startGatewayController({ dataDir, grpcPort, scheduler });
    controllers.push(second);
    await eventually(() => eventsOf(second, "NODE_CONNECTED")[0], `daemon reconnected\n${daemon.output()}`, waitMs);
    // A few evaluation intervals: an adoption gone wrong would replace or restart something by now.
    await new Promise((r) => setTimeout(r, 4_000));
    const after = await instancesOf(second);
    assert.deepEqual(after.map((i) => i.id).sort(), idsBefore, "the same instances, no new one");
    assert.ok(
      after.every((i) => i.state === "RUNNING"),
      JSON.stringify(after),
    );
    const pidsAfter = serverPidOf();
    for (const id of idsBefore) assert.equal(pidsAfter.get(id), pidsBefore.get(id), `${id} is the same process`);
    assert.equal(eventsOf(second, "INSTANCE_STATE_CHANGED").length, 0, "no state changed across the restart");
    assert.equal((await api(second, "GET", `/api/v1/services/${only.id}`)).json.playerCount, 1, "players kept");

    // The registry healed: alice is listed again, on the instance she is on, and nowhere else.
    // A token of the instance's current start, as the start command carried.
    const startId = (await second.controller.services.instances.getDoc(only.id))?.startId;
    const workload = second.controller.services.credentials.issueWorkloadToken({ instanceId: only.id, group: "arena", node: only.node }, startId).token;
    const pluginPlayers = async () => {
      const res = await fetch(`${second.url}/api/plugin/players`, { headers: { authorization: `Bearer ${workload}` } });
      assert.equal(res.status, 200);
      return (await res.json()) as { uuid: string; name: string; instanceId: string | null; group: string | null }[];
    };
    const listed = await eventually(
      async () => {
        const list = await pluginPlayers();
        return list.length > 0 ? list : null;
      },
      `alice reported again after the restart\n${second.logs().slice(-4_000)}`,
      waitMs,
    );
    assert.deepEqual(
      listed.map((p) => [p.name, p.instanceId, p.group]),
      [["alice", only.id, "arena"]],
    );
    assert.equal(eventsOf(second, "PLAYER_CONNECTED").filter((e) => e.data.name === "alice").length, 1, "reported once");
    assert.equal((await api(second, "GET", `/api/v1/services/${only.id}`)).json.playerCount, 1, "the count follows the healed roster");
    assert.equal((await api(second, "GET", "/api/v1/groups/arena")).json.totalPlayers, 1);
    for (const other of idsBefore.filter((id) => id !== only.id))
      assert.equal((await api(second, "GET", `/api/v1/services/${other}`)).json.playerCount, 0, `${other} still empty`);
    // Known again, so a leave counts: before the registry healed it would have been a 404 and the count stuck at 1.
    await api(second, "POST", `/api/v1/services/${only.id}/command`, { command: "players leave alice" });
    await eventually(async () => (await api(second, "GET", `/api/v1/services/${only.id}`)).json.playerCount === 0, "playerCount 0 after the leave", waitMs);
    assert.deepEqual(await pluginPlayers(), []);
  });
});
