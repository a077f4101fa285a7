// The daemon side without a full controller where possible: daemon.yml parsing, the back-off
// bound, rotating to a live controller address, and a hello_ack with protocol_compatible false
// and a controller falling silent (from a minimal NodeGateway server): the first ends the client for
// good, the second makes it reconnect.
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { createClusterCa, issueNodeCertificate } from "../../src/cluster/identity/ca.js";
import { DaemonConfigError, locateDaemonConfig, parseDaemonConfig } from "../../src/daemon/config.js";
import { backoffDelayMs, GatewayClientError, IDENTITY_FILES } from "../../src/daemon/gateway-client.js";
import { CONTROLLER_CERTIFICATE_NAME } from "../../src/wire/certificate-names.js";
import { controllerMessage, loadNodeGateway, type ControllerMessage, type DaemonMessage } from "../../src/wire/daemon-proto.js";
import { freePorts } from "../cluster/support/free-ports.js";
import { cleanupDirs, createToken, eventsOf, startGatewayController, tempDir, testClient, type GatewayController, type TestClient } from "./harness.js";
import { eventually } from "../support/wait.js";

describe("daemon.yml", () => {
  it("fills defaults and resolves directories against the file's directory", () => {
    const config = parseDaemonConfig({ controllers: ["127.0.0.1:9090"], token: "cnt_x" }, "/etc/cloud");
    assert.equal(config.workDir, "/etc/cloud/work");
    assert.equal(config.dataDir, "/etc/cloud/data");
    assert.ok(config.maxMemoryMb > 0);
    assert.equal(config.reconnectDelayMinMs, 500);
    assert.equal(config.reconnectDelayMaxMs, 30_000);
    assert.equal(parseDaemonConfig({ controllers: ["a:1"], dataDir: "/var/lib/d", maxMemoryMb: 512 }, "/x").dataDir, "/var/lib/d");
  });

  it("names the offending key", () => {
    assert.throws(
      () => parseDaemonConfig({}, "/x"),
      (err: unknown) => err instanceof DaemonConfigError && /controllers/.test(err.message),
    );
    assert.throws(() => parseDaemonConfig({ controllers: [] }, "/x"), /controllers/);
    assert.throws(() => parseDaemonConfig({ controllers: ["a:1"], maxMemoryMB: 1 }, "/x"), DaemonConfigError);
    assert.throws(() => parseDaemonConfig({ controllers: ["a:1"], reconnectDelayMinMs: 10, reconnectDelayMaxMs: 5 }, "/x"), /reconnectDelayMaxMs/);
  });

  it("is located by --config, then CLOUD_DAEMON_CONFIG, then ./daemon.yml", () => {
    assert.equal(locateDaemonConfig(["--config", "/a/d.yml"], { CLOUD_DAEMON_CONFIG: "/b/d.yml" }), "/a/d.yml");
    assert.equal(locateDaemonConfig(["--config=/a/e.yml"], {}), "/a/e.yml");
    assert.equal(locateDaemonConfig([], { CLOUD_DAEMON_CONFIG: "/b/d.yml" }), "/b/d.yml");
    assert.match(locateDaemonConfig([], {}), /daemon\.yml$/);
  });
});

describe("reconnect back-off", () => {
  it("doubles from the minimum, never exceeds the maximum, jitters ±50 %", () => {
    assert.equal(
      backoffDelayMs(0, 100, 10_000, () => 0.5),
      100,
    );
    assert.equal(
      backoffDelayMs(3, 100, 10_000, () => 0.5),
      800,
    );
    assert.equal(
      backoffDelayMs(0, 100, 10_000, () => 0),
      50,
    );
    for (let attempt = 0; attempt < 80; attempt++) {
      for (const r of [0, 0.5, 0.999]) {
        const delayMs = backoffDelayMs(attempt, 100, 10_000, () => r);
        assert.ok(delayMs >= 50 && delayMs <= 10_000, `${attempt} ${r} → ${delayMs}`);
      }
    }
  });
});

describe("gateway client against servers", { timeout: 60_000 }, () => {
  const clients: TestClient[] = [];
  const stops: (() => Promise<void>)[] = [];
  after(async () => {
    for (const t of clients) t.client.stop();
    for (const stop of stops) await stop();
    cleanupDirs();
  });

  it("rotates past a dead controller address to a live one, for the join and the stream", async () => {
    const c: GatewayController = await startGatewayController();
    stops.push(() => c.stop());
    const [deadPort] = await freePorts(1);
    const { token } = await createToken(c);
    const t = testClient([`127.0.0.1:${deadPort}`, c.grpcAddress], { token });
    clients.push(t);
    await t.client.start();
    await eventually(() => eventsOf(c, "NODE_CONNECTED", t.client.nodeId!)[0], "connected through the live address");
  });

  /** A minimal NodeGateway server over mutual TLS that answers hello with `ack`; counts Connect calls. */
  async function fakeController(ack: { protocol_version: number; protocol_compatible: boolean; heartbeat_interval_ms: number }, nodeId: string) {
    const ca = createClusterCa();
    const serverCert = issueNodeCertificate(ca, { nodeId: CONTROLLER_CERTIFICATE_NAME });
    const nodeCert = issueNodeCertificate(ca, { nodeId });
    const state = { connects: 0 };
    const server = new grpc.Server();
    server.addService(loadNodeGateway().service, {
      Join: (_call: unknown, callback: grpc.sendUnaryData<unknown>) => callback({ code: grpc.status.UNIMPLEMENTED }),
      Connect: (call: grpc.ServerDuplexStream<DaemonMessage, ControllerMessage>) => {
        state.connects += 1;
        call.on("error", () => undefined);
        call.once("data", () => call.write(controllerMessage("hello_ack", { ...ack, session_id: `s${state.connects}`, api_credential: null, http_port: 0 })));
      },
    });
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync(
        "127.0.0.1:0",
        grpc.ServerCredentials.createSsl(
          Buffer.from(ca.certPem),
          [{ private_key: Buffer.from(serverCert.keyPem), cert_chain: Buffer.from(serverCert.certPem) }],
          true,
        ),
        (err, p) => (err ? reject(err) : resolve(p)),
      ),
    );
    stops.push(async () => void server.forceShutdown());
    const dataDir = tempDir("cloud-gw-fake-");
    writeFileSync(join(dataDir, IDENTITY_FILES.key), nodeCert.keyPem);
    writeFileSync(join(dataDir, IDENTITY_FILES.certificate), nodeCert.certPem);
    writeFileSync(join(dataDir, IDENTITY_FILES.ca), ca.certPem);
    writeFileSync(join(dataDir, IDENTITY_FILES.nodeId), `${nodeId}\n`);
    return { address: `127.0.0.1:${port}`, dataDir, state };
  }

  it("a controller that stops pinging (half-open stream) is left and reconnected to", async () => {
    const fake = await fakeController({ protocol_version: 1, protocol_compatible: true, heartbeat_interval_ms: 100 }, "node-silent");
    const t = testClient([fake.address], { dataDir: fake.dataDir });
    clients.push(t);
    await t.client.start();
    await eventually(() => fake.state.connects >= 2, "a reconnect after the controller fell silent");
    assert.ok(t.states.includes("backoff"));
  });

  it("a hello_ack with protocol_compatible false stops the client without reconnecting", async () => {
    const fake = await fakeController({ protocol_version: 2, protocol_compatible: false, heartbeat_interval_ms: 0 }, "node-incompatible");
    const dataDir = fake.dataDir;
    const fatal: GatewayClientError[] = [];
    const t = testClient([fake.address], { dataDir, onFatal: (e) => void fatal.push(e) });
    clients.push(t);
    await t.client.start();
    await eventually(() => fatal[0], "fatal error");
    assert.equal(fatal[0]!.code, "PROTOCOL_INCOMPATIBLE");
    assert.equal(t.client.state, "stopped");
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(fake.state.connects, 1, "no reconnect after an incompatible controller");
  });
});
