// A group created before any node exists (the moment after `npm start`, before the local daemon
// has joined) starts as soon as the first node connects, not at the next evaluation tick: the
// node's record is ONLINE by the time NODE_CONNECTED reaches the scheduler.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
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

/** Far longer than the test may take: only the reaction to the connection can start the group. */
const evaluationIntervalMs = 120_000;

describe("the first node of a waiting group", { timeout: 90_000 }, () => {
  let c: GatewayController;
  let daemon: DaemonProcess | undefined;

  before(async () => {
    c = await startGatewayController({ scheduler: { evaluationIntervalMs } });
  });

  after(async () => {
    await daemon?.stop();
    await c?.stop();
    cleanupDirs();
  });

  it("starts its instances right after the node connects", async () => {
    const created = await api(c, "POST", "/api/v1/groups", {
      name: "early",
      platform: "simulated",
      scalingMode: "DYNAMIC",
      minInstances: 1,
      maxInstances: 1,
      memoryMb: 128,
      maxPlayers: 0,
      portRange: { start: 24100, end: 24110 },
    });
    assert.equal(created.status, 201, JSON.stringify(created.json));
    await eventually(
      async () => (await api(c, "GET", "/api/v1/groups/early")).json.schedulingIssue?.code === "NO_ONLINE_NODE",
      "the group says why nothing starts",
      10_000,
    );
    const { token } = await createToken(c);
    daemon = spawnDaemon([c.grpcAddress], token, { maxMemoryMb: 1024 });
    await eventually(() => eventsOf(c, "NODE_CONNECTED").length === 1, "the daemon connected", 30_000);
    const connectedMs = Date.now();
    await eventually(
      async () => ((await api(c, "GET", "/api/v1/services?group=early&state=RUNNING")).json as unknown[]).length === 1,
      `the instance RUNNING\n${daemon.output().slice(-2_000)}`,
      30_000,
    );
    assert.ok(Date.now() - connectedMs < evaluationIntervalMs / 4, "well before the next evaluation tick");
    assert.equal((await api(c, "GET", "/api/v1/groups/early")).json.schedulingIssue, null);
  });
});
