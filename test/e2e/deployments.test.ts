// Deployments for real: a controller in this process, two `cloud-daemon` child processes, simulated
// servers. A group of three rolls to a revision with a new template layer (pinned to its hash), with
// one instance serving a player drained before it stops and the player moved by the controller
// (a transfer to the holder, no hand-made move); a rolling restart
// replaces every instance; a revision whose template makes the server crash on boot fails the
// health gate and is rolled back automatically; a canary waits for its promotion beside the old
// revision and pauses and resumes; a rollback with restore brings the previous revision back.
// Throughout, a sampler checks that the group never has fewer than `desired - maxUnavailable`
// RUNNING instances nor more than `desired + maxSurge` counted ones.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { freePorts } from "../cluster/support/free-ports.js";
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

const waitMs = 90_000;
const group = "web";
const desired = 3;

interface Instance {
  id: string;
  node: string;
  state: string;
  deploymentRevision: number;
  playerCount: number;
}

const COUNTED = new Set(["SCHEDULED", "PREPARING", "STARTING", "RUNNING"]);

describe("deployments with real daemons", { timeout: 600_000 }, () => {
  let c: GatewayController;
  const daemons: DaemonProcess[] = [];
  const violations: string[] = [];
  let sampling = true;
  let sampler: Promise<void> | null = null;
  /** Set while a step may drop below the floor (a revision that cannot boot, a force-stop, a restore). */
  let expectGap = false;

  const instances = async (): Promise<Instance[]> => (await api(c, "GET", `/api/v1/services?group=${group}`)).json as Instance[];
  const live = async () => (await instances()).filter((i) => i.state !== "STOPPED" && i.state !== "CRASHED");
  /** The last deployment and instances read, for the failure messages. */
  let lastSeen = "";
  const deployment = async (revision: number) => {
    const json = (await api(c, "GET", `/api/v1/groups/${group}/deployments/${revision}`)).json;
    lastSeen = JSON.stringify(json);
    return json;
  };
  const diagnostics = () => `${lastSeen}\n${c.logs().slice(-3_000)}`;
  const finished = (revision: number, state: string) =>
    eventually(
      async () => {
        const d = await deployment(revision);
        return d.state === state && d.phase === "DONE" ? d : null;
      },
      () => `deployment ${revision} ${state}\n${diagnostics()}`,
      waitMs,
    );
  const allOf = (revision: number) =>
    eventually(
      async () => {
        const now = await live();
        lastSeen = JSON.stringify(now);
        return now.length === desired && now.every((i) => i.state === "RUNNING" && i.deploymentRevision === revision) ? now : null;
      },
      () => `${desired} RUNNING of revision ${revision}\n${diagnostics()}`,
      waitMs,
    );

  before(async () => {
    const [grpcPort] = await freePorts(1);
    c = await startGatewayController({
      grpcPort,
      tuning: { heartbeatIntervalMs: 500 },
      scheduler: { evaluationIntervalMs: 1_000, instanceTimeouts: { stopTimeoutMs: 10_000, drainTimeoutMs: 60_000 } },
    });
    for (let i = 0; i < 2; i++) daemons.push(spawnDaemon([c.grpcAddress], (await createToken(c)).token, { maxMemoryMb: 4096 }));
    await eventually(() => eventsOf(c, "NODE_CONNECTED").length >= 2, "two daemons connected", waitMs);
    for (const [name, files] of [
      ["plug", { "plugins/plug.txt": "plug 1" }],
      ["boom", { "simulated-crash-on-boot": "the new plugin breaks the boot" }],
    ] as const) {
      assert.equal((await api(c, "POST", "/api/v1/templates", { name })).status, 201);
      for (const [path, content] of Object.entries(files))
        assert.equal((await api(c, "PUT", `/api/v1/templates/${name}/files/content`, { path, content })).status, 200);
    }
    const created = await api(c, "POST", "/api/v1/groups", {
      name: group,
      platform: "simulated",
      scalingMode: "DYNAMIC",
      minInstances: desired,
      maxInstances: 6,
      memoryMb: 128,
      portRange: { start: 23200, end: 23300 },
      updateStrategy: { type: "ROLLING", maxSurge: 1, maxUnavailable: 0 },
    });
    assert.equal(created.status, 201, JSON.stringify(created.json));
    await allOf(1);
    // The bounds, sampled all along (the first rollout starts from a full group).
    sampler = (async () => {
      while (sampling) {
        const now = await live().catch(() => null);
        if (now) {
          const running = now.filter((i) => i.state === "RUNNING").length;
          const counted = now.filter((i) => COUNTED.has(i.state)).length;
          if (running < desired && !expectGap) violations.push(`only ${running} RUNNING: ${JSON.stringify(now)}`);
          if (counted > desired + 1) violations.push(`${counted} counted: ${JSON.stringify(now)}`);
        }
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
  });

  after(async () => {
    sampling = false;
    await sampler;
    await c?.stop();
    await Promise.all(daemons.map((d) => d.stop()));
    cleanupDirs();
  });

  it("rolls to a revision with a new template layer pinned to its hash; the player of a retired instance is moved to the new revision before it stops; 409 for a second deployment", async () => {
    const before = await live();
    assert.ok(
      before.every((i) => i.deploymentRevision === 1),
      "the first instances carry the INITIAL revision 1",
    );
    const withPlayer = before[0];
    assert.equal((await api(c, "POST", `/api/v1/services/${withPlayer.id}/command`, { command: "players join alice" })).status, 200);
    await eventually(async () => (await api(c, "GET", `/api/v1/services/${withPlayer.id}`)).json.playerCount === 1, "alice counted", waitMs);

    const res = await api(c, "POST", `/api/v1/groups/${group}/deployments`, { changes: { templates: ["plug"] }, minHealthySeconds: 1 });
    assert.equal(res.status, 201, JSON.stringify(res.json));
    assert.equal(res.json.revision, 2);
    assert.equal(res.json.previousRevision, 1);
    const plugHash = (await api(c, "GET", "/api/v1/templates/plug")).json.hash;
    assert.deepEqual(res.json.revisionRecord.templates, [{ name: "plug", hash: plugHash }], "the layer is pinned to the template's hash");
    const second = await api(c, "POST", `/api/v1/groups/${group}/deployments`, {});
    assert.equal(second.status, 409);
    assert.equal(second.json.error.code, "DEPLOYMENT_ACTIVE");

    // The instance with a player drains; the controller moves her to a RUNNING instance of the new
    // revision through the transfer path: delivered to the server holding her (she joined it
    // directly), which connects her to the target; the target's join completes the transfer.
    await eventually(
      () => eventsOf(c, "INSTANCE_DRAINING").some((e) => e.data.instanceId === withPlayer.id),
      `${withPlayer.id} drains\n${c.logs().slice(-2000)}`,
      waitMs,
    );
    const moved = await eventually(
      () => eventsOf(c, "PLAYER_TRANSFER").find((e) => e.data.name === "alice" && e.data.fromInstanceId === withPlayer.id),
      () => `alice moved off ${withPlayer.id} by the system\n${diagnostics()}`,
      waitMs,
    );
    const target = (await instances()).find((i) => i.id === moved.data.toInstanceId);
    assert.ok(target, `the target ${String(moved.data.toInstanceId)} is an instance of the group`);
    assert.equal(target.deploymentRevision, 2, "moved to an instance of the new revision");
    assert.match(c.logs(), new RegExp(`Drain of ${withPlayer.id}: 1 player\\(s\\) sent`), "the drain asked for the transfer");
    const done = await finished(2, "COMPLETED");
    assert.equal(done.outcome, "COMPLETED");
    await allOf(2);
    await eventually(
      async () => (await live()).find((i) => i.id === target.id)?.playerCount === 1,
      () => `the player is still on the network, on ${target.id}\n${diagnostics()}`,
      waitMs,
    );
    const records = await instances();
    for (const old of before) assert.equal(records.find((i) => i.id === old.id)?.state, "STOPPED", `${old.id} stopped once, not crashed`);
    // No player dropped: alice never left the network.
    const dropped = eventsOf(c, "PLAYER_JOURNEY").filter((e) => {
      const entry = e.data.entry as { name: string; action: string };
      return entry.name === "alice" && entry.action === "DISCONNECTED";
    });
    assert.deepEqual(dropped, [], "alice was never disconnected");
    assert.equal(eventsOf(c, "PLAYER_TRANSFER").filter((e) => e.data.name === "alice").length, 1, "moved once, straight to the new revision");
    const stateAt = (state: string) =>
      Date.parse(eventsOf(c, "INSTANCE_STATE_CHANGED").find((e) => e.data.instanceId === withPlayer.id && e.data.newState === state)!.timestamp);
    const drainedMs = stateAt("STOPPING") - stateAt("DRAINING");
    assert.ok(drainedMs < 45_000, `the drain ended when alice had gone, not at its 60 s timeout (${drainedMs} ms)`);
    assert.deepEqual((await api(c, "GET", `/api/v1/groups/${group}`)).json.templates, ["plug"], "the group record names the revision's layers");
    const created = eventsOf(c, "DEPLOYMENT_CREATED").map((e) => e.data);
    assert.deepEqual(created, [{ groupName: group, revision: 2, strategy: "ROLLING" }]);
    assert.deepEqual(
      eventsOf(c, "DEPLOYMENT_COMPLETED").map((e) => e.data),
      [{ groupName: group, revision: 2, outcome: "COMPLETED" }],
    );
    const audit = (await api(c, "GET", "/api/v1/audit?pageSize=50")).json;
    assert.ok(
      (audit.data as { action: string }[]).some((a) => a.action === "deployment.create"),
      "the deployment is audited",
    );
  });

  it("a deployment that changes nothing is a rolling restart: every instance replaced by one of a new revision", async () => {
    // alice stays online: the instance she is on drains like the others and she is moved again.
    const withAlice = (await live()).find((i) => i.playerCount > 0);
    assert.ok(withAlice, "alice is still on the network");
    const before = (await live()).map((i) => i.id);
    const res = await api(c, "POST", `/api/v1/groups/${group}/deployments`, { minHealthySeconds: 1, batchSize: 1 });
    assert.equal(res.status, 201, JSON.stringify(res.json));
    assert.equal(res.json.revision, 3);
    await finished(3, "COMPLETED");
    const after = await allOf(3);
    for (const i of after) assert.ok(!before.includes(i.id), `${i.id} is a new instance`);
    const withAliceNow = await eventually(
      async () => (await live()).find((i) => i.playerCount === 1),
      () => `alice on an instance of revision 3\n${diagnostics()}`,
      waitMs,
    );
    assert.equal(withAliceNow.deploymentRevision, 3);
    const dropped = eventsOf(c, "PLAYER_JOURNEY").filter((e) => {
      const entry = e.data.entry as { name: string; action: string };
      return entry.name === "alice" && entry.action === "DISCONNECTED";
    });
    assert.deepEqual(dropped, [], "alice was never disconnected by the restart");
    // She leaves before the next cases, whose rollouts are about health and counts.
    await api(c, "POST", `/api/v1/services/${withAliceNow.id}/command`, { command: "players leave alice" });
    await eventually(async () => (await live()).every((i) => i.playerCount === 0), "alice left", waitMs);
  });

  it("a revision that crashes on boot fails the health gate and is rolled back automatically", async () => {
    expectGap = true;
    const res = await api(c, "POST", `/api/v1/groups/${group}/deployments`, {
      changes: { templates: ["plug", "boom"] },
      minHealthySeconds: 1,
      autoRollback: true,
    });
    assert.equal(res.status, 201, JSON.stringify(res.json));
    const d = await finished(4, "ROLLED_BACK");
    assert.match(d.reason, /health gate failed: .* crashed/);
    await allOf(3);
    assert.deepEqual((await api(c, "GET", `/api/v1/groups/${group}`)).json.templates, ["plug"], "the group record is back at the previous revision");
    assert.ok(
      eventsOf(c, "DEPLOYMENT_COMPLETED").some((e) => e.data.revision === 4 && e.data.outcome === "ROLLED_BACK"),
      "DEPLOYMENT_COMPLETED names the outcome",
    );
    // New instances start from revision 3 again: a force-stopped one comes back as 3.
    const one = (await live())[0];
    await api(c, "POST", `/api/v1/services/${one.id}/force-stop`);
    await eventually(
      async () => (await live()).filter((i) => i.state === "RUNNING").length === desired && !(await live()).some((i) => i.id === one.id),
      "replaced",
      waitMs,
    );
    await allOf(3);
    expectGap = false;
  });

  it("canary: one instance of the new revision beside the old ones until promoted; pause and resume", async () => {
    const res = await api(c, "POST", `/api/v1/groups/${group}/deployments`, { canaryInstances: 1, minHealthySeconds: 1 });
    assert.equal(res.status, 201, JSON.stringify(res.json));
    const revision = res.json.revision as number;
    await eventually(
      async () => {
        const d = await deployment(revision);
        return d.phase === "CANARY" && d.progress.newHealthy === 1 && d.progress.oldInstances === desired - 1 ? d : null;
      },
      () => `the canary serves beside two old instances\n${diagnostics()}`,
      waitMs,
    );
    await new Promise((r) => setTimeout(r, 3_000));
    const held = await deployment(revision);
    assert.equal(held.phase, "CANARY", "no promotion without an operator (no promotion timeout)");
    assert.equal((await live()).filter((i) => i.deploymentRevision === revision).length, 1);

    const pausedRes = await api(c, "POST", `/api/v1/groups/${group}/deployments/${revision}/pause`);
    assert.equal(pausedRes.json.state, "PAUSED");
    assert.equal((await api(c, "POST", `/api/v1/groups/${group}/deployments/${revision}/promote`)).status, 200);
    await new Promise((r) => setTimeout(r, 3_000));
    assert.equal((await live()).filter((i) => i.deploymentRevision === revision).length, 1, "paused: nothing more is replaced");
    assert.equal((await api(c, "POST", `/api/v1/groups/${group}/deployments/${revision}/resume`)).json.state, "IN_PROGRESS");
    await finished(revision, "COMPLETED");
    await allOf(revision);
    const bad = await api(c, "POST", `/api/v1/groups/${group}/deployments/${revision}/pause`);
    assert.equal(bad.status, 409, "a finished deployment cannot be paused");
  });

  it("rollback with restore: the rollout stops and the previous revision replaces the new instances", async () => {
    expectGap = true;
    const previous = (await live())[0].deploymentRevision;
    const res = await api(c, "POST", `/api/v1/groups/${group}/deployments`, { minHealthySeconds: 600 });
    const revision = res.json.revision as number;
    await eventually(async () => (await live()).some((i) => i.deploymentRevision === revision && i.state === "RUNNING"), "a new instance runs", waitMs);
    const rolled = await api(c, "POST", `/api/v1/groups/${group}/deployments/${revision}/rollback`, { restore: true });
    assert.equal(rolled.status, 200);
    assert.equal(rolled.json.state, "ROLLED_BACK");
    await finished(revision, "ROLLED_BACK");
    await allOf(previous);
    expectGap = false;
  });

  it("a STATIC group rolls in place: the same ids on the same nodes, one slot at a time", async () => {
    expectGap = true; // another group: the sampler watches `web` only, and a slot is down while it restarts
    const vault = "vault";
    const res = await api(c, "POST", "/api/v1/groups", {
      name: vault,
      platform: "simulated",
      scalingMode: "STATIC",
      minInstances: 2,
      memoryMb: 128,
      portRange: { start: 23400, end: 23500 },
    });
    assert.equal(res.status, 201, JSON.stringify(res.json));
    const slots = async () => ((await api(c, "GET", `/api/v1/services?group=${vault}`)).json as Instance[]).sort((a, b) => (a.id < b.id ? -1 : 1));
    const before = await eventually(
      async () => {
        const now = await slots();
        return now.length === 2 && now.every((i) => i.state === "RUNNING") ? now : null;
      },
      "two slots RUNNING",
      waitMs,
    );
    const created = await api(c, "POST", `/api/v1/groups/${vault}/deployments`, { minHealthySeconds: 1, batchSize: 2 });
    assert.equal(created.status, 201, JSON.stringify(created.json));
    let bothDown = false;
    const done = await eventually(
      async () => {
        const now = await slots();
        if (now.filter((i) => i.state === "RUNNING").length === 0) bothDown = true;
        const d = (await api(c, "GET", `/api/v1/groups/${vault}/deployments/2`)).json;
        return d.state === "COMPLETED" ? now : null;
      },
      () => `the STATIC rollout completes\n${c.logs().slice(-3000)}`,
      waitMs,
    );
    assert.equal(bothDown, false, "one slot at a time, whatever the batch size");
    assert.deepEqual(
      done.map((i) => [i.id, i.node, i.state, i.deploymentRevision]),
      before.map((i) => [i.id, i.node, "RUNNING", 2]),
      "same ids, same nodes, the new revision",
    );
    expectGap = false;
  });

  it("the bounds held all along", () => {
    assert.deepEqual(violations, []);
  });
});
