// Certificate revocation over real gRPC on 127.0.0.1 (docs/decisions/node-states.md, "Certificate
// revocation"): revoking a connected node ends its session at once (UNAUTHENTICATED, node
// UNREACHABLE); a revoked node's Connect is refused before hello_ack; after unrevoke the daemon's
// own reconnect loop brings it back ONLINE; a revocation outlives the deleted node record.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { certificateRevokedMessage } from "../../src/gateway/daemon-gateway.js";
import { daemonMessage, type ControllerMessage, type JoinResponse } from "../../src/wire/daemon-proto.js";
import {
  cleanupDirs,
  createToken,
  eventsOf,
  getNode,
  rawClient,
  rawJoin,
  startGatewayController,
  testClient,
  type GatewayController,
  type TestClient,
} from "./harness.js";
import { eventually } from "../support/wait.js";

describe("daemon gateway: certificate revocation", { timeout: 60_000 }, () => {
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

  const nodeAction = async (method: string, path: string): Promise<number> =>
    (await fetch(`${c.url}/api/v1/nodes/${path}`, { method, headers: { authorization: `Bearer ${c.adminToken}` } })).status;

  /** Opens a raw Connect with the identity of `joined`; resolves with what the controller answered. */
  const connectOnce = async (joined: JoinResponse): Promise<{ error: grpc.ServiceError | null; received: ControllerMessage[] }> => {
    const identity = { caPem: joined.ca_certificate_pem, keyPem: joined.private_key_pem, certificatePem: joined.certificate_pem };
    const client = rawClient(c.grpcAddress, identity);
    try {
      const stream = client.Connect();
      const received: ControllerMessage[] = [];
      const error = await new Promise<grpc.ServiceError | null>((resolve) => {
        stream.on("data", (m: ControllerMessage) => {
          received.push(m);
          if (m.payload === "hello_ack") {
            stream.cancel();
            resolve(null);
          }
        });
        stream.on("error", (err: grpc.ServiceError) => resolve(err.code === grpc.status.CANCELLED ? null : err));
        const hello = { protocol_version: 1, daemon_version: "x", node_id: joined.node_id, total_memory_mb: 1, used_memory_mb: 0, hostname: "h" };
        stream.write(daemonMessage("hello", hello));
      });
      return { error, received };
    } finally {
      client.close();
    }
  };

  it("revoking a connected node ends its session at once; unrevoke lets the daemon connect again", async () => {
    const { token } = await createToken(c, { nodeId: "revoked-live" });
    const t = testClient([c.grpcAddress], { token });
    clients.push(t);
    await t.client.start();
    const nodeId = t.client.nodeId!;
    await eventually(async () => (await getNode(c, nodeId))?.state === "ONLINE", "node ONLINE");
    assert.ok(c.controller.gateway.isConnected(nodeId));

    const statesBefore = t.states.length;
    assert.equal(await nodeAction("POST", `${nodeId}/revoke-cert`), 200);
    // The session is gone when the route answers: nothing waits for a heartbeat.
    assert.equal(c.controller.gateway.isConnected(nodeId), false);
    const disconnected = await eventually(() => eventsOf(c, "NODE_DISCONNECTED", nodeId)[0], "NODE_DISCONNECTED");
    assert.equal(disconnected.data.reason, certificateRevokedMessage(nodeId));
    await eventually(async () => (await getNode(c, nodeId))?.state === "UNREACHABLE", "node UNREACHABLE");
    const node = await getNode(c, nodeId);
    assert.equal(node.certificateRevoked, true);

    // The daemon keeps retrying with backoff; every attempt is refused while the revocation holds.
    const connections = eventsOf(c, "NODE_CONNECTED", nodeId).length;
    await eventually(() => t.states.slice(statesBefore).filter((s) => s === "connecting").length >= 3, "several refused reconnects");
    assert.equal(eventsOf(c, "NODE_CONNECTED", nodeId).length, connections);
    assert.notEqual(t.client.state, "connected");

    assert.equal(await nodeAction("POST", `${nodeId}/unrevoke-cert`), 200);
    await eventually(() => t.client.state === "connected", "daemon connected again");
    await eventually(async () => (await getNode(c, nodeId))?.state === "ONLINE", "node ONLINE again");
    await eventually(() => eventsOf(c, "NODE_CONNECTED", nodeId).length === connections + 1, "one more NODE_CONNECTED");
    assert.equal((await getNode(c, nodeId)).certificateRevoked, false);
  });

  it("a revoked node's Connect is refused with UNAUTHENTICATED and no hello_ack; unrevoked it gets hello_ack", async () => {
    const { token } = await createToken(c, { nodeId: "revoked-raw" });
    const joined = (await rawJoin(c.grpcAddress, { token })).response!;
    const first = await connectOnce(joined);
    assert.equal(first.error, null);
    await eventually(async () => (await getNode(c, joined.node_id))?.state === "UNREACHABLE", "first stream closed");

    assert.equal(await nodeAction("POST", `${joined.node_id}/revoke-cert`), 200);
    const refused = await connectOnce(joined);
    assert.equal(refused.error?.code, grpc.status.UNAUTHENTICATED);
    assert.equal(refused.error?.details, "The certificate of node revoked-raw has been revoked");
    assert.deepEqual(refused.received, []);
    assert.equal(eventsOf(c, "NODE_CONNECTED", joined.node_id).length, 1);

    assert.equal(await nodeAction("POST", `${joined.node_id}/unrevoke-cert`), 200);
    const accepted = await connectOnce(joined);
    assert.equal(accepted.error, null);
    assert.equal(accepted.received[0]?.payload, "hello_ack");
  });

  it("a revocation outlives the deleted node record: the daemon stays refused", async () => {
    const { token } = await createToken(c, { nodeId: "revoked-deleted" });
    const joined = (await rawJoin(c.grpcAddress, { token })).response!;
    assert.equal((await connectOnce(joined)).error, null);
    await eventually(async () => (await getNode(c, joined.node_id))?.state === "UNREACHABLE", "stream closed");
    assert.equal(await nodeAction("POST", `${joined.node_id}/revoke-cert`), 200);
    assert.equal(await nodeAction("DELETE", joined.node_id), 204);
    assert.equal(await getNode(c, joined.node_id), null);

    const refused = await connectOnce(joined);
    assert.equal(refused.error?.code, grpc.status.UNAUTHENTICATED);
    assert.equal(refused.error?.details, certificateRevokedMessage(joined.node_id));
    assert.equal(await getNode(c, joined.node_id), null, "a refused Connect writes no record");
  });
});
