// Heartbeats under a short injected interval: a daemon that stops answering pings is reported
// stale (NODE_HEARTBEAT_STALE), answering again resumes it (NODE_HEARTBEAT_RESUMED), and a daemon
// silent for too long loses its session (NODE_DISCONNECTED, node UNREACHABLE).
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { daemonMessage, type ControllerMessage, type DaemonMessage } from "../../src/wire/daemon-proto.js";
import { cleanupDirs, createToken, eventsOf, getNode, rawClient, rawJoin, startGatewayController, type GatewayController } from "./harness.js";
import { eventually } from "../support/wait.js";

const heartbeatIntervalMs = 100;

describe("daemon gateway: heartbeats", { timeout: 60_000 }, () => {
  let c: GatewayController;
  before(async () => {
    c = await startGatewayController({ tuning: { heartbeatIntervalMs, staleAfterMissedPongs: 2, disconnectAfterMissedPongs: 15 } });
  });
  after(async () => {
    await c.stop();
    cleanupDirs();
  });

  /** A raw connected stream whose ping answers the test switches on and off. */
  async function connect(): Promise<{
    nodeId: string;
    answer: (on: boolean) => void;
    pings: () => number;
    stream: grpc.ClientDuplexStream<DaemonMessage, ControllerMessage>;
    client: grpc.Client;
  }> {
    const { token } = await createToken(c);
    const joined = (await rawJoin(c.grpcAddress, { token })).response!;
    const client = rawClient(c.grpcAddress, { caPem: joined.ca_certificate_pem, keyPem: joined.private_key_pem, certificatePem: joined.certificate_pem });
    const stream = client.Connect();
    let answering = true;
    let pings = 0;
    stream.on("error", () => undefined);
    stream.on("data", (m: ControllerMessage) => {
      if (m.payload !== "ping") return;
      pings += 1;
      if (answering) stream.write(daemonMessage("pong", { sequence: m.ping.sequence, sent_at_ms: Date.now() }));
    });
    stream.write(
      daemonMessage("hello", {
        protocol_version: 1,
        daemon_version: "x",
        node_id: joined.node_id,
        total_memory_mb: 512,
        used_memory_mb: 0,
        hostname: "hb-host",
      }),
    );
    await eventually(() => eventsOf(c, "NODE_CONNECTED", joined.node_id).length === 1, "connected");
    return { nodeId: joined.node_id, answer: (on) => void (answering = on), pings: () => pings, stream, client };
  }

  it("missed pongs → NODE_HEARTBEAT_STALE; pongs again → NODE_HEARTBEAT_RESUMED", async () => {
    const d = await connect();
    try {
      await eventually(() => d.pings() >= 3, "pings answered");
      assert.equal(eventsOf(c, "NODE_HEARTBEAT_STALE", d.nodeId).length, 0, "answered pings are not stale");
      d.answer(false);
      const stale = await eventually(() => eventsOf(c, "NODE_HEARTBEAT_STALE", d.nodeId)[0], "NODE_HEARTBEAT_STALE");
      assert.ok(Number(stale.data.missedPongs) >= 2);
      assert.ok(Date.parse(String(stale.data.lastHeartbeatAt)) > 0);
      assert.equal(c.controller.gateway.listSessions().find((s) => s.nodeId === d.nodeId)?.stale, true);
      d.answer(true);
      const resumed = await eventually(() => eventsOf(c, "NODE_HEARTBEAT_RESUMED", d.nodeId)[0], "NODE_HEARTBEAT_RESUMED");
      assert.ok(Date.parse(String(resumed.data.lastHeartbeatAt)) >= Date.parse(String(stale.data.lastHeartbeatAt)));
      assert.equal(eventsOf(c, "NODE_HEARTBEAT_STALE", d.nodeId).length, 1, "stale reported once per episode");
      assert.equal(eventsOf(c, "NODE_DISCONNECTED", d.nodeId).length, 0);
    } finally {
      d.stream.cancel();
      d.client.close();
    }
  });

  it("a daemon silent past the bound loses its session: NODE_DISCONNECTED and UNREACHABLE", async () => {
    const d = await connect();
    try {
      await eventually(async () => (await getNode(c, d.nodeId))?.state === "ONLINE", "ONLINE");
      d.answer(false);
      const disconnected = await eventually(() => eventsOf(c, "NODE_DISCONNECTED", d.nodeId)[0], "NODE_DISCONNECTED");
      assert.match(String(disconnected.data.reason), /^heartbeat timeout/);
      await eventually(async () => (await getNode(c, d.nodeId))?.state === "UNREACHABLE", "UNREACHABLE");
      assert.equal(c.controller.gateway.isConnected(d.nodeId), false);
    } finally {
      d.stream.cancel();
      d.client.close();
    }
  });
});
