import { test } from "node:test";
import assert from "node:assert/strict";
import { X509Certificate, createPrivateKey } from "node:crypto";
import { once } from "node:events";
import tls from "node:tls";
import type { AddressInfo } from "node:net";
import { certificateCommonName, certificateFingerprintSha256, createClusterCa, issueNodeCertificate, verifyIssuedBy } from "../../src/cluster/identity/ca.js";
import { FakeClock } from "../support/fake-clock.js";

const ca = createClusterCa({ commonName: "test CA" });
const node = issueNodeCertificate(ca, { nodeId: "controller-1", hosts: ["10.0.0.7", "cp1.example"] });

test("the CA certificate is self-signed and may sign certificates", () => {
  const x509 = new X509Certificate(ca.certPem);
  assert.equal(x509.ca, true);
  assert.equal(x509.checkIssued(x509), true);
  assert.match(x509.subject, /CN=test CA/);
});

test("a node certificate names the node and its hosts and is issued by the CA", () => {
  const x509 = new X509Certificate(node.certPem);
  assert.equal(x509.ca, false);
  assert.equal(certificateCommonName(node.certPem), "controller-1");
  assert.equal(x509.checkIssued(new X509Certificate(ca.certPem)), true);
  const sans = x509.subjectAltName ?? "";
  for (const expected of ["DNS:localhost", "DNS:controller-1", "DNS:cp1.example", "IP Address:127.0.0.1", "IP Address:10.0.0.7"]) {
    assert.ok(sans.includes(expected), `${expected} in ${sans}`);
  }
  assert.deepEqual(x509.keyUsage?.sort(), ["1.3.6.1.5.5.7.3.1", "1.3.6.1.5.5.7.3.2"]);
  assert.equal(x509.checkPrivateKey(createPrivateKey(node.keyPem)), true);
});

test("verifyIssuedBy accepts the CA's certificates and rejects foreign, expired and malformed ones", () => {
  assert.equal(verifyIssuedBy(ca, node.certPem), true);
  const otherCa = createClusterCa();
  assert.equal(verifyIssuedBy(otherCa, node.certPem), false);
  assert.equal(verifyIssuedBy(ca, "not a certificate"), false);
  const clock = new FakeClock(Date.UTC(2020, 0, 1));
  const shortLived = issueNodeCertificate(ca, { nodeId: "n2", validityDays: 1, clock });
  assert.equal(verifyIssuedBy(ca, shortLived.certPem, clock), true);
  clock.advance(2 * 24 * 60 * 60 * 1000);
  assert.equal(verifyIssuedBy(ca, shortLived.certPem, clock), false);
});

test("the fingerprint matches the platform's SHA-256 fingerprint", () => {
  assert.equal(certificateFingerprintSha256(node.certPem), new X509Certificate(node.certPem).fingerprint256);
});

test("two node certificates complete a mutual TLS handshake; a foreign client is refused", async () => {
  const client = issueNodeCertificate(ca, { nodeId: "controller-2" });
  const server = tls.createServer({ key: node.keyPem, cert: node.certPem, ca: ca.certPem, requestCert: true, rejectUnauthorized: true }, (socket) => {
    socket.end(String(socket.getPeerCertificate(false).subject.CN));
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  try {
    const { port } = server.address() as AddressInfo;
    const socket = tls.connect({ host: "127.0.0.1", port, key: client.keyPem, cert: client.certPem, ca: ca.certPem });
    let received = "";
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => (received += chunk));
    await once(socket, "end");
    assert.equal(received, "controller-2");

    const foreignCa = createClusterCa();
    const foreign = issueNodeCertificate(foreignCa, { nodeId: "intruder" });
    const rejected = tls.connect({ host: "127.0.0.1", port, key: foreign.keyPem, cert: foreign.certPem, ca: ca.certPem });
    const outcome = await new Promise<string>((resolve) => {
      rejected.on("error", () => resolve("error"));
      rejected.on("data", () => resolve("data"));
      rejected.on("end", () => resolve("end"));
    });
    rejected.destroy();
    assert.notEqual(outcome, "data");
  } finally {
    server.close();
  }
});
