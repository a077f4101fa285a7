/**
 * A replicated key-value server on the project's Raft host, for the real-process tests and the
 * etcd comparison. One process is one member: a Raft peer port (gRPC, mutual TLS) and a client
 * port (gRPC `cloud.raftkv.RaftKv`, plaintext, loopback). Followers answer NOT_LEADER with the
 * leader's client address so clients redirect.
 *
 *   tsx scripts/bench/raft-kv-server.ts --id a --data-dir /tmp/a --ca-dir /tmp/ca \
 *     --members a@127.0.0.1:7001@127.0.0.1:8001,b@...,c@... [--tick-ms 10] [--heartbeat-ticks 10]
 *     [--election-ticks 100] [--snapshot-entries 10000] [--cluster-id raft-kv]
 *
 * Every flag may also be given as an environment variable: --tick-ms is RAFT_KV_TICK_MS.
 * `--ca-dir` holds the cluster CA (ca-cert.pem, ca-key.pem); the node's certificate is issued into
 * the data dir on first start. Prints one line `READY {...}` on stdout once serving.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { monitorEventLoopDelay, performance } from "node:perf_hooks";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { RawNode, decodeConfChange, decodeMessage, encodeConfChange, encodeMessage } from "../../raft/index.js";
import { issueNodeCertificate } from "../../src/cluster/identity/ca.js";
import { GrpcTransport } from "../../src/cluster/raft-host/grpc-transport.js";
import { RaftHostError } from "../../src/cluster/raft-host/host-errors.js";
import { LevelStorage } from "../../src/cluster/raft-host/level-storage.js";
import { RaftNodeHost } from "../../src/cluster/raft-host/raft-node-host.js";
import { parseMembers, type MemberAddress } from "./raft-kv-members.js";
import { raftKvProtoPath } from "./raft-kv-proto.js";
import { encodeKvCommand, KvStateMachine, type CasResult, type PutResult } from "./raft-kv-state-machine.js";

interface ServerFlags {
  id: string;
  clusterId: string;
  dataDir: string;
  caDir: string;
  members: MemberAddress[];
  tickMs: number;
  heartbeatTicks: number;
  electionTicks: number;
  snapshotEntries: number;
}

function readFlags(argv: readonly string[]): ServerFlags {
  const flag = (name: string, fallback?: string): string => {
    const at = argv.indexOf(`--${name}`);
    const value = at >= 0 ? argv[at + 1] : process.env[`RAFT_KV_${name.toUpperCase().replaceAll("-", "_")}`];
    if (value !== undefined) return value;
    if (fallback !== undefined) return fallback;
    throw new Error(`missing --${name}`);
  };
  return {
    id: flag("id"),
    clusterId: flag("cluster-id", "raft-kv"),
    dataDir: flag("data-dir"),
    caDir: flag("ca-dir"),
    members: parseMembers(flag("members")),
    tickMs: Number(flag("tick-ms", "10")),
    heartbeatTicks: Number(flag("heartbeat-ticks", "10")),
    electionTicks: Number(flag("election-ticks", "100")),
    snapshotEntries: Number(flag("snapshot-entries", "10000")),
  };
}

function loadNodeTls(flags: ServerFlags): { caPem: string; certPem: string; keyPem: string } {
  const caPem = readFileSync(join(flags.caDir, "ca-cert.pem"), "utf8");
  const certPath = join(flags.dataDir, "node-cert.pem");
  const keyPath = join(flags.dataDir, "node-key.pem");
  if (!existsSync(certPath) || !existsSync(keyPath)) {
    const ca = { certPem: caPem, keyPem: readFileSync(join(flags.caDir, "ca-key.pem"), "utf8") };
    const issued = issueNodeCertificate(ca, { nodeId: flags.id });
    writeFileSync(keyPath, issued.keyPem, { mode: 0o600 });
    writeFileSync(certPath, issued.certPem);
  }
  return { caPem, certPem: readFileSync(certPath, "utf8"), keyPem: readFileSync(keyPath, "utf8") };
}

const b64 = (bytes: Uint8Array) => Buffer.from(bytes).toString("base64");
const fromB64 = (text: string) => Buffer.from(text, "base64");

interface KvErrorReply {
  code: string;
  message: string;
  leader_id: string;
  leader_address: string;
}

interface PutBatch {
  puts: { id: number; key: string; value: Uint8Array }[];
}

interface PutOutcome {
  id: number;
  error?: KvErrorReply;
  index?: number;
}

interface PutOutcomes {
  outcomes: PutOutcome[];
}

/**
 * One client's put stream: every put is proposed as it arrives and answered once it settles; the
 * answers settled in one run of the microtask queue travel in one message. Answers for a stream
 * that ended are dropped (the client counts those puts as of unknown outcome).
 *
 * The answers go out from a microtask, not from `setImmediate`: the host settles a Ready's
 * proposals from its loop, which runs in the check phase, so an immediate would wait for the next
 * event-loop turn (and its I/O callbacks) before the write, and HTTP/2 then sends the frame one
 * turn later still. All proposals of one Ready settle in the same microtask run (the state machine
 * applies synchronously), so the batching at many puts in flight is the same.
 */
function servePutStream(
  call: grpc.ServerDuplexStream<PutBatch, PutOutcomes>,
  put: (key: string, value: Uint8Array) => Promise<{ index: number }>,
  errorReply: (error: unknown) => KvErrorReply,
): void {
  let settled: PutOutcome[] = [];
  let open = true;
  const flush = () => {
    const outcomes = settled;
    settled = [];
    if (open && outcomes.length > 0) call.write({ outcomes });
  };
  const settle = (outcome: PutOutcome) => {
    if (settled.length === 0) queueMicrotask(flush);
    settled.push(outcome);
  };
  call.on("data", (batch: PutBatch) => {
    for (const { id, key, value } of batch.puts) {
      put(key, value).then(
        ({ index }) => settle({ id, index }),
        (error: unknown) => settle({ id, error: errorReply(error) }),
      );
    }
  });
  const close = () => {
    if (!open) return;
    open = false;
    call.end();
  };
  call.on("end", close);
  call.on("error", close);
  call.on("cancelled", close);
}

/** Diagnostics on stderr (RAFT_KV_TRACE=1): persists, entries, fsync time and event-loop delay per second. */
function traceEverySecond(storage: LevelStorage, host: RaftNodeHost): void {
  const delay = monitorEventLoopDelay({ resolution: 5 });
  delay.enable();
  const stats = { persists: 0, synced: 0, entries: 0, persistMs: 0 };
  const persist = storage.persist.bind(storage);
  storage.persist = async (request) => {
    const startMs = performance.now();
    await persist(request);
    stats.persists += 1;
    if (request.mustSync !== false) stats.synced += 1;
    stats.entries += request.entries.length;
    stats.persistMs += performance.now() - startMs;
  };
  setInterval(() => {
    const role = host.isLeader() ? "leader" : "follower";
    process.stderr.write(
      `trace ${role} persists ${stats.persists} synced ${stats.synced} entries ${stats.entries} persist-ms-avg ${(stats.persistMs / Math.max(1, stats.persists)).toFixed(2)} loop-delay-p50-ms ${(delay.percentile(50) / 1e6).toFixed(1)} p99 ${(delay.percentile(99) / 1e6).toFixed(1)}\n`,
    );
    Object.assign(stats, { persists: 0, synced: 0, entries: 0, persistMs: 0 });
    delay.reset();
  }, 1000).unref();
}

async function main(): Promise<void> {
  const flags = readFlags(process.argv.slice(2));
  const self = flags.members.find((m) => m.id === flags.id);
  if (!self) throw new Error(`--id ${flags.id} is not among --members`);
  mkdirSync(flags.dataDir, { recursive: true });
  const tls = loadNodeTls(flags);

  const storage = await LevelStorage.open(join(flags.dataDir, "raft-log"));
  await storage.bootstrap({ voters: flags.members.map((m) => m.id), learners: [], votersOutgoing: [], learnersNext: [], autoLeave: false });
  const transport = new GrpcTransport({
    clusterId: flags.clusterId,
    nodeId: flags.id,
    listenAddress: self.raftAddress,
    peers: Object.fromEntries(flags.members.map((m) => [m.id, m.raftAddress])),
    tls,
    codec: { encode: encodeMessage, decode: decodeMessage },
  });
  const stateMachine = new KvStateMachine();
  const host = new RaftNodeHost({
    id: flags.id,
    storage,
    stateMachine,
    transport,
    createRawNode: (config) => new RawNode(config),
    confChangeCodec: { encode: encodeConfChange, decode: decodeConfChange },
    tickIntervalMs: flags.tickMs,
    heartbeatTicks: flags.heartbeatTicks,
    electionTicks: flags.electionTicks,
    snapshotIntervalEntries: flags.snapshotEntries,
    compactionMarginEntries: Math.min(1000, Math.floor(flags.snapshotEntries / 2)),
  });
  await transport.start();
  if (process.env.RAFT_KV_TRACE) traceEverySecond(storage, host);
  if (process.env.RAFT_KV_TRACE === "2") {
    // Wall-clock milliseconds (with fractions), comparable across the members' traces.
    const nowMs = () => (performance.timeOrigin + performance.now()).toFixed(1);
    const send = transport.send.bind(transport);
    transport.send = (messages) => {
      process.stderr.write(
        `trace2 ${nowMs()} send ${messages.map((m) => `${m.type}>${m.to}:${m.index}+${m.entries.length}c${m.commit}${m.reject ? "R" : ""}`).join(" ")}\n`,
      );
      send(messages);
    };
    const receive = host.receive.bind(host);
    host.receive = (message) => {
      process.stderr.write(`trace2 ${nowMs()} receive ${message.type}<${message.from}:${message.index}+${message.entries.length}c${message.commit}\n`);
      receive(message);
    };
    const persist = storage.persist;
    storage.persist = async (request) => {
      const t0 = performance.now();
      const startedAt = nowMs();
      await persist(request);
      process.stderr.write(`trace2 ${startedAt} persist ${request.entries.length} sync ${request.mustSync} took ${(performance.now() - t0).toFixed(1)}\n`);
    };
  }

  const kvAddressOf = new Map(flags.members.map((m) => [m.id, m.kvAddress]));
  const errorReply = (error: unknown): KvErrorReply => {
    if (error instanceof RaftHostError) {
      const leader = error.leaderId ?? host.leaderId();
      return { code: error.code, message: error.message, leader_id: leader ?? "", leader_address: (leader && kvAddressOf.get(leader)) || "" };
    }
    throw error;
  };
  const streamErrorReply = (error: unknown): KvErrorReply => {
    try {
      return errorReply(error);
    } catch (unexpected) {
      // Not one of the host's errors: report it with a code whose outcome the client counts as unknown.
      return { code: "INTERNAL", message: String(unexpected), leader_id: "", leader_address: "" };
    }
  };

  const definition = protoLoader.loadSync(raftKvProtoPath, { keepCase: true, longs: Number, defaults: true });
  const loaded = grpc.loadPackageDefinition(definition) as unknown as { cloud: { raftkv: { RaftKv: grpc.ServiceClientConstructor } } };
  const server = new grpc.Server();
  type Handler = (request: any) => Promise<object>;
  const unary =
    (handler: Handler) =>
    (call: grpc.ServerUnaryCall<any, object>, callback: grpc.sendUnaryData<object>): void => {
      handler(call.request).then(
        (reply) => callback(null, reply),
        (error: unknown) => {
          try {
            callback(null, { error: errorReply(error) });
          } catch (unexpected) {
            callback({ code: grpc.status.INTERNAL, details: String(unexpected) });
          }
        },
      );
    };
  const statusReply = () => {
    const status = host.status();
    return {
      id: flags.id,
      leader_id: status.softState.leader ?? "",
      role: status.softState.role,
      term: status.hardState.term,
      applied: host.applied(),
      commit: status.hardState.commit,
    };
  };
  // A plain promise chain (no async wrapper): one microtask between the apply and the answer.
  const put = (key: string, value: Uint8Array): Promise<{ index: number }> =>
    host.propose(encodeKvCommand({ op: "put", key, value: b64(value) })).then((result) => ({ index: (result as PutResult).index }));
  server.addService(loaded.cloud.raftkv.RaftKv.service, {
    Put: unary(async (request: { key: string; value: Uint8Array }) => put(request.key, request.value)),
    PutStream: (call: grpc.ServerDuplexStream<PutBatch, PutOutcomes>) => servePutStream(call, put, streamErrorReply),
    Get: unary(async (request: { key: string }) => {
      await host.linearizableRead();
      const value = stateMachine.get(request.key);
      return value === null ? { found: false } : { found: true, value: fromB64(value) };
    }),
    Cas: unary(async (request: { key: string; expected: Uint8Array; expected_absent: boolean; value: Uint8Array }) => {
      const result = (await host.propose(
        encodeKvCommand({ op: "cas", key: request.key, expected: request.expected_absent ? null : b64(request.expected), value: b64(request.value) }),
      )) as CasResult;
      return { swapped: result.swapped, found: result.current !== null, current: result.current === null ? Buffer.alloc(0) : fromB64(result.current) };
    }),
    Status: unary(async () => statusReply()),
    TransferLeadership: unary(async (request: { to: string }) => {
      await host.transferLeadership(request.to);
      return statusReply();
    }),
  });
  await new Promise<number>((resolve, reject) =>
    server.bindAsync(self.kvAddress, grpc.ServerCredentials.createInsecure(), (error, port) => (error ? reject(error) : resolve(port))),
  );
  host.start();
  process.stdout.write(`READY ${JSON.stringify({ id: flags.id, pid: process.pid, raft: self.raftAddress, kv: self.kvAddress })}\n`);

  const shutdown = async () => {
    server.forceShutdown();
    await host.stop();
    await transport.stop();
    await storage.close();
    process.exit(0);
  };
  process.once("SIGTERM", () => void shutdown());
  process.once("SIGINT", () => void shutdown());
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  main().catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
}
