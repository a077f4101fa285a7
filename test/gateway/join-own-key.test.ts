// Joining with the daemon's own key (JoinRequest.csr_public_key_pem) over real gRPC on 127.0.0.1:
// the certificate is issued for that key and works for mTLS; a second Join with the same token and
// key (an answer the daemon lost) gets the same node id; another key, no key or a revoked token is
// refused; a bad key is refused and leaves the token usable. The daemon side: a GatewayClient whose
// first answer is held until its join deadline passed retries and joins with the key it stored, and
// a `cloud-daemon` process killed after the controller consumed its token joins after a restart.
import assert from "node:assert/strict";
import { createPublicKey, generateKeyPairSync, X509Certificate } from "node:crypto";
import { existsSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { certificateCommonName, verifyIssuedBy } from "../../src/cluster/identity/ca.js";
import { IDENTITY_FILES, readIdentity } from "../../src/daemon/gateway-client.js";
import type { NodeTokenService, TokenConsumeResult } from "../../src/domain/node-tokens/node-token-service.js";
import { daemonMessage, type ControllerMessage } from "../../src/wire/daemon-proto.js";
import {
  cleanupDirs,
  createToken,
  eventsOf,
  getNode,
  rawClient,
  rawJoin,
  revokeToken,
  spawnDaemon,
  startGatewayController,
  testClient,
  type DaemonProcess,
  type GatewayController,
  type TestClient,
} from "./harness.js";
import { eventually } from "../support/wait.js";

const processWaitMs = 25_000;

function rsaKey(bits = 2048): { keyPem: string; publicKeyPem: string } {
  const { privateKey, publicKey } = generateKeyPairSync("rsa", {
    modulusLength: bits,
    publicKeyEncoding: { type: "spki", format: "pem" },
    privateKeyEncoding: { type: "pkcs8", format: "pem" },
  });
  return { keyPem: privateKey, publicKeyPem: publicKey };
}

function certificateIsFor(certificatePem: string, publicKeyPem: string): boolean {
  return new X509Certificate(certificatePem).publicKey.equals(createPublicKey(publicKeyPem));
}

type Consume = NodeTokenService["consume"];

/** Replaces the controller's token consume for one test; returns the function that restores it. */
function interceptConsume(c: GatewayController, wrap: (original: Consume) => Consume): () => void {
  const tokens = c.controller.nodeTokens;
  const original = tokens.consume.bind(tokens);
  tokens.consume = wrap(original);
  return () => {
    tokens.consume = original;
  };
}

describe("daemon gateway: joining with the daemon's own key", { timeout: 90_000 }, () => {
  let c: GatewayController;
  const clients: TestClient[] = [];
  const daemons: DaemonProcess[] = [];
  before(async () => {
    c = await startGatewayController();
  });
  after(async () => {
    for (const t of clients) t.client.stop();
    for (const d of daemons) await d.kill9();
    await c.stop();
    cleanupDirs();
  });

  it("the certificate is issued for the daemon's key, no private key comes back, and it connects over mTLS", async () => {
    const { token, id } = await createToken(c);
    const key = rsaKey();
    const joined = await rawJoin(c.grpcAddress, { token, csr_public_key_pem: key.publicKeyPem });
    assert.equal(joined.error, undefined);
    const response = joined.response!;
    assert.match(response.node_id, /^node-[0-9a-f]{12}$/);
    assert.equal(response.private_key_pem, "");
    assert.ok(certificateIsFor(response.certificate_pem, key.publicKeyPem));
    assert.equal(certificateCommonName(response.certificate_pem), response.node_id);
    assert.ok(verifyIssuedBy({ certPem: response.ca_certificate_pem }, response.certificate_pem));
    assert.match(c.logs(), new RegExp(`Node ${response.node_id} joined with its own key`));
    const listed = await c.controller.nodeTokens.get(id);
    assert.equal(listed.status, "USED");
    assert.equal(listed.usedByNodeId, response.node_id);

    const client = rawClient(c.grpcAddress, { caPem: response.ca_certificate_pem, keyPem: key.keyPem, certificatePem: response.certificate_pem });
    try {
      const stream = client.Connect();
      const ack = new Promise<ControllerMessage>((resolve, reject) => {
        stream.on("data", (m: ControllerMessage) => m.payload === "hello_ack" && resolve(m));
        stream.on("error", reject);
      });
      stream.write(
        daemonMessage("hello", { protocol_version: 1, daemon_version: "x", node_id: response.node_id, total_memory_mb: 1, used_memory_mb: 0, hostname: "h" }),
      );
      assert.equal((await ack).payload, "hello_ack");
      await eventually(() => eventsOf(c, "NODE_CONNECTED", response.node_id)[0], "NODE_CONNECTED");
      await eventually(async () => (await getNode(c, response.node_id))?.state === "ONLINE", "ONLINE");
      stream.on("error", () => undefined);
      stream.cancel();
    } finally {
      client.close();
    }
  });

  it("a second Join with the same token and key (a lost answer) gets the same node id and a certificate for that key", async () => {
    const { token } = await createToken(c);
    const key = rsaKey();
    const first = (await rawJoin(c.grpcAddress, { token, csr_public_key_pem: key.publicKeyPem })).response!;
    const again = await rawJoin(c.grpcAddress, { token, csr_public_key_pem: key.publicKeyPem });
    assert.equal(again.error, undefined);
    assert.equal(again.response!.node_id, first.node_id);
    assert.equal(again.response!.private_key_pem, "");
    assert.ok(certificateIsFor(again.response!.certificate_pem, key.publicKeyPem));
    assert.equal(certificateCommonName(again.response!.certificate_pem), first.node_id);
    assert.match(c.logs(), new RegExp(`Node ${first.node_id} repeated its join with the same token and key`));
    // Asking for the claimed id explicitly is a retry too; asking for another is not.
    assert.equal((await rawJoin(c.grpcAddress, { token, node_id: first.node_id, csr_public_key_pem: key.publicKeyPem })).response?.node_id, first.node_id);
    const otherId = await rawJoin(c.grpcAddress, { token, node_id: "someone-else", csr_public_key_pem: key.publicKeyPem });
    assert.equal(otherId.error?.code, grpc.status.UNAUTHENTICATED);
  });

  it("the same token with another key, with no key, or revoked is refused", async () => {
    const { token, id } = await createToken(c);
    const key = rsaKey();
    assert.ok((await rawJoin(c.grpcAddress, { token, csr_public_key_pem: key.publicKeyPem })).response);
    const otherKey = await rawJoin(c.grpcAddress, { token, csr_public_key_pem: rsaKey().publicKeyPem });
    assert.equal(otherKey.error?.code, grpc.status.UNAUTHENTICATED);
    assert.equal(otherKey.error?.details, "Node join token has already been used");
    const noKey = await rawJoin(c.grpcAddress, { token });
    assert.equal(noKey.error?.code, grpc.status.UNAUTHENTICATED);
    assert.equal(noKey.error?.details, "Node join token has already been used");
    await revokeToken(c, id);
    const revoked = await rawJoin(c.grpcAddress, { token, csr_public_key_pem: key.publicKeyPem });
    assert.equal(revoked.error?.code, grpc.status.UNAUTHENTICATED);
    assert.equal(revoked.error?.details, "Node join token has been revoked");
  });

  it("a bad public key is refused with INVALID_ARGUMENT and a clear message; the token stays usable", async () => {
    const { token, id } = await createToken(c);
    const ec = generateKeyPairSync("ec", {
      namedCurve: "P-256",
      publicKeyEncoding: { type: "spki", format: "pem" },
      privateKeyEncoding: { type: "pkcs8", format: "pem" },
    });
    const cases: [string, RegExp][] = [
      ["not a key", /^Invalid public key: expected a PEM-encoded SPKI public key/],
      ["-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n", /^Invalid public key: cannot be parsed$/],
      [ec.publicKey, /^Invalid public key: expected an RSA key, got ec$/],
      [rsaKey(1024).publicKeyPem, /^Invalid public key: RSA key of 1024 bits is too small \(at least 2048\)$/],
      [rsaKey().keyPem, /^Invalid public key: expected a PEM-encoded SPKI public key/],
    ];
    for (const [pem, message] of cases) {
      const refused = await rawJoin(c.grpcAddress, { token, csr_public_key_pem: pem });
      assert.equal(refused.error?.code, grpc.status.INVALID_ARGUMENT, pem.slice(0, 40));
      assert.match(refused.error!.details, message);
    }
    assert.equal((await c.controller.nodeTokens.get(id)).status, "ACTIVE");
    const key = rsaKey();
    const joined = await rawJoin(c.grpcAddress, { token, csr_public_key_pem: key.publicKeyPem });
    assert.equal(joined.error, undefined);
    assert.ok(certificateIsFor(joined.response!.certificate_pem, key.publicKeyPem));
  });

  it("a daemon whose first answer is lost (its join deadline passes after the token was consumed) retries with the stored key and joins", async () => {
    const { token } = await createToken(c);
    const attempts: TokenConsumeResult[] = [];
    let t: TestClient | null = null;
    const restore = interceptConsume(c, (original) => async (...args) => {
      const result = await original(...args);
      attempts.push(result);
      // The first answer is held until the daemon gave up on it and began its next attempt: the
      // controller consumed the token, the daemon never sees the answer.
      if (attempts.length === 1) await eventually(() => t!.states.filter((s) => s === "joining").length >= 2, "the daemon's second join attempt");
      return result;
    });
    try {
      t = testClient([c.grpcAddress], { token, joinTimeoutMs: 1_000 });
      clients.push(t);
      await t.client.start();
    } finally {
      restore();
    }
    assert.equal(attempts.length, 2);
    assert.ok(attempts[0]!.ok && !attempts[0]!.retry);
    assert.ok(attempts[1]!.ok && attempts[1]!.retry);
    const nodeId = attempts[0]!.ok ? attempts[0]!.nodeId : "";
    assert.equal(t.client.nodeId, nodeId);
    const identity = (await readIdentity(t.dataDir))!;
    assert.equal(identity.nodeId, nodeId);
    assert.ok(certificateIsFor(identity.certificatePem, identity.keyPem));
    assert.equal(statSync(join(t.dataDir, IDENTITY_FILES.key)).mode & 0o777, 0o600);
    await eventually(() => eventsOf(c, "NODE_CONNECTED", nodeId)[0], "NODE_CONNECTED");
    await eventually(() => t!.client.state === "connected", "client connected");
  });

  it("a cloud-daemon process killed after the controller consumed its token joins after a restart, with the key it stored first", async () => {
    const { token } = await createToken(c);
    let first: DaemonProcess | null = null;
    const attempts: TokenConsumeResult[] = [];
    const restore = interceptConsume(c, (original) => async (...args) => {
      const result = await original(...args);
      attempts.push(result);
      if (attempts.length === 1) {
        // The daemon dies before the answer reaches it; its stored key is all that is left.
        await first!.kill9();
        throw new Error("answer lost (test)");
      }
      return result;
    });
    try {
      first = spawnDaemon([c.grpcAddress], token);
      daemons.push(first);
      await eventually(
        () => attempts.length === 1 && first!.child.exitCode === null && first!.child.signalCode !== null,
        `first join consumed and the daemon killed\n${first.output()}`,
        processWaitMs,
      );
      const keyPath = join(first.dataDir, IDENTITY_FILES.key);
      assert.ok(existsSync(keyPath), "the key was stored before the first join");
      assert.equal(existsSync(join(first.dataDir, IDENTITY_FILES.nodeId)), false, "no identity yet");
      const storedKey = readFileSync(keyPath, "utf8");

      const restarted = spawnDaemon([c.grpcAddress], token, {}, first.dir);
      daemons.push(restarted);
      const nodeId = attempts[0]!.ok ? attempts[0]!.nodeId : "";
      await eventually(() => eventsOf(c, "NODE_CONNECTED", nodeId)[0], `NODE_CONNECTED after the restart\n${restarted.output()}`, processWaitMs);
      assert.equal(attempts.length, 2);
      assert.ok(attempts[1]!.ok && attempts[1]!.retry);
      assert.equal(readFileSync(keyPath, "utf8"), storedKey, "the same key");
      const identity = (await readIdentity(restarted.dataDir))!;
      assert.equal(identity.nodeId, nodeId);
      assert.ok(certificateIsFor(identity.certificatePem, storedKey));
      await restarted.stop();
    } finally {
      restore();
    }
  });
});
