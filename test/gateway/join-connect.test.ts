// Joining and connecting over real gRPC on 127.0.0.1: a fresh token joins and connects (node
// ONLINE, NODE_CONNECTED, status reports, a command round trip); bad, reused and revoked tokens are
// refused; a protocol_version 0 hello and a Connect without a client certificate are refused; a
// second session of the same node replaces the first; a drain survives a disconnect.
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { certificateCommonName, verifyIssuedBy } from "../../src/cluster/identity/ca.js";
import { GatewayClientError, IDENTITY_FILES, readIdentity } from "../../src/daemon/gateway-client.js";
import { daemonMessage, type ControllerMessage } from "../../src/wire/daemon-proto.js";
import { GatewayError } from "../../src/gateway/gateway-errors.js";
import {
  cleanupDirs,
  createToken,
  eventsOf,
  getNode,
  rawClient,
  rawJoin,
  revokeToken,
  startGatewayController,
  testClient,
  type GatewayController,
  type TestClient,
} from "./harness.js";
import { eventually } from "../support/wait.js";

describe("daemon gateway: join and connect", { timeout: 60_000 }, () => {
  let c: GatewayController;
  const clients: TestClient[] = [];
  before(async () => {
    c = await startGatewayController();
  });
  after(async () => {
    for (const t of clients) t.client.stop();
    await c.stop();
    cleanupDirs();
  });

  it("listens on a real ephemeral port", () => {
    assert.ok(c.controller.grpcPort > 0);
    assert.equal(c.controller.gateway.port, c.controller.grpcPort);
  });

  it("a daemon joins with a fresh token, stores its identity and connects: ONLINE, NODE_CONNECTED, NODE_STATUS", async () => {
    const { token } = await createToken(c);
    const t = testClient([c.grpcAddress], {
      token,
      commandHandler: async (command) => ({ ok: command.type === "stdin_instance", error_code: "", message: `got ${command.type}` }),
    });
    clients.push(t);
    await t.client.start();
    const nodeId = t.client.nodeId!;
    assert.match(nodeId, /^node-[0-9a-f]{12}$/);
    for (const name of Object.values(IDENTITY_FILES)) assert.ok(existsSync(join(t.dataDir, name)), name);
    assert.equal(readFileSync(join(t.dataDir, IDENTITY_FILES.nodeId), "utf8").trim(), nodeId);
    const identity = (await readIdentity(t.dataDir))!;
    assert.equal(certificateCommonName(identity.certificatePem), nodeId);
    assert.ok(verifyIssuedBy({ certPem: identity.caPem }, identity.certificatePem));

    const connected = await eventually(() => eventsOf(c, "NODE_CONNECTED", nodeId)[0], "NODE_CONNECTED");
    assert.equal(typeof connected.data.sessionId, "string");
    assert.ok(Date.parse(String(connected.data.timestamp)) > 0);
    const node = await eventually(async () => {
      const n = await getNode(c, nodeId);
      return n?.state === "ONLINE" ? n : null;
    }, "node ONLINE");
    assert.equal(node.host, "test-host");
    assert.equal(node.version, "0.1.0-test");
    assert.equal(node.totalMemoryMb, 2048);
    assert.ok(node.connectedAt);
    assert.equal(t.client.state, "connected");

    const status = await eventually(() => eventsOf(c, "NODE_STATUS", nodeId)[0], "NODE_STATUS");
    assert.equal(status.data.totalMemoryMb, 2048);
    assert.ok(Number(status.data.cpuUsage) >= 0 && Number(status.data.cpuUsage) <= 1);

    const result = await c.controller.gateway.sendCommand(nodeId, {
      type: "stdin_instance",
      body: { group: "lobby", fencing_token: 3, instance_id: "lobby-1", line: "say hi" },
    });
    assert.equal(result.ok, true);
    assert.equal(result.message, "got stdin_instance");
    const refused = await c.controller.gateway.sendCommand(nodeId, {
      type: "stop_instance",
      body: { group: "lobby", fencing_token: 3, instance_id: "lobby-1" },
    });
    assert.equal(refused.ok, false);
    await assert.rejects(
      c.controller.gateway.sendCommand("node-unknown", { type: "stop_instance", body: { group: "g", fencing_token: 1, instance_id: "x" } }),
      (err: unknown) => err instanceof GatewayError && err.code === "NODE_NOT_CONNECTED",
    );

    const metrics = await c.controller.metrics.render();
    assert.match(metrics, /cloud_grpc_daemon_sessions_active 1/);
    assert.match(metrics, /cloud_grpc_daemon_messages_in_total\{payload_case="hello"\} \d+/);
    assert.match(metrics, /cloud_grpc_daemon_messages_out_total\{payload_case="hello_ack",outcome="delivered"\} \d+/);

    // A restart of the daemon uses the stored identity: no token needed, same node id.
    t.client.stop();
    const again = testClient([c.grpcAddress], { dataDir: t.dataDir });
    clients.push(again);
    await again.client.start();
    assert.equal(again.client.nodeId, nodeId);
    await eventually(() => eventsOf(c, "NODE_CONNECTED", nodeId).length >= 2, "second NODE_CONNECTED");
    await eventually(() => again.client.state === "connected", "reconnected client");
  });

  it("a token bound to a node id gives that id", async () => {
    const { token } = await createToken(c, { nodeId: "bound-node-1" });
    const joined = await rawJoin(c.grpcAddress, { token });
    assert.equal(joined.error, undefined);
    assert.equal(joined.response!.node_id, "bound-node-1");
    assert.equal(certificateCommonName(joined.response!.certificate_pem), "bound-node-1");
  });

  it("bad, reused and revoked tokens are refused with UNAUTHENTICATED and a clear message", async () => {
    const bad = await rawJoin(c.grpcAddress, { token: "cnt_not-a-real-token" });
    assert.equal(bad.error?.code, grpc.status.UNAUTHENTICATED);
    assert.equal(bad.error?.details, "Invalid node join token");

    const { token } = await createToken(c);
    assert.ok((await rawJoin(c.grpcAddress, { token })).response);
    const reused = await rawJoin(c.grpcAddress, { token });
    assert.equal(reused.error?.code, grpc.status.UNAUTHENTICATED);
    assert.equal(reused.error?.details, "Node join token has already been used");

    const revoked = await createToken(c);
    await revokeToken(c, revoked.id);
    const refused = await rawJoin(c.grpcAddress, { token: revoked.token });
    assert.equal(refused.error?.code, grpc.status.UNAUTHENTICATED);
    assert.equal(refused.error?.details, "Node join token has been revoked");

    // The daemon's client gives up (no retry loop) on a refused join.
    const t = testClient([c.grpcAddress], { token });
    clients.push(t);
    await assert.rejects(t.client.start(), (err: unknown) => err instanceof GatewayClientError && err.code === "JOIN_REFUSED");
  });

  it("a protocol_version 0 hello is refused with FAILED_PRECONDITION and the exact message", async () => {
    const { token } = await createToken(c);
    const joined = (await rawJoin(c.grpcAddress, { token })).response!;
    const client = rawClient(c.grpcAddress, { caPem: joined.ca_certificate_pem, keyPem: joined.private_key_pem, certificatePem: joined.certificate_pem });
    try {
      const stream = client.Connect();
      const received: ControllerMessage[] = [];
      stream.on("data", (m: ControllerMessage) => received.push(m));
      const error = await new Promise<grpc.ServiceError>((resolve) => {
        stream.on("error", resolve);
        stream.write(
          daemonMessage("hello", { protocol_version: 0, daemon_version: "old", node_id: joined.node_id, total_memory_mb: 1, used_memory_mb: 0, hostname: "h" }),
        );
      });
      assert.equal(error.code, grpc.status.FAILED_PRECONDITION);
      assert.equal(error.details, "Unsupported daemon protocol version: 0");
      assert.deepEqual(received, []);
      assert.equal(eventsOf(c, "NODE_CONNECTED", joined.node_id).length, 0);
    } finally {
      client.close();
    }
  });

  it("Connect without a client certificate is refused", async () => {
    const client = rawClient(c.grpcAddress);
    try {
      const stream = client.Connect();
      const error = await new Promise<grpc.ServiceError>((resolve) => {
        stream.on("error", resolve);
        stream.write(
          daemonMessage("hello", { protocol_version: 1, daemon_version: "x", node_id: "intruder", total_memory_mb: 1, used_memory_mb: 0, hostname: "h" }),
        );
      });
      assert.equal(error.code, grpc.status.UNAUTHENTICATED);
      assert.equal(eventsOf(c, "NODE_CONNECTED", "intruder").length, 0);
    } finally {
      client.close();
    }
  });

  it("a drained node that disconnects is UNREACHABLE and comes back DRAINING", async () => {
    const { token } = await createToken(c);
    const joined = (await rawJoin(c.grpcAddress, { token })).response!;
    const identity = { caPem: joined.ca_certificate_pem, keyPem: joined.private_key_pem, certificatePem: joined.certificate_pem };
    const hello = daemonMessage("hello", {
      protocol_version: 1,
      daemon_version: "x",
      node_id: joined.node_id,
      total_memory_mb: 1,
      used_memory_mb: 0,
      hostname: "h",
    });
    const open = async (expectedConnections: number) => {
      const client = rawClient(c.grpcAddress, identity);
      const stream = client.Connect();
      stream.on("data", () => undefined);
      stream.on("error", () => undefined);
      stream.write(hello);
      await eventually(() => eventsOf(c, "NODE_CONNECTED", joined.node_id).length === expectedConnections, "connected");
      return { client, stream };
    };
    const first = await open(1);
    await eventually(async () => (await getNode(c, joined.node_id))?.state === "ONLINE", "ONLINE");
    const drained = await fetch(`${c.url}/api/v1/nodes/${joined.node_id}/drain`, { method: "POST", headers: { authorization: `Bearer ${c.adminToken}` } });
    assert.equal(drained.status, 200);
    first.stream.cancel();
    first.client.close();
    await eventually(async () => (await getNode(c, joined.node_id))?.state === "UNREACHABLE", "UNREACHABLE");
    const second = await open(2);
    await eventually(async () => (await getNode(c, joined.node_id))?.state === "DRAINING", "DRAINING after reconnect");
    second.stream.cancel();
    second.client.close();
  });

  it("a new session of the same node replaces the old one; the old one's end is not a disconnect of the node", async () => {
    const { token } = await createToken(c);
    const joined = (await rawJoin(c.grpcAddress, { token })).response!;
    const identity = { caPem: joined.ca_certificate_pem, keyPem: joined.private_key_pem, certificatePem: joined.certificate_pem };
    const hello = daemonMessage("hello", {
      protocol_version: 1,
      daemon_version: "x",
      node_id: joined.node_id,
      total_memory_mb: 1,
      used_memory_mb: 0,
      hostname: "h",
    });
    const first = rawClient(c.grpcAddress, identity);
    const second = rawClient(c.grpcAddress, identity);
    try {
      const s1 = first.Connect();
      const s1Error = new Promise<grpc.ServiceError>((resolve) => s1.on("error", resolve));
      s1.on("data", () => undefined);
      s1.write(hello);
      await eventually(() => eventsOf(c, "NODE_CONNECTED", joined.node_id).length === 1, "first session");
      const s2 = second.Connect();
      s2.on("data", () => undefined);
      s2.on("error", () => undefined);
      s2.write(hello);
      assert.equal((await s1Error).code, grpc.status.ABORTED);
      await eventually(() => eventsOf(c, "NODE_CONNECTED", joined.node_id).length === 2, "second session");
      const epochs = eventsOf(c, "NODE_CONNECTED", joined.node_id).map((e) => e.data.sessionEpoch as number);
      assert.equal(epochs[1], epochs[0] + 1, `each session gets the node's next epoch: ${epochs.join(", ")}`);
      // Liveness follows the newest session: the replaced one ends without NODE_DISCONNECTED.
      assert.deepEqual(eventsOf(c, "NODE_DISCONNECTED", joined.node_id), []);
      const sessions = c.controller.gateway.listSessions().filter((s) => s.nodeId === joined.node_id);
      assert.deepEqual(
        sessions.map((s) => s.sessionEpoch),
        [epochs[1]],
      );
      assert.equal((await getNode(c, joined.node_id)).state, "ONLINE");
      s2.cancel();
    } finally {
      first.close();
      second.close();
    }
  });
});
