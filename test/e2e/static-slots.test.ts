// STATIC instances keep their identity, for real: a controller in this process, two `cloud-daemon`
// child processes, simulated servers. Each step writes a file into the instances' persistent
// directories (`static/<group>/<id>` under the daemon's workDir) and checks that after the step the
// group has the same ids, on the same nodes, with those files still there and no other instance
// record: an operator's stop (the slot stays STOPPED until the group is started), a force-stop, a
// crash, a drained node (the slot waits for its node), a lost node (kill -9 of its daemon; the slot
// waits until the daemon is back) and a controller restart (a stopped slot stays stopped and
// starts again on its node).
import assert from "node:assert/strict";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { freePorts } from "../cluster/support/free-ports.js";
import { pidOfInstance } from "../support/instance-processes.js";
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
const offlineGraceMs = 3_000;
const evaluationIntervalMs = 1_000;
/** Long enough for several evaluations: a wrong replacement would have been scheduled by then. */
const settleMs = 3_000;
const group = "vault";
const ids = [`${group}-1`, `${group}-2`];

interface Instance {
  id: string;
  node: string;
  state: string;
}

describe("STATIC instances keep their ids and directories", { timeout: 400_000 }, () => {
  let c: GatewayController;
  let grpcPort: number;
  const controllerDir = tempDir("cloud-e2e-static-controller-");
  const daemons: DaemonProcess[] = [];
  const tokens: string[] = [];
  /** Node id → index in `daemons`. */
  const daemonOfNode = new Map<string, number>();
  /** Where each slot ran first: it must never move. */
  const homes = new Map<string, string>();
  let step = 0;

  const scheduler = { evaluationIntervalMs, nodeTimeouts: { offlineGraceMs }, instanceTimeouts: { stopTimeoutMs: 10_000 } };
  const list = async (): Promise<Instance[]> =>
    ((await api(c, "GET", `/api/v1/services?group=${group}`)).json as Instance[]).sort((a, b) => (a.id < b.id ? -1 : 1));
  const stateOf = async (id: string) => ((await api(c, "GET", `/api/v1/services/${id}`)).json as Instance).state;
  const groupRecord = async () => (await api(c, "GET", `/api/v1/groups/${group}`)).json;
  const nodeIdOf = (d: DaemonProcess) => readFileSync(join(d.dataDir, "node-id"), "utf8").trim();
  const dirOf = (id: string) => join(daemons[daemonOfNode.get(homes.get(id)!)!].dataDir, "..", "work", "static", group, id);
  const diagnostics = async () =>
    `${JSON.stringify(await list())}\n${JSON.stringify((await groupRecord()).schedulingIssue)}\n${daemons.map((d) => d.output().slice(-1_500)).join("\n")}`;

  /** Writes this step's file into each slot's directory; returns the file name. */
  function writeWorldData(): string {
    const name = `world-${++step}.dat`;
    for (const id of ids) writeFileSync(join(dirOf(id), name), `${id} step ${step}`);
    return name;
  }

  /** Both slots RUNNING under their ids on their first nodes, every earlier file there, no other record. */
  async function slotsIntact(what: string, files: string[]): Promise<void> {
    await eventually(
      async () => {
        const now = await list();
        return now.length === 2 && now.every((i) => i.state === "RUNNING") ? now : null;
      },
      `both slots RUNNING ${what}\n${await diagnostics()}`,
      waitMs,
    );
    const now = await list();
    assert.deepEqual(
      now.map((i) => i.id),
      ids,
      `only the slot ids ${what}`,
    );
    for (const i of now) {
      assert.equal(i.node, homes.get(i.id), `${i.id} on its node ${what}`);
      for (const file of files)
        assert.equal(readFileSync(join(dirOf(i.id), file), "utf8"), `${i.id} step ${file.match(/\d+/)![0]}`, `${file} of ${i.id} ${what}`);
      assert.ok(pidOfInstance(i.id), `${i.id} has a process ${what}`);
    }
    assert.equal((await groupRecord()).schedulingIssue, null, `no scheduling issue ${what}`);
  }

  /** For a while: no record but the two slots, `id` not RUNNING, and the group record's issue (if any). */
  async function staysDown(id: string, what: string): Promise<void> {
    await new Promise((r) => setTimeout(r, settleMs));
    const now = await list();
    assert.deepEqual(
      now.map((i) => i.id),
      ids,
      `no new id ${what}: ${JSON.stringify(now)}`,
    );
    const down = now.find((i) => i.id === id)!;
    assert.ok(down.state === "STOPPED" || down.state === "CRASHED", `${id} stays down ${what}: ${down.state}`);
    assert.equal(down.node, homes.get(id), `${id}'s record still names its node ${what}`);
    assert.equal(pidOfInstance(id), null, `${id} runs nowhere ${what}`);
  }

  before(async () => {
    [grpcPort] = await freePorts(1);
    c = await startGatewayController({ dataDir: controllerDir, grpcPort, tuning: { heartbeatIntervalMs: 500 }, scheduler });
    for (let i = 0; i < 2; i++) {
      tokens.push((await createToken(c)).token);
      daemons.push(spawnDaemon([c.grpcAddress], tokens[i], { maxMemoryMb: 2048 }));
    }
    await eventually(() => eventsOf(c, "NODE_CONNECTED").length >= 2, "two daemons connected", waitMs);
  });

  after(async () => {
    for (const d of daemons) await d.stop();
    await c?.stop();
    cleanupDirs();
  });

  it("a STATIC group of 2 runs vault-1 and vault-2, one per node, each in its own persistent directory", async () => {
    const created = await api(c, "POST", "/api/v1/groups", {
      name: group,
      platform: "simulated",
      scalingMode: "STATIC",
      minInstances: 2,
      memoryMb: 128,
      portRange: { start: 25000, end: 25010 },
    });
    assert.equal(created.status, 201, JSON.stringify(created.json));
    const up = await eventually(
      async () => {
        const now = await list();
        return now.length === 2 && now.every((i) => i.state === "RUNNING") ? now : null;
      },
      "2 RUNNING",
      waitMs,
    );
    assert.deepEqual(
      up.map((i) => i.id),
      ids,
    );
    for (const [index, d] of daemons.entries()) daemonOfNode.set(nodeIdOf(d), index);
    for (const i of up) homes.set(i.id, i.node);
    assert.equal(new Set(up.map((i) => i.node)).size, 2, "spread over both nodes");
    for (const id of ids) assert.ok(existsSync(dirOf(id)), `${dirOf(id)} exists`);
  });

  it("stop: the slot stays STOPPED, nothing replaces it, until the group is started; then it runs again on its directory", async () => {
    const file = writeWorldData();
    const [first] = ids;
    const stopped = await api(c, "POST", `/api/v1/services/${first}/stop`);
    assert.equal(stopped.status, 202, JSON.stringify(stopped.json));
    await eventually(async () => (await stateOf(first)) === "STOPPED", `${first} STOPPED`, waitMs);
    await staysDown(first, "after an operator's stop");
    const held = await groupRecord();
    assert.deepEqual(held.stoppedInstances, [first]);
    assert.equal(held.runningInstances, 1, "the stopped slot is not running");
    assert.equal(held.schedulingIssue, null, "an operator's stop is not a scheduling issue");
    assert.equal((await api(c, "POST", `/api/v1/services/${first}/stop`)).status, 409, "a stopped slot cannot be stopped again");

    const start = await api(c, "POST", `/api/v1/groups/${group}/start`);
    assert.deepEqual(start.json, { count: 1 });
    await slotsIntact("after the group was started again", [file]);
    assert.deepEqual((await groupRecord()).stoppedInstances, []);
    assert.deepEqual((await api(c, "POST", `/api/v1/groups/${group}/start`)).json, { count: 0, reason: "STATIC group already has 2 of 2" });
  });

  it("force-stop: the slot is respawned under its id on its directory", async () => {
    const file = writeWorldData();
    const [first] = ids;
    const pid = pidOfInstance(first);
    assert.equal((await api(c, "POST", `/api/v1/services/${first}/force-stop`)).status, 202);
    await eventually(() => pidOfInstance(first) !== pid && pidOfInstance(first) !== null, `${first} respawned\n${await diagnostics()}`, waitMs);
    await slotsIntact("after a force-stop", [file]);
    assert.deepEqual((await groupRecord()).stoppedInstances, [], "a force-stop does not hold the slot");
  });

  it("crash: the slot restarts under its id on its directory", async () => {
    const file = writeWorldData();
    const second = ids[1];
    const pid = pidOfInstance(second)!;
    process.kill(pid, "SIGKILL");
    await eventually(() => pidOfInstance(second) !== pid && pidOfInstance(second) !== null, `${second} restarted\n${await diagnostics()}`, waitMs);
    await slotsIntact("after a crash", [file]);
  });

  it("node drain: the slot's instance keeps running; once it ends it waits for its drained node instead of moving, and comes back on undrain", async () => {
    const file = writeWorldData();
    const [first] = ids;
    const node = homes.get(first)!;
    const pid = pidOfInstance(first);
    assert.equal((await api(c, "POST", `/api/v1/nodes/${node}/drain`)).status, 200);
    await new Promise((r) => setTimeout(r, settleMs));
    assert.equal(pidOfInstance(first), pid, "a drain does not stop running instances");
    assert.equal((await api(c, "POST", `/api/v1/services/${first}/command`, { command: "crash 7" })).status, 200);
    await eventually(async () => (await stateOf(first)) === "CRASHED", `${first} CRASHED`, waitMs);
    await staysDown(first, "while its node is drained");
    const issue = (await groupRecord()).schedulingIssue;
    assert.equal(issue?.code, "STATIC_NODE_UNAVAILABLE", JSON.stringify(issue));
    assert.equal(issue.message, `${first} waits for node ${node}, which holds its directory: the node is DRAINING`);
    assert.equal((await api(c, "POST", `/api/v1/nodes/${node}/undrain`)).status, 200);
    await slotsIntact("after the node was undrained", [file]);
  });

  it("node loss: kill -9 of a daemon; the slot waits for its node (OFFLINE) and comes back when the daemon does", async () => {
    const file = writeWorldData();
    const second = ids[1];
    const node = homes.get(second)!;
    const index = daemonOfNode.get(node)!;
    await daemons[index].kill9();
    await eventually(async () => (await api(c, "GET", `/api/v1/nodes/${node}`)).json.state === "OFFLINE", "OFFLINE after the grace period", waitMs);
    await eventually(async () => (await stateOf(second)) === "CRASHED", `${second} CRASHED (node lost)`, waitMs);
    await staysDown(second, "while its node is OFFLINE");
    const issue = (await groupRecord()).schedulingIssue;
    assert.equal(issue?.code, "STATIC_NODE_UNAVAILABLE", JSON.stringify(issue));
    assert.equal(issue.message, `${second} waits for node ${node}, which holds its directory: the node is OFFLINE`);
    // The same daemon (its directory, its identity) comes back.
    daemons[index] = spawnDaemon([c.grpcAddress], tokens[index], { maxMemoryMb: 2048 }, daemons[index].dir);
    await slotsIntact("after the daemon came back", [file]);
  });

  it("controller restart: a stopped slot stays stopped and the restarted controller knows its node; a crash after the restart refills the slot", async () => {
    const file = writeWorldData();
    const [first, second] = ids;
    assert.equal((await api(c, "POST", `/api/v1/services/${first}/stop`)).status, 202);
    await eventually(async () => (await stateOf(first)) === "STOPPED", `${first} STOPPED`, waitMs);
    await c.stop();
    c = await startGatewayController({ dataDir: controllerDir, grpcPort, tuning: { heartbeatIntervalMs: 500 }, scheduler });
    await eventually(() => eventsOf(c, "NODE_CONNECTED").length >= 2, "both daemons reconnected", waitMs);
    await staysDown(first, "after the controller restarted");
    assert.deepEqual((await groupRecord()).stoppedInstances, [first]);
    assert.deepEqual((await api(c, "POST", `/api/v1/groups/${group}/start`)).json, { count: 1 });
    await slotsIntact("after a start on the restarted controller", [file]);

    const pid = pidOfInstance(second)!;
    process.kill(pid, "SIGKILL");
    await eventually(() => pidOfInstance(second) !== pid && pidOfInstance(second) !== null, `${second} restarted\n${await diagnostics()}`, waitMs);
    await slotsIntact("after a crash on the restarted controller", [file]);
    assert.equal(eventsOf(c, "INSTANCE_STATE_CHANGED").filter((e) => !ids.includes(String(e.data.instanceId))).length, 0, "no other instance ever");
  });
});
