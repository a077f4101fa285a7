// `cloud-daemon` as a real child process (node --import tsx src/daemon/main.ts) against an
// in-process controller on a fixed loopback gRPC port: it joins and connects; after the controller
// restarts (same data directory and port) it reconnects with its stored identity; SIGKILL makes the
// node UNREACHABLE with NODE_DISCONNECTED. A refused token makes the daemon exit with status 77.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { freePorts } from "../cluster/support/free-ports.js";
import {
  cleanupDirs,
  createToken,
  eventsOf,
  getNode,
  spawnDaemon,
  startGatewayController,
  tempDir,
  type DaemonProcess,
  type GatewayController,
} from "./harness.js";
import { eventually } from "../support/wait.js";

const processWaitMs = 25_000;

describe("cloud-daemon process", { timeout: 150_000 }, () => {
  const daemons: DaemonProcess[] = [];
  const controllers: GatewayController[] = [];
  after(async () => {
    for (const d of daemons) await d.kill9();
    for (const c of controllers) await c.stop();
    cleanupDirs();
  });

  it("joins, reconnects after a controller restart, and a SIGKILL makes the node UNREACHABLE", async () => {
    const [grpcPort] = await freePorts(1);
    const dataDir = tempDir("cloud-gw-proc-controller-");
    const first = await startGatewayController({ dataDir, grpcPort });
    controllers.push(first);
    const { token } = await createToken(first);
    const daemon = spawnDaemon([first.grpcAddress], token);
    daemons.push(daemon);

    const connected = await eventually(() => eventsOf(first, "NODE_CONNECTED")[0], `NODE_CONNECTED\n${daemon.output()}`, processWaitMs);
    const nodeId = String(connected.data.nodeId);
    await eventually(async () => (await getNode(first, nodeId))?.state === "ONLINE", "ONLINE");
    const packageVersion = (JSON.parse(readFileSync(join(import.meta.dirname, "..", "..", "package.json"), "utf8")) as { version: string }).version;
    assert.equal((await getNode(first, nodeId)).version, packageVersion, "the daemon reports its package version");

    await first.stop();
    const second = await startGatewayController({ dataDir, grpcPort });
    controllers.push(second);
    await eventually(() => eventsOf(second, "NODE_CONNECTED", nodeId)[0], `reconnect after restart\n${daemon.output()}`, processWaitMs);
    await eventually(async () => (await getNode(second, nodeId))?.state === "ONLINE", "ONLINE after restart");

    await daemon.kill9();
    const disconnected = await eventually(() => eventsOf(second, "NODE_DISCONNECTED", nodeId)[0], "NODE_DISCONNECTED after SIGKILL");
    assert.equal(typeof disconnected.data.reason, "string");
    await eventually(async () => (await getNode(second, nodeId))?.state === "UNREACHABLE", "UNREACHABLE after SIGKILL");
  });

  it("a daemon with a used token exits with status 77 and says why", async () => {
    const c = controllers.at(-1)!;
    const { token } = await createToken(c);
    const firstUse = spawnDaemon([c.grpcAddress], token);
    daemons.push(firstUse);
    await eventually(() => eventsOf(c, "NODE_CONNECTED").length >= 2, `first use connects\n${firstUse.output()}`, processWaitMs);
    const reuse = spawnDaemon([c.grpcAddress], token);
    daemons.push(reuse);
    const code = await new Promise<number | null>((resolve) => reuse.child.once("exit", (status) => resolve(status)));
    assert.equal(code, 77);
    assert.match(reuse.output(), /Node join token has already been used/);
  });
});
