// The controller's stop is bounded even when a connection to the daemon gateway never ends by
// itself: a client that opened a TCP connection and went silent (a daemon stuck mid-handshake, a
// port scanner) must not hold the shutdown open.
import assert from "node:assert/strict";
import { connect, type Socket } from "node:net";
import { describe, it } from "node:test";
import { cleanupDirs, startGatewayController } from "./harness.js";

describe("daemon gateway: stop", { timeout: 60_000 }, () => {
  it("a silent connection does not hold the controller's stop open", async () => {
    const c = await startGatewayController();
    const [host, port] = c.grpcAddress.split(":");
    const sockets: Socket[] = [];
    try {
      for (let i = 0; i < 3; i++) {
        const socket = connect(Number(port), host);
        socket.on("error", () => undefined);
        await new Promise<void>((resolve, reject) => socket.once("connect", resolve).once("error", reject));
        sockets.push(socket);
      }
      const startedMs = performance.now();
      const stopped = await Promise.race([c.stop().then(() => true), new Promise<false>((resolve) => setTimeout(() => resolve(false), 10_000).unref())]);
      assert.ok(stopped, "the controller stopped within 10 s");
      assert.ok(performance.now() - startedMs < 5_000, `stop took ${Math.round(performance.now() - startedMs)} ms`);
    } finally {
      for (const socket of sockets) socket.destroy();
      cleanupDirs();
    }
  });
});
