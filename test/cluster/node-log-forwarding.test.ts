// Daemon log reads between controllers over the cluster's gRPC (`ReadNodeLogs`): two real members
// of one cluster in this process (Raft on LevelDB, the second joined with a join token), each
// serving its membership service on a gRPC port with the gateway's TLS settings, each with its own
// per-node log buffers and the node-log access of the routes over one shared key-value store's
// session registry. A read on the member without the daemon's stream answers the holder's records,
// filtered by the holder; a tail there receives the holder's new records and follows the daemon when
// it moves; a holder that cannot be asked is 503 LOG_HOLDER_UNAVAILABLE, never an empty page; callers
// without a member certificate are refused.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { AuditService } from "../../src/audit/audit-service.js";
import { issueNodeCertificate } from "../../src/cluster/identity/ca.js";
import { ClusterIdentityStore } from "../../src/cluster/identity/cluster-identity.js";
import {
  callUnary,
  controllerServerName,
  fromGrpcError,
  loadClusterMembership,
  type ClusterMembershipClient,
  type ReadNodeLogsRequest,
} from "../../src/cluster/peers/cluster-proto.js";
import type { ClusterService } from "../../src/cluster/cluster-service.js";
import { MemberClients } from "../../src/cluster/peers/member-clients.js";
import type { MemberLogLink } from "../../src/cluster/peers/node-logs.js";
import type { RaftTuning } from "../../src/cluster/membership/raft-member.js";
import { joinTokenFilePath, startClusterService } from "../../src/cluster/start-cluster.js";
import { parseControllerConfig } from "../../src/config/load.js";
import { NodeSessionRegistry } from "../../src/coordination/session-registry.js";
import { createLogService } from "../../src/logs/logger.js";
import { ClusterNodeLogs } from "../../src/logs/node-log-access.js";
import { NodeLogBuffers } from "../../src/logs/node-log-buffers.js";
import type { LogRecord } from "../../src/logs/types.js";
import { ApiError } from "../../src/shared/errors.js";
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
const pollIntervalMs = 100;

interface Member {
  name: string;
  dir: string;
  documents: DocumentStore;
  cluster: ClusterService;
  server: grpc.Server | null;
  grpcAddr: string;
  buffers: NodeLogBuffers;
  /** Node ids whose daemon stream this member's gateway holds. */
  connected: Set<string>;
  link: MemberLogLink;
  access: ClusterNodeLogs;
}

const failureOf = (promise: Promise<unknown>): Promise<grpc.ServiceError> =>
  promise.then(
    () => assert.fail("the call was not refused"),
    (err: grpc.ServiceError) => err,
  );

const apiFailureOf = (promise: Promise<unknown>): Promise<ApiError> =>
  promise.then(
    () => assert.fail("the read was answered"),
    (err: unknown) => {
      assert.ok(err instanceof ApiError, String(err));
      return err;
    },
  );

let seq = 0;
const record = (fields: Partial<LogRecord> = {}): LogRecord => ({
  seq: ++seq,
  ts: 1_700_000_000_000 + seq,
  level: "INFO",
  logger: "cloud.daemon",
  thread: "main",
  message: `line ${seq}`,
  ...fields,
});

describe("daemon log reads between controllers over the cluster's gRPC", { timeout: 120_000 }, () => {
  const kv = new MemoryKvStore({ clock: systemClock });
  const registry = new NodeSessionRegistry({ kv });
  const members: Member[] = [];
  let a: Member;
  let b: Member;

  async function startMember(name: string, grpcPort: number, joinToken: string | null): Promise<Member> {
    const dir = mkdtempSync(join(tmpdir(), `cloud-log-reads-${name}-`));
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
    const buffers = new NodeLogBuffers();
    const connected = new Set<string>();
    const link = cluster.memberLogLink();
    link.serve((nodeId, query) => buffers.read(nodeId, query));
    const access = new ClusterNodeLogs({
      local: buffers,
      holders: {
        selfId: cluster.nodeId,
        connectedHere: (nodeId) => connected.has(nodeId),
        holderOf: async (nodeId) => (await registry.lookup(nodeId))?.controllerId ?? null,
        readRemote: (controllerId, nodeId, query) => link.read(controllerId, nodeId, query),
      },
      clock: systemClock,
      pollIntervalMs,
    });
    const member: Member = { name, dir, documents, cluster, server, grpcAddr: `127.0.0.1:${grpcPort}`, buffers, connected, link, access };
    members.push(member);
    return member;
  }

  /** Node `nodeId`'s daemon holds its stream to member `m` (and to no other). */
  let sessionEpochs = 0;
  async function connect(m: Member, nodeId: string): Promise<void> {
    for (const other of members) other.connected.delete(nodeId);
    m.connected.add(nodeId);
    await registry.register(nodeId, m.cluster.nodeId, `${nodeId}-${m.name}`, ++sessionEpochs);
  }

  before(async () => {
    const [portA, portB] = await freePorts(2);
    a = await startMember("a", portA!, null);
    const { token } = await a.cluster.issueJoinToken({ joinAddrs: [a.grpcAddr] }, "test");
    b = await startMember("b", portB!, token);
    await eventually(
      () => a.cluster.grpcAddressOf(b.cluster.nodeId) === b.grpcAddr && b.cluster.grpcAddressOf(a.cluster.nodeId) === a.grpcAddr,
      "both member records carry gRPC addresses",
    );
  });

  after(async () => {
    for (const m of members.reverse()) {
      m.link.close();
      m.server?.forceShutdown();
      await m.cluster.stop();
      await m.documents.close();
      rmSync(m.dir, { recursive: true, force: true });
    }
    await kv.close();
  });

  it("a read on the member without the stream answers the holder's records, filtered by the holder, intact", async () => {
    await connect(a, "node-a");
    const written = [
      record(),
      record({ level: "WARN", logger: "cloud.daemon.relay", message: "refused", mdc: { instance: "lobby-1" } }),
      record({ level: "ERROR", thread: "runner", message: "crashed", throwable: "Error: boom\n    at x (y.js:1:1)" }),
      record({ level: "DEBUG" }),
    ];
    for (const r of written) a.buffers.append("node-a", r, 2);

    const page = await b.access.read("node-a", {});
    assert.deepEqual(page.records, written, "every field crosses, MDC and throwable included");
    assert.deepEqual(page, { records: written, size: 4, capacity: 1000, droppedOnDaemon: 8, lastSeq: written[3]!.seq });
    assert.equal(b.buffers.has("node-a"), false, "nothing was read from the reader's own buffers");

    assert.deepEqual((await b.access.read("node-a", { level: "WARN" })).records, [written[1], written[2]]);
    assert.deepEqual((await b.access.read("node-a", { logger: "cloud.daemon.relay" })).records, [written[1]]);
    assert.deepEqual((await b.access.read("node-a", { limit: 2 })).records, [written[2], written[3]]);
    const after = await b.access.read("node-a", { afterSeq: written[2]!.seq });
    assert.deepEqual(after.records, [written[3]]);
    assert.equal(after.size, 4, "size counts the holder's buffer before filtering");
    assert.deepEqual(await a.access.read("node-a", {}), page, "the holder reads the same from its own buffer");
  });

  it("a daemon connected nowhere, or to the reader, is read from the reader's own buffer", async () => {
    assert.deepEqual(await b.access.read("node-nowhere", {}), { records: [], size: 0, capacity: 1000, droppedOnDaemon: 0, lastSeq: 0 });
    const last = record({ message: "last words" });
    b.buffers.append("node-left-b", last);
    assert.deepEqual((await b.access.read("node-left-b", {})).records, [last], "what a disconnected daemon sent here stays readable here");
    await connect(b, "node-b");
    const own = record();
    b.buffers.append("node-b", own);
    assert.deepEqual((await b.access.read("node-b", {})).records, [own]);
    // The registry naming this very controller (the gateway lost the stream a moment ago) reads here too.
    b.connected.delete("node-b");
    assert.deepEqual((await b.access.read("node-b", {})).records, [own]);
  });

  it("a tail on the member without the stream receives the holder's new records once each, and follows the daemon when it moves", async () => {
    await connect(a, "node-tail");
    const before = record({ message: "before the tail" });
    a.buffers.append("node-tail", before);
    const source = b.access.source("node-tail", { level: "INFO" });
    const received: LogRecord[] = [];
    const stop = source.follow((r) => received.push(r));
    try {
      const replay = await source.read({ level: "INFO" });
      assert.deepEqual(replay.records, [before]);

      const debug = record({ level: "DEBUG", message: "below the tail's level" });
      const fresh = record({ message: "new on the holder" });
      a.buffers.append("node-tail", debug);
      a.buffers.append("node-tail", fresh);
      await eventually(() => received.length >= 1, "the holder's new record reaches the tail", 10_000);
      await new Promise((resolve) => setTimeout(resolve, 3 * pollIntervalMs));
      assert.deepEqual(received, [fresh], "polled once, the holder applying the level");

      // The daemon reconnects to the tail's own controller: its records arrive here, pushed.
      await connect(b, "node-tail");
      const moved = record({ message: "after the move here" });
      b.buffers.append("node-tail", moved);
      assert.deepEqual(received, [fresh, moved]);

      // ... and back to the other member: polled from there again.
      await connect(a, "node-tail");
      const back = record({ message: "after the move back" });
      a.buffers.append("node-tail", back);
      await eventually(() => received.length >= 3, "the record on the new holder reaches the tail", 10_000);
      await new Promise((resolve) => setTimeout(resolve, 3 * pollIntervalMs));
      assert.deepEqual(received, [fresh, moved, back]);
    } finally {
      stop();
    }
    const count = received.length;
    a.buffers.append("node-tail", record());
    await new Promise((resolve) => setTimeout(resolve, 3 * pollIntervalMs));
    assert.equal(received.length, count, "a stopped tail polls no more");
  });

  it("refuses callers without a member certificate, and malformed requests of a member", async () => {
    const material = a.cluster.material()!;
    const request: ReadNodeLogsRequest = { node_id: "node-a", level: "", logger: "", limit: 0, after_seq: 0 };
    const Client = loadClusterMembership();
    const options = { "grpc.ssl_target_name_override": controllerServerName };
    const anonymous = new Client(a.grpcAddr, grpc.credentials.createSsl(Buffer.from(material.caCertPem)), options) as unknown as ClusterMembershipClient;
    // A daemon's certificate: issued by the cluster CA, but its common name is a node id.
    const daemonCertificate = issueNodeCertificate({ certPem: material.caCertPem, keyPem: material.caKeyPem }, { nodeId: "node-a" });
    const daemon = new Client(
      a.grpcAddr,
      grpc.credentials.createSsl(Buffer.from(material.caCertPem), Buffer.from(daemonCertificate.keyPem), Buffer.from(daemonCertificate.certPem)),
      options,
    ) as unknown as ClusterMembershipClient;
    try {
      for (const caller of [anonymous, daemon]) {
        const error = await failureOf(callUnary(caller.ReadNodeLogs.bind(caller), request, 5_000));
        assert.equal(error.code, grpc.status.PERMISSION_DENIED);
        assert.equal(fromGrpcError(error)?.code, "NOT_A_MEMBER");
      }
    } finally {
      anonymous.close();
      daemon.close();
    }

    const memberClients = new MemberClients(new ClusterIdentityStore(join(b.dir, "raft")).readTls()!);
    try {
      const member = memberClients.client(a.grpcAddr);
      for (const bad of [
        { ...request, node_id: "" },
        { ...request, level: "LOUD" },
        { ...request, logger: "x".repeat(257) },
        { ...request, limit: 2_001 },
      ]) {
        const error = await failureOf(callUnary(member.ReadNodeLogs.bind(member), bad, 5_000));
        assert.equal(error.code, grpc.status.INVALID_ARGUMENT, error.details);
      }
      const served = await callUnary(member.ReadNodeLogs.bind(member), request, 5_000);
      assert.equal(served.size, 4, "the same request with a member certificate is served");
    } finally {
      memberClients.close();
    }
  });

  it("a holder that cannot be asked is 503 LOG_HOLDER_UNAVAILABLE, at once, never an empty page", async () => {
    await registry.register("node-elsewhere", "ctl-000000000000", "s-1", 1);
    const unknown = await apiFailureOf(a.access.read("node-elsewhere", {}));
    assert.equal(unknown.status, 503);
    assert.equal(unknown.code, "LOG_HOLDER_UNAVAILABLE");
    assert.match(unknown.message, /no member record here gives its gRPC address/);

    await connect(b, "node-behind-b");
    b.buffers.append("node-behind-b", record());
    b.server!.forceShutdown();
    b.server = null;
    const started = Date.now();
    const down = await apiFailureOf(a.access.read("node-behind-b", {}));
    assert.equal(down.status, 503);
    assert.equal(down.code, "LOG_HOLDER_UNAVAILABLE");
    assert.match(down.message, /cannot be reached/);
    assert.ok(Date.now() - started < 5_000, "not left to the deadline");

    a.link.close();
    const stopping = await apiFailureOf(a.access.read("node-behind-b", {}));
    assert.equal(stopping.code, "LOG_HOLDER_UNAVAILABLE");
    assert.match(stopping.message, /stopping/);
  });
});
