// Daemon commands between controllers over the cluster's gRPC (`ForwardNodeCommand`): two real
// members of one cluster in this process (Raft on LevelDB, the second joined with a join token),
// each serving its membership service on a gRPC port with the gateway's TLS settings, and a
// DaemonRelay per member over a stand-in daemon gateway and one shared key-value store. A command
// reaches the gateway of the member holding the daemon's stream and its result comes back; every
// failure on the way is a result with a stable code; callers without a member certificate are
// refused before anything reaches a gateway.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { AuditService } from "../../src/audit/audit-service.js";
import { createClusterCa, issueNodeCertificate } from "../../src/cluster/identity/ca.js";
import { ClusterIdentityStore } from "../../src/cluster/identity/cluster-identity.js";
import {
  callUnary,
  controllerServerName,
  fromGrpcError,
  loadClusterMembership,
  type ClusterMembershipClient,
  type ForwardNodeCommandRequest,
} from "../../src/cluster/peers/cluster-proto.js";
import type { ClusterService } from "../../src/cluster/cluster-service.js";
import { MemberClients } from "../../src/cluster/peers/member-clients.js";
import { forwardNodeCommandRequest } from "../../src/cluster/peers/node-commands.js";
import type { RaftTuning } from "../../src/cluster/membership/raft-member.js";
import { joinTokenFilePath, startClusterService } from "../../src/cluster/start-cluster.js";
import { parseControllerConfig } from "../../src/config/load.js";
import { DaemonRelay, type LocalGateway } from "../../src/coordination/daemon-relay.js";
import { NodeSessionRegistry } from "../../src/coordination/session-registry.js";
import type { CommandResult, InstanceCommand } from "../../src/wire/daemon-proto.js";
import { createLogService } from "../../src/logs/logger.js";
import { systemClock } from "../../src/shared/clock.js";
import { MemoryKvStore } from "../../src/store/memory/memory-kv-store.js";
import { openDocumentStore } from "../../src/store/open.js";
import type { DocumentStore } from "../../src/store/ports.js";
import { freePorts } from "./support/free-ports.js";
import { serveClusterService } from "./support/member-server.js";
import { eventually } from "../support/wait.js";

const fastTuning: Partial<RaftTuning> = { tickIntervalMs: 20, electionTicks: 10, heartbeatTicks: 1, commitTimeoutMs: 800 };
const logs = createLogService({ level: "ERROR", format: "JSON" }, { write: () => undefined });
const logger = logs.logger("test");

/** A daemon gateway standing in for the real one: sessions by node id, commands answered by `answer`. */
class StandInGateway implements LocalGateway {
  readonly sessions = new Map<string, string>();
  readonly received: { nodeId: string; command: InstanceCommand }[] = [];
  answer: (command: InstanceCommand) => Promise<CommandResult> = async () => ({ command_id: "cmd-1", ok: true, error_code: "", message: "" });

  isConnected(nodeId: string): boolean {
    return this.sessions.has(nodeId);
  }
  listSessions(): { nodeId: string; sessionId: string }[] {
    return [...this.sessions].map(([nodeId, sessionId]) => ({ nodeId, sessionId }));
  }
  sendCommand(nodeId: string, command: InstanceCommand): Promise<CommandResult> {
    this.received.push({ nodeId, command });
    return this.answer(command);
  }
  onReport(): () => void {
    return () => undefined;
  }
}

interface Member {
  name: string;
  dir: string;
  documents: DocumentStore;
  cluster: ClusterService;
  server: grpc.Server | null;
  grpcAddr: string;
  gateway: StandInGateway;
  relay: DaemonRelay;
}

function client(address: string, credentials: grpc.ChannelCredentials): ClusterMembershipClient {
  const Client = loadClusterMembership();
  return new Client(address, credentials, { "grpc.ssl_target_name_override": controllerServerName }) as unknown as ClusterMembershipClient;
}

const failureOf = (promise: Promise<unknown>): Promise<grpc.ServiceError> =>
  promise.then(
    () => assert.fail("the call was not refused"),
    (err: grpc.ServiceError) => err,
  );

const startCommand: InstanceCommand = {
  type: "start_instance",
  body: {
    group: "lobby",
    fencing_token: 7,
    spec: {
      instance_id: "lobby-1",
      group: "lobby",
      platform: "simulated",
      port: 25565,
      memory_mb: 512,
      static: true,
      environment: { MOTD: "hello" },
      template_hashes: [],
      workload_token: "wt",
      controller_url: "http://127.0.0.1:1",
      variables: { difficulty: "hard" },
      templates: [{ name: "base", hash: "abc" }],
      jar_file: "server.jar",
      platform_version: "",
      build_sha256: "",
    },
  },
};
const stdinCommand: InstanceCommand = { type: "stdin_instance", body: { group: "lobby", fencing_token: 7, instance_id: "lobby-1", line: "say hi" } };

describe("daemon commands forwarded over the cluster's gRPC", { timeout: 120_000 }, () => {
  const kv = new MemoryKvStore({ clock: systemClock });
  const registry = new NodeSessionRegistry({ kv });
  const members: Member[] = [];
  let a: Member;
  let b: Member;

  async function startMember(name: string, grpcPort: number, joinToken: string | null): Promise<Member> {
    const dir = mkdtempSync(join(tmpdir(), `cloud-forwarding-${name}-`));
    const documents = await openDocumentStore({ profile: "development", dataDir: dir, clock: systemClock, ttlSweepIntervalMs: 0 });
    const config = parseControllerConfig(
      { data: { dir }, grpc: { port: grpcPort }, raft: { host: "127.0.0.1", port: 0, dataDir: join(dir, "raft") } },
      { env: {} },
    );
    if (joinToken) writeFileSync(joinTokenFilePath(config.data), joinToken);
    const audit = new AuditService({ documents, clock: systemClock });
    const cluster = await startClusterService({
      cluster: config.cluster,
      raft: config.raft,
      data: config.data,
      http: config.http,
      grpc: config.grpc,
      documents,
      audit,
      clock: systemClock,
      logs,
      onLeft: () => undefined,
      configPath: null,
      tuning: fastTuning,
    });
    const server = await serveClusterService(cluster, audit, grpcPort, logger);
    cluster.announce({ httpPort: 1, grpcPort });
    const gateway = new StandInGateway();
    const relay = new DaemonRelay({
      controllerId: cluster.nodeId,
      kv,
      registry,
      gateway,
      peers: cluster.memberCommandLink(),
      logger,
      forwardedCommandTimeoutMs: 5_000,
    });
    await relay.start();
    const member = { name, dir, documents, cluster, server, grpcAddr: `127.0.0.1:${grpcPort}`, gateway, relay };
    members.push(member);
    return member;
  }

  /** A relay of member `m` that only sends (the member's own relay serves). */
  const sender = (m: Member, forwardedCommandTimeoutMs?: number) =>
    new DaemonRelay({
      controllerId: m.cluster.nodeId,
      kv,
      registry,
      gateway: new StandInGateway(),
      peers: m.cluster.memberCommandLink(),
      logger,
      forwardedCommandTimeoutMs,
    });

  /** Session epochs, one more per session opened (the node record's counter in the controller). */
  let sessionEpochs = 0;
  /** Node `nodeId`'s daemon holds its stream to member `m`. */
  async function connect(m: Member, nodeId: string): Promise<void> {
    const sessionId = `${nodeId}-session`;
    m.gateway.sessions.set(nodeId, sessionId);
    await m.relay.sessionOpened(nodeId, sessionId, ++sessionEpochs);
  }

  before(async () => {
    const [portA, portB] = await freePorts(2);
    a = await startMember("a", portA!, null);
    const { token } = await a.cluster.issueJoinToken({ joinAddrs: [a.grpcAddr] }, "test");
    b = await startMember("b", portB!, token);
    // Each knows where the other's gRPC port is once the other's member record says so.
    await eventually(
      () => a.cluster.grpcAddressOf(b.cluster.nodeId) === b.grpcAddr && b.cluster.grpcAddressOf(a.cluster.nodeId) === a.grpcAddr,
      "both member records carry gRPC addresses",
    );
  });

  after(async () => {
    for (const m of members.reverse()) {
      await m.relay.stop();
      m.server?.forceShutdown();
      await m.cluster.stop();
      await m.documents.close();
      rmSync(m.dir, { recursive: true, force: true });
    }
    await kv.close();
  });

  it("a command for a daemon connected to the other member reaches that member's gateway as sent, and the daemon's result comes back", async () => {
    await connect(a, "node-a");
    await connect(b, "node-b");

    // The decoded result carries `instances`, empty except in the answer to list_instances.
    assert.deepEqual(await b.relay.sendCommand("node-a", startCommand), {
      command_id: "cmd-1",
      ok: true,
      error_code: "",
      message: "",
      instances: [],
      log_lines: [],
    });
    assert.deepEqual(a.gateway.received.at(-1), { nodeId: "node-a", command: startCommand }, "the spec, the group and the fencing token arrive intact");

    b.gateway.answer = async () => ({ command_id: "cmd-2", ok: false, error_code: "UNKNOWN_INSTANCE", message: "no such instance" });
    assert.deepEqual(await a.relay.sendCommand("node-b", stdinCommand), {
      command_id: "cmd-2",
      ok: false,
      error_code: "UNKNOWN_INSTANCE",
      message: "no such instance",
      instances: [],
      log_lines: [],
    });
    assert.deepEqual(b.gateway.received.at(-1), { nodeId: "node-b", command: stdinCommand }, "and the other way round");

    // list_instances: the node's instance reports come back intact.
    const reports = [
      {
        instance_id: "lobby-1",
        group: "lobby",
        state: "RUNNING",
        fencing_token: 7,
        port: 30001,
        pid: 4242,
        exit_code: 0,
        message: "",
        timestamp_ms: 1_700_000_000_000,
      },
      {
        instance_id: "lobby-2",
        group: "lobby",
        state: "STOPPED",
        fencing_token: 7,
        port: 30002,
        pid: 4243,
        exit_code: 0,
        message: "",
        timestamp_ms: 1_700_000_000_500,
      },
    ];
    b.gateway.answer = async () => ({ command_id: "cmd-3", ok: true, error_code: "", message: "", instances: reports });
    assert.deepEqual(await a.relay.sendCommand("node-b", { type: "list_instances", body: {} }), {
      command_id: "cmd-3",
      ok: true,
      error_code: "",
      message: "",
      instances: reports,
      log_lines: [],
    });
    assert.deepEqual(b.gateway.received.at(-1), { nodeId: "node-b", command: { type: "list_instances", body: {} } });

    const before = b.gateway.received.length;
    await b.relay.sendCommand("node-b", stdinCommand);
    assert.equal(b.gateway.received.length, before + 1, "a daemon connected here is sent to directly");
  });

  it("a forwarded command keeps the trace context it was sent under (ForwardNodeCommandRequest.traceparent)", async () => {
    await connect(a, "node-traced");
    a.gateway.answer = async () => ({ command_id: "cmd-t", ok: true, error_code: "", message: "" });
    try {
      const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
      await b.relay.sendCommand("node-traced", { ...stdinCommand, traceparent });
      assert.deepEqual(a.gateway.received.at(-1), { nodeId: "node-traced", command: { ...stdinCommand, traceparent } });
      await b.relay.sendCommand("node-traced", stdinCommand);
      assert.deepEqual(a.gateway.received.at(-1), { nodeId: "node-traced", command: stdinCommand }, "an untraced command arrives without one");
    } finally {
      a.gateway.answer = new StandInGateway().answer;
    }
  });

  it("the holder answers its gateway's failures as results: NODE_NOT_CONNECTED once the stream moved away, the gateway's code otherwise", async () => {
    await connect(a, "node-moving");
    a.gateway.sessions.delete("node-moving");
    const moved = await b.relay.sendCommand("node-moving", stdinCommand);
    assert.equal(moved.error_code, "NODE_NOT_CONNECTED", moved.message);
    assert.match(moved.message, new RegExp(`no longer connected to controller ${a.cluster.nodeId}`));

    await connect(a, "node-slow");
    a.gateway.answer = () => Promise.reject(Object.assign(new Error("Node node-slow did not answer"), { code: "COMMAND_TIMEOUT" }));
    const refused = await b.relay.sendCommand("node-slow", stdinCommand);
    assert.equal(refused.error_code, "COMMAND_TIMEOUT");
    assert.match(refused.message, /Node node-slow did not answer/);
    a.gateway.answer = new StandInGateway().answer;

    const nowhere = await b.relay.sendCommand("node-unknown", stdinCommand);
    assert.equal(nowhere.error_code, "NODE_NOT_CONNECTED", "no session in the registry");
    await registry.register("node-elsewhere", "ctl-000000000000", "s-1", 1);
    const unknownHolder = await b.relay.sendCommand("node-elsewhere", stdinCommand);
    assert.equal(unknownHolder.error_code, "PEER_UNKNOWN", unknownHolder.message);
  });

  it("a forwarded command is bounded by its deadline, and stopping the relay cancels the ones in flight", async () => {
    await connect(a, "node-silent");
    a.gateway.answer = () => new Promise(() => undefined);
    try {
      const short = sender(b, 300);
      const started = Date.now();
      const timedOut = await short.sendCommand("node-silent", stdinCommand);
      assert.equal(timedOut.error_code, "COMMAND_TIMEOUT", timedOut.message);
      assert.ok(Date.now() - started < 3_000, "answered at the deadline");
      await short.stop();

      const stopping = sender(b);
      const seen = a.gateway.received.length;
      const pending = stopping.sendCommand("node-silent", stdinCommand);
      await eventually(() => a.gateway.received.length > seen, "the command reached the holder");
      await stopping.stop();
      assert.equal((await pending).error_code, "RELAY_STOPPED");
      assert.equal((await stopping.sendCommand("node-silent", stdinCommand)).error_code, "RELAY_STOPPED", "nothing is forwarded after the stop");
    } finally {
      a.gateway.answer = new StandInGateway().answer;
    }
  });

  it("refuses callers without a member certificate before anything reaches the gateway", async () => {
    await connect(a, "node-guarded");
    const seen = a.gateway.received.length;
    const material = a.cluster.material()!;
    const request = forwardNodeCommandRequest("node-guarded", stdinCommand);

    const anonymous = client(a.grpcAddr, grpc.credentials.createSsl(Buffer.from(material.caCertPem)));
    // A daemon's certificate: issued by the cluster CA, but its common name is a node id.
    const daemonCertificate = issueNodeCertificate({ certPem: material.caCertPem, keyPem: material.caKeyPem }, { nodeId: "node-guarded" });
    const daemon = client(
      a.grpcAddr,
      grpc.credentials.createSsl(Buffer.from(material.caCertPem), Buffer.from(daemonCertificate.keyPem), Buffer.from(daemonCertificate.certPem)),
    );
    // A member's id under another CA.
    const foreign = issueNodeCertificate(createClusterCa(), { nodeId: b.cluster.nodeId });
    const stranger = client(a.grpcAddr, grpc.credentials.createSsl(Buffer.from(material.caCertPem), Buffer.from(foreign.keyPem), Buffer.from(foreign.certPem)));
    try {
      for (const caller of [anonymous, daemon]) {
        const error = await failureOf(callUnary(caller.ForwardNodeCommand.bind(caller), request, 5_000));
        assert.equal(error.code, grpc.status.PERMISSION_DENIED);
        assert.equal(fromGrpcError(error)?.code, "NOT_A_MEMBER");
      }
      await failureOf(callUnary(stranger.ForwardNodeCommand.bind(stranger), request, 5_000));
    } finally {
      for (const c of [anonymous, daemon, stranger]) c.close();
    }
    assert.equal(a.gateway.received.length, seen, "no refused call reached the gateway");

    // A member's malformed request is refused too.
    const memberClients = new MemberClients(new ClusterIdentityStore(join(b.dir, "raft")).readTls()!);
    try {
      const member = memberClients.client(a.grpcAddr);
      for (const bad of [{ node_id: "node-guarded" }, { ...request, node_id: "" }]) {
        const error = await failureOf(callUnary(member.ForwardNodeCommand.bind(member), bad as ForwardNodeCommandRequest, 5_000));
        assert.equal(error.code, grpc.status.INVALID_ARGUMENT, error.details);
      }
      assert.equal(
        (await callUnary(member.ForwardNodeCommand.bind(member), request, 5_000)).result?.ok,
        true,
        "the same request with a member certificate is served",
      );
    } finally {
      memberClients.close();
    }
  });

  it("a holder whose gRPC port is down: PEER_UNREACHABLE, at once", async () => {
    await connect(b, "node-behind-b");
    b.server!.forceShutdown();
    b.server = null;
    const started = Date.now();
    const result = await a.relay.sendCommand("node-behind-b", stdinCommand);
    assert.equal(result.error_code, "PEER_UNREACHABLE", result.message);
    assert.ok(Date.now() - started < 5_000, "not left to the deadline");
  });
});
