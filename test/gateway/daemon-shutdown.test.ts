// A daemon's graceful shutdown, seen by a real controller: `cloud-daemon` (a real child process)
// runs a STATIC group of simulated servers and gets SIGTERM. It tells the controller first, so the
// node is `shuttingDown` and nothing new is placed on it while its instances stop: the instances
// that end are not replaced on the node that is going away (no dispatch failing with
// RUNNER_SHUT_DOWN), and the group says why. The next session clears the flag and the group is
// placed again.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  api,
  cleanupDirs,
  createToken,
  eventsOf,
  getNode,
  spawnDaemon,
  startGatewayController,
  type DaemonProcess,
  type GatewayController,
} from "./harness.js";
import { eventually } from "../support/wait.js";

/** Bound on waiting for the scheduler and the daemon (a loaded 2-core machine). */
const waitMs = 90_000;
/** This file's ports. */
const portRange = { start: 24_400, end: 24_409 };

interface Listed {
  id: string;
  state: string;
}

describe("a daemon shutting down gets no new instances", { timeout: 300_000 }, () => {
  let c: GatewayController;
  let daemon: DaemonProcess | undefined;

  before(async () => {
    c = await startGatewayController({ scheduler: { evaluationIntervalMs: 500 } });
  });

  after(async () => {
    await daemon?.stop();
    await c?.stop();
    cleanupDirs();
  });

  test("SIGTERM: the node is shuttingDown, no replacement is dispatched to it, and the next session places the group again", async () => {
    const { token } = await createToken(c);
    daemon = spawnDaemon([c.grpcAddress], token, { maxMemoryMb: 1024 });
    const connected = await eventually(
      () => eventsOf(c, "NODE_CONNECTED")[0],
      () => `the daemon connected\n${daemon!.output()}`,
      waitMs,
    );
    const nodeId = String(connected.data.nodeId);
    const created = await api(c, "POST", "/api/v1/groups", {
      name: "closing",
      platform: "simulated",
      scalingMode: "STATIC",
      minInstances: 2,
      maxInstances: 2,
      memoryMb: 64,
      portRange,
    });
    assert.equal(created.status, 201, JSON.stringify(created.json));
    const listed = async () => (await api(c, "GET", "/api/v1/services?group=closing")).json as Listed[];
    const running = await eventually(
      async () => {
        const instances = await listed();
        return instances.filter((i) => i.state === "RUNNING").length === 2 ? instances : null;
      },
      () => `two RUNNING instances\n${daemon!.output().slice(-2_000)}`,
      waitMs,
    );
    assert.equal((await getNode(c, nodeId)).shuttingDown, false);

    const stateChangesBefore = eventsOf(c, "INSTANCE_STATE_CHANGED").length;
    await daemon.stop();
    const code = daemon.child.exitCode;
    assert.equal(code, 0, `the daemon stopped gracefully\n${daemon.output().slice(-2_000)}`);

    // The two instances ended on the node's shutdown; no third instance was created for it.
    let seen: Listed[] = [];
    const ended = await eventually(
      async () => {
        seen = await listed();
        return seen.every((i) => i.state === "STOPPED" || i.state === "CRASHED") ? seen : null;
      },
      () => `both instances ended: ${JSON.stringify(seen)}`,
      waitMs,
    );
    assert.deepEqual(ended.map((i) => i.id).sort(), running.map((i) => i.id).sort(), "no replacement instance was placed on the node");
    const later = eventsOf(c, "INSTANCE_STATE_CHANGED").slice(stateChangesBefore);
    assert.ok(
      later.every((event) => running.some((i) => i.id === event.data.instanceId)),
      `state changes only of the two instances: ${JSON.stringify(later.map((e) => e.data))}`,
    );
    assert.doesNotMatch(c.logs(), /RUNNER_SHUT_DOWN/);
    assert.match(c.logs(), new RegExp(`Node ${nodeId} is shutting down: nothing new is placed on it`));
    assert.equal((await getNode(c, nodeId)).shuttingDown, true, "the flag stays until the node's next session");

    // The daemon comes back (same identity): the flag is cleared and the group runs again.
    daemon = spawnDaemon([c.grpcAddress], token, { maxMemoryMb: 1024 }, daemon.dir);
    await eventually(async () => (await getNode(c, nodeId)).state === "ONLINE" && (await getNode(c, nodeId)).shuttingDown === false, "ONLINE again", waitMs);
    await eventually(
      async () => (await listed()).filter((i) => i.state === "RUNNING").length === 2,
      () => `two RUNNING instances again\n${daemon!.output().slice(-2_000)}`,
      waitMs,
    );
  });
});
