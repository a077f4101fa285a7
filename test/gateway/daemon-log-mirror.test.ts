// The daemon log mirror end to end: a real `cloud-daemon` child process joins an in-process
// controller; what it logs before its stream opens (the plugin relay line) and after (its state
// changes) arrives in the controller's per-node buffer, readable through GET
// /api/v1/nodes/{id}/logs, with the daemon's own sequence numbers. After the controller restarts,
// the records the daemon logged while disconnected reach the new controller.
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
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
} from "./harness.js";
import { eventually } from "../support/wait.js";

const processWaitMs = 25_000;

describe("daemon log mirror", { timeout: 90_000 }, () => {
  const daemons: DaemonProcess[] = [];
  const controllers: GatewayController[] = [];
  after(async () => {
    for (const d of daemons) await d.kill9();
    for (const c of controllers) await c.stop();
    cleanupDirs();
  });

  it("sends every daemon log record over the stream into the node's buffer, also those logged while disconnected", async () => {
    const [grpcPort] = await freePorts(1);
    const dataDir = tempDir("cloud-gw-mirror-controller-");
    const first = await startGatewayController({ dataDir, grpcPort });
    controllers.push(first);
    const { token } = await createToken(first);
    const daemon = spawnDaemon([first.grpcAddress], token);
    daemons.push(daemon);
    const connected = await eventually(() => eventsOf(first, "NODE_CONNECTED")[0], `NODE_CONNECTED\n${daemon.output()}`, processWaitMs);
    const nodeId = String(connected.data.nodeId);

    const logs = async (c: GatewayController, query = "") => {
      const res = await api(c, "GET", `/api/v1/nodes/${nodeId}/logs${query}`);
      assert.equal(res.status, 200, JSON.stringify(res.json));
      return res.json as { records: { seq: number; level: string; logger: string; message: string; thread: string }[]; size: number; capacity: number };
    };
    const page = await eventually(
      async () => {
        const p = await logs(first);
        return p.records.some((r) => r.message.startsWith("state connected")) ? p : undefined;
      },
      () => `the daemon's records in the controller\n${daemon.output()}`,
      processWaitMs,
    );
    const relay = page.records.find((r) => r.message.startsWith("Plugin relay listening on"));
    assert.ok(relay, "a record logged before the stream opened was sent once it did");
    assert.equal(relay.logger, "cloud.daemon");
    assert.equal(relay.level, "INFO");
    const seqs = page.records.map((r) => r.seq);
    assert.deepEqual(
      seqs,
      [...seqs].sort((a, b) => a - b),
      "in the daemon's order",
    );
    assert.equal(new Set(seqs).size, seqs.length, "each record once");
    assert.equal(page.capacity, 1000);

    await first.stop();
    const second = await startGatewayController({ dataDir, grpcPort });
    controllers.push(second);
    const after = await eventually(
      async () => {
        const p = await logs(second, "?level=WARN");
        return p.records.some((r) => r.message.startsWith("Disconnected")) ? p : undefined;
      },
      () => `the records logged while disconnected reach the new controller\n${daemon.output()}`,
      processWaitMs,
    );
    assert.ok(after.records.every((r) => r.level === "WARN" || r.level === "ERROR"));
    assert.ok(after.records[0]!.seq > Math.max(...seqs), "numbering goes on in the same daemon process");
  });
});
