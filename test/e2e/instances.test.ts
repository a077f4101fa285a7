// Instances for real: a controller (in this process, real HTTP and gRPC on 127.0.0.1), two
// `cloud-daemon` child processes joined with node tokens, and simulated game servers as their
// children. Checked: a group of min 3 reaches 3 RUNNING spread over both nodes; console lines arrive
// over SSE and a command reaches stdin; a killed process is CRASHED with a crash record and
// replaced; 3 quick crashes pause the group and resume restarts it; a drained node gets nothing
// new; stop and force-stop; STATIC ids and MANUAL explicit starts; kill -9 of a daemon makes its
// node UNREACHABLE then OFFLINE and its instances come back on the other node; start pacing keeps
// at most scheduler.maxStartingPerNode instances starting per node while a large group comes up.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { pidOfInstance } from "../support/instance-processes.js";
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
import { eventually } from "../support/wait.js";

const waitMs = 45_000;
const offlineGraceMs = 3_000;
/** scheduler.maxStartingPerNode of this suite's controller: low, so that start pacing is exercised. */
const startingPerNodeMax = 2;

interface Instance {
  id: string;
  group: string;
  node: string;
  state: string;
  port: number;
  playerCount: number;
}

/** The daemon's instance directory root (`workDir: work` next to its `dataDir`). */
function daemonWorkDir(daemon: DaemonProcess): string {
  return join(daemon.dataDir, "..", "work");
}

describe("instances on real daemons", { timeout: 300_000 }, () => {
  let c: GatewayController;
  const daemons: DaemonProcess[] = [];
  const nodeIds: string[] = [];

  const list = async (query = ""): Promise<Instance[]> => (await api(c, "GET", `/api/v1/services${query}`)).json as Instance[];
  const running = async (group: string) => (await list(`?group=${group}&state=RUNNING`)).filter((i) => i.group === group);
  const untilRunning = (group: string, count: number, what: string) =>
    eventually(
      async () => {
        const r = await running(group);
        return r.length === count ? r : null;
      },
      `${count} RUNNING of ${group}: ${what}\n${daemons.map((d) => d.output().slice(-2_000)).join("\n")}`,
      waitMs,
    );
  const stateOf = async (id: string) => ((await api(c, "GET", `/api/v1/services/${id}`)).json as Instance).state;

  before(async () => {
    c = await startGatewayController({
      tuning: { heartbeatIntervalMs: 500 },
      scheduler: {
        evaluationIntervalMs: 1_000,
        nodeTimeouts: { offlineGraceMs },
        instanceTimeouts: { stopTimeoutMs: 10_000 },
        startingPerNodeMax,
      },
    });
    for (let i = 0; i < 2; i++) {
      const { token } = await createToken(c);
      daemons.push(spawnDaemon([c.grpcAddress], token, { maxMemoryMb: 2048 }));
    }
    await eventually(() => eventsOf(c, "NODE_CONNECTED").length >= 2, "two daemons connected", waitMs);
    nodeIds.push(...new Set(eventsOf(c, "NODE_CONNECTED").map((e) => String(e.data.nodeId))));
  });

  after(async () => {
    for (const d of daemons) await d.stop();
    await c?.stop();
    cleanupDirs();
  });

  it("a DYNAMIC group of min 3 reaches 3 RUNNING spread over both nodes", async () => {
    const created = await api(c, "POST", "/api/v1/groups", {
      name: "lobby",
      platform: "simulated",
      scalingMode: "DYNAMIC",
      minInstances: 3,
      maxInstances: 6,
      memoryMb: 128,
      maxPlayers: 20,
      portRange: { start: 21000, end: 21100 },
    });
    assert.equal(created.status, 201, JSON.stringify(created.json));
    const up = await untilRunning("lobby", 3, "after create");
    assert.deepEqual(new Set(up.map((i) => i.node)), new Set(nodeIds), "spread over both nodes");
    assert.equal(new Set(up.map((i) => `${i.node}:${i.port}`)).size, 3, "ports unique per node");
    const group = (await api(c, "GET", "/api/v1/groups/lobby")).json;
    assert.equal(group.runningInstances, 3);
    assert.equal(group.schedulingIssue, null);
  });

  it("console lines arrive over SSE and a command reaches the process's stdin", async () => {
    const [target] = await running("lobby");
    const ticket = (await api(c, "POST", `/api/v1/services/${target.id}/console/ticket`)).json;
    const controller = new AbortController();
    const res = await fetch(`${c.url}/api/v1/services/${target.id}/console?ticket=${ticket.ticket}`, { signal: controller.signal });
    assert.equal(res.headers.get("content-type")?.startsWith("text/event-stream"), true);
    const reader = res.body!.getReader();
    let text = "";
    const sent = await api(c, "POST", `/api/v1/services/${target.id}/command`, { command: "say hello-e2e" });
    assert.equal(sent.status, 200, JSON.stringify(sent.json));
    const deadline = Date.now() + 20_000;
    while (!text.includes("[Server] hello-e2e") && Date.now() < deadline) {
      const { value, done } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
    controller.abort();
    assert.match(text, /event: console/);
    assert.match(text, /Done \(/, "the backlog holds the start-up lines");
    assert.match(text, /\[Server\] hello-e2e/, "the command reached stdin and its output came back");
    const reused = await fetch(`${c.url}/api/v1/services/${target.id}/console?ticket=${ticket.ticket}`);
    assert.match(await reused.text(), /event: error\ndata: \{"message":"Unauthorized"\}/, "a ticket works once");
  });

  it("a killed process is CRASHED with a crash record and replaced", async () => {
    const [victim] = await running("lobby");
    const pid = pidOfInstance(victim.id);
    assert.ok(pid, `process of ${victim.id} found`);
    process.kill(pid, "SIGKILL");
    await eventually(async () => (await stateOf(victim.id)) === "CRASHED", `${victim.id} CRASHED`, waitMs);
    // The crash record and the CRASHED state are written side by side.
    const record = await eventually(
      async () => {
        const crashes = (await api(c, "GET", "/api/v1/crashes?group=lobby")).json as {
          instanceId: string;
          classification: string;
          uptimeMs: number;
          logTail: string[];
        }[];
        return crashes.find((r) => r.instanceId === victim.id);
      },
      "crash record written",
      waitMs,
    );
    assert.equal(record.classification, "OUT_OF_MEMORY", "a SIGKILL the daemon did not send looks like the OOM killer");
    assert.ok(
      record.logTail.some((l) => l.includes("Done (")),
      "the log tail holds the console lines",
    );
    assert.ok(eventsOf(c, "INSTANCE_CRASHED").some((e) => e.data.instanceId === victim.id));
    const replaced = await untilRunning("lobby", 3, "replacement");
    assert.ok(!replaced.some((i) => i.id === victim.id));
  });

  it("three quick crashes pause the group; resume starts it again", async () => {
    for (const victim of (await running("lobby")).slice(0, 2)) {
      await api(c, "POST", `/api/v1/services/${victim.id}/command`, { command: "crash 7" });
    }
    await eventually(async () => (await api(c, "GET", "/api/v1/groups/lobby")).json.paused === true, "paused after 3 crashes", waitMs);
    assert.ok(eventsOf(c, "GROUP_CRASH_LOOP").some((e) => e.data.group === "lobby" && e.data.crashCount === 3));
    const paused = (await api(c, "GET", "/api/v1/groups/lobby")).json;
    assert.equal(paused.schedulingIssue?.code, "CRASH_LOOP", JSON.stringify(paused.schedulingIssue));
    assert.match(
      paused.schedulingIssue.message,
      /^paused: 3 crashes within 300 s; the last: lobby-\w+ on \S+: \w+ \(exit 7\)/,
      "the issue names the last crash",
    );
    const metrics = await (await fetch(`${c.url}/metrics`)).text();
    assert.match(metrics, /cloud_scheduler_crash_loops_total 1/);
    // Paused: nothing new is scheduled (a replacement started before the third crash may finish starting).
    const known = new Set((await list("?group=lobby")).map((i) => i.id));
    await new Promise((r) => setTimeout(r, 2_500));
    assert.deepEqual(
      (await list("?group=lobby")).filter((i) => !known.has(i.id)),
      [],
      "no instance scheduled while paused",
    );
    const start = await api(c, "POST", "/api/v1/groups/lobby/start");
    assert.equal(start.json.count, 0);
    assert.match(start.json.reason, /paused/);
    const resumed = await api(c, "POST", "/api/v1/groups/lobby/resume");
    assert.equal(resumed.status, 200);
    assert.equal(resumed.json.paused, false);
    assert.equal(resumed.json.schedulingIssue, null, "the crash-loop issue goes with the pause");
    await untilRunning("lobby", 3, "after resume");
  });

  it("a drained node gets no new instance", async () => {
    const [drained, other] = nodeIds;
    assert.equal((await api(c, "POST", `/api/v1/nodes/${drained}/drain`)).status, 200);
    const before = new Set((await list("?group=lobby")).map((i) => i.id));
    assert.equal((await api(c, "PATCH", "/api/v1/groups/lobby", { minInstances: 5 })).status, 200);
    const up = await untilRunning("lobby", 5, "scale to 5 with one node drained");
    const added = up.filter((i) => !before.has(i.id));
    assert.equal(added.length, 2);
    assert.ok(
      added.every((i) => i.node === other),
      `new instances on ${other} only: ${JSON.stringify(added)}`,
    );
    assert.equal((await api(c, "POST", `/api/v1/nodes/${drained}/undrain`)).status, 200);
    assert.equal((await api(c, "PATCH", "/api/v1/groups/lobby", { minInstances: 3, maxInstances: 5 })).status, 200);
  });

  it("stop and force-stop end instances; the scheduler replaces them", async () => {
    const [graceful, forced] = await running("lobby");
    const stopped = await api(c, "POST", `/api/v1/services/${graceful.id}/stop`);
    assert.equal(stopped.status, 202, JSON.stringify(stopped.json));
    const killed = await api(c, "POST", `/api/v1/services/${forced.id}/force-stop`);
    assert.equal(killed.status, 202);
    await eventually(async () => (await stateOf(graceful.id)) === "STOPPED", "graceful stop reaches STOPPED", waitMs);
    await eventually(async () => (await stateOf(forced.id)) === "STOPPED", "force-stop reaches STOPPED", waitMs);
    assert.equal((await api(c, "POST", `/api/v1/services/${graceful.id}/stop`)).status, 409, "a stopped instance cannot be stopped again");
    const audit = (await api(c, "GET", "/api/v1/audit?action=instance.force-stop")).json;
    assert.ok(JSON.stringify(audit).includes(forced.id), "force-stop audited");
    const up = await eventually(
      async () => {
        const r = await running("lobby");
        return r.length >= 3 ? r : null;
      },
      "replaced after stops",
      waitMs,
    );
    assert.ok(!up.some((i) => i.id === graceful.id || i.id === forced.id));
  });

  it("STATIC groups keep their ids; MANUAL groups start only when told", async () => {
    await api(c, "POST", "/api/v1/groups", {
      name: "hub",
      platform: "simulated",
      scalingMode: "STATIC",
      minInstances: 2,
      memoryMb: 128,
      portRange: { start: 22000, end: 22010 },
    });
    const hub = await untilRunning("hub", 2, "static group");
    assert.deepEqual(hub.map((i) => i.id).sort(), ["hub-1", "hub-2"]);
    await api(c, "POST", "/api/v1/groups", {
      name: "event",
      platform: "simulated",
      scalingMode: "MANUAL",
      minInstances: 1,
      maxInstances: 2,
      memoryMb: 128,
      portRange: { start: 23000, end: 23010 },
    });
    await new Promise((r) => setTimeout(r, 2_500));
    assert.equal((await list("?group=event")).length, 0, "MANUAL starts nothing on its own");
    const start = await api(c, "POST", "/api/v1/groups/event/start");
    assert.deepEqual(start.json, { count: 1 });
    await untilRunning("event", 1, "explicit start");
    assert.equal((await api(c, "DELETE", "/api/v1/groups/event")).status, 204);
    await eventually(async () => (await list("?group=event")).every((i) => i.state === "STOPPED"), "deleted group's instances stop", waitMs);
  });

  it("start pacing: a group larger than the start slots comes up a few at a time per node, with no scheduling issue", async () => {
    const created = await api(c, "POST", "/api/v1/groups", {
      name: "paced",
      platform: "simulated",
      scalingMode: "DYNAMIC",
      minInstances: 8,
      maxInstances: 8,
      memoryMb: 128,
      maxPlayers: 0,
      portRange: { start: 21200, end: 21300 },
    });
    assert.equal(created.status, 201, JSON.stringify(created.json));
    await untilRunning("paced", 8, "paced group");
    assert.equal((await api(c, "GET", "/api/v1/groups/paced")).json.schedulingIssue, null);
    // Replay the group's state changes: per node, the instances between their first change
    // (SCHEDULED -> PREPARING) and leaving the starting states, never more than the slots.
    const changes = eventsOf(c, "INSTANCE_STATE_CHANGED").filter((e) => e.data.group === "paced");
    const starting = new Map<string, Set<string>>();
    let mostStarting = 0;
    let runningSeen = 0;
    let preparedAfterARunning = 0;
    for (const change of changes) {
      const { instanceId, nodeId, newState } = change.data as { instanceId: string; nodeId: string; newState: string };
      const onNode = starting.get(nodeId) ?? new Set<string>();
      starting.set(nodeId, onNode);
      if (newState === "PREPARING" || newState === "STARTING") {
        if (newState === "PREPARING" && runningSeen > 0) preparedAfterARunning++;
        onNode.add(instanceId);
      } else {
        onNode.delete(instanceId);
      }
      if (newState === "RUNNING") runningSeen++;
      mostStarting = Math.max(mostStarting, onNode.size);
    }
    assert.ok(mostStarting <= startingPerNodeMax, `at most ${startingPerNodeMax} starting per node, saw ${mostStarting}`);
    assert.ok(preparedAfterARunning >= 8 - 2 * startingPerNodeMax, `instances waited for slots: ${preparedAfterARunning} dispatched after the first RUNNING`);
    assert.equal((await api(c, "DELETE", "/api/v1/groups/paced")).status, 204);
    await eventually(async () => (await list("?group=paced")).every((i) => i.state === "STOPPED"), "paced group's instances stop", waitMs);
  });

  it("template layers are unpacked in the group's order, variables substituted, before the server starts", async () => {
    for (const [name, motd] of [
      ["e2e-base", "from base {{greeting}}"],
      ["e2e-top", "from top {{greeting}}"],
    ]) {
      assert.equal((await api(c, "POST", "/api/v1/templates", { name })).status, 201);
      assert.equal((await api(c, "PUT", `/api/v1/templates/${name}/files/content`, { path: "motd.txt", content: motd })).status, 200);
      assert.equal((await api(c, "PUT", `/api/v1/templates/${name}/files/content`, { path: `${name}.txt`, content: name })).status, 200);
      assert.equal((await api(c, "PUT", `/api/v1/templates/${name}/variables`, { variables: { greeting: "hello" } })).status, 200);
    }
    await api(c, "POST", "/api/v1/groups", {
      name: "themed",
      platform: "simulated",
      minInstances: 1,
      memoryMb: 128,
      templates: ["e2e-base", "e2e-top"],
      portRange: { start: 23100, end: 23110 },
    });
    const [instance] = await untilRunning("themed", 1, "templated group");
    const daemon = daemons.find((d) => readFileSync(join(d.dataDir, "node-id"), "utf8").trim() === instance.node)!;
    const workDir = join(daemonWorkDir(daemon), "dynamic", instance.id);
    assert.equal(readFileSync(join(workDir, "motd.txt"), "utf8"), "from top hello", "the later layer wins, variables substituted");
    assert.equal(readFileSync(join(workDir, "e2e-base.txt"), "utf8"), "e2e-base");
    assert.equal(readFileSync(join(workDir, "e2e-top.txt"), "utf8"), "e2e-top");
  });

  it("kill -9 of a daemon: its node goes UNREACHABLE, then OFFLINE, and its instances come back on the other node", async () => {
    // The victim: the daemon of a node that runs lobby instances (its identity file names its node).
    const lobbyNodes = new Set((await running("lobby")).map((i) => i.node));
    const nodeOf = (d: DaemonProcess) => readFileSync(join(d.dataDir, "node-id"), "utf8").trim();
    const victimIndex = daemons.findIndex((d) => lobbyNodes.has(nodeOf(d)));
    assert.ok(victimIndex >= 0, "a daemon runs lobby instances");
    const victimNode = nodeOf(daemons[victimIndex]);
    const survivor = nodeIds.find((id) => id !== victimNode)!;
    const onVictim = (await running("lobby")).filter((i) => i.node === victimNode);
    assert.ok(onVictim.length > 0, "the victim node runs lobby instances");
    await daemons[victimIndex].kill9();
    await eventually(async () => (await api(c, "GET", `/api/v1/nodes/${victimNode}`)).json.state === "UNREACHABLE", "UNREACHABLE", waitMs);
    await eventually(async () => (await api(c, "GET", `/api/v1/nodes/${victimNode}`)).json.state === "OFFLINE", "OFFLINE after the grace period", waitMs);
    for (const lost of onVictim) await eventually(async () => (await stateOf(lost.id)) === "CRASHED", `${lost.id} CRASHED (node lost)`, waitMs);
    const up = await untilRunning("lobby", 3, "back on the survivor");
    assert.ok(
      up.every((i) => i.node === survivor),
      "every lobby instance runs on the survivor",
    );
    const lostCrash = await eventually(
      async () =>
        ((await api(c, "GET", "/api/v1/crashes?group=lobby")).json as { instanceId: string; classification: string }[]).find(
          (r) => r.instanceId === onVictim[0].id,
        ),
      "crash record of the lost instance",
      waitMs,
    );
    assert.equal(lostCrash.classification, "NODE_LOST");
    for (const lost of onVictim) assert.equal(pidOfInstance(lost.id), null, `${lost.id} no longer runs (its server left with its daemon)`);
  });
});
