// A daemon's log through every controller: three controller processes on the production profile
// (shared PostgreSQL, Redis, one Raft cluster) and one real cloud-daemon that knows all three. The
// daemon's records are mirrored only to the controller holding its stream; GET
// /api/v1/nodes/{id}/logs answers the same records through each controller, a tail opened on a
// controller without the stream receives the daemon's new lines, a registry entry naming a holder
// that cannot be reached is 503 LOG_HOLDER_UNAVAILABLE (on the stream route before its ticket is
// used), and after the holder is killed with SIGKILL the daemon reconnects to a survivor whose new
// lines are readable through every live controller.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Redis } from "ioredis";
import type { ClusterHarness, ClusterMemberProcess } from "./cluster-harness.js";
import { productionCluster, type ProductionCluster } from "./production-cluster.js";
import { eventually } from "../support/wait.js";
import { cleanupDirs, type DaemonProcess } from "../gateway/harness.js";
import { frameJson, isMessage, openSse, type SseFrame, type SseStream } from "../support/sse-client.js";

const waitMs = 90_000;

interface LogRecordView {
  seq: number;
  ts: number;
  level: string;
  logger: string;
  thread: string;
  message: string;
}
interface LogPage {
  records: LogRecordView[];
  size: number;
  capacity: number;
  level: string;
  logger: string;
}

describe("a daemon's log through every controller", { timeout: 600_000 }, () => {
  let production: ProductionCluster;
  let redisClient: Redis;
  let harness: ClusterHarness;
  let members: ClusterMemberProcess[] = [];
  const killed = new Set<ClusterMemberProcess>();
  let daemon: DaemonProcess;
  let nodeId = "";
  const ids = new Map<ClusterMemberProcess, string>();
  const streams: SseStream[] = [];

  const live = () => members.filter((m) => !killed.has(m));
  const sessionKey = () => `cloud:v1:session:node:${nodeId}`;
  const memberById = (controllerId: string) => members.find((m) => ids.get(m) === controllerId) ?? null;
  const sessionHolder = async () => {
    const value = await redisClient.get(sessionKey());
    return value ? memberById((JSON.parse(value) as { controllerId: string }).controllerId) : null;
  };
  const logs = async (m: ClusterMemberProcess, query = ""): Promise<LogPage> => {
    const reply = await m.call("GET", `/api/v1/nodes/${nodeId}/logs${query}`);
    assert.equal(reply.status, 200, `${m.name}: ${reply.text}`);
    return reply.json as LogPage;
  };
  const ticket = async (m: ClusterMemberProcess) => {
    const reply = await m.call("GET", "/api/v1/system/logs/ticket");
    assert.equal(reply.status, 200, reply.text);
    return reply.json.ticket as string;
  };
  const diagnostics = () => `\n--- daemon\n${daemon.output().slice(-3_000)}`;
  const connectedLines = (records: readonly LogRecordView[]) => records.filter((r) => r.message.startsWith("state connected"));
  const messages = (frames: readonly SseFrame[]) => frames.filter(isMessage).map((f) => frameJson(f) as LogRecordView);

  before(async () => {
    production = await productionCluster({ daemons: 1, daemonConfig: { reconnectDelayMaxMs: 1_000 }, nodesOnlineWaitMs: waitMs });
    ({ harness, members } = production);
    daemon = production.daemons[0]!;
    nodeId = production.nodeIds[0]!;
    redisClient = new Redis(production.redis.uri, { lazyConnect: false, maxRetriesPerRequest: 2 });
    const view = (await members[0]!.call("GET", "/api/v1/cluster/members")).json.members as { nodeId: string; raftAddr: string }[];
    for (const m of members) ids.set(m, view.find((x) => x.raftAddr.endsWith(`:${m.raftPort}`))!.nodeId);
  });

  after(async () => {
    for (const stream of streams) stream.close();
    redisClient?.disconnect();
    await production?.stop();
    cleanupDirs();
  });

  it("answers the same records through each controller, the holder's, filters included", async () => {
    const holder = await eventually(sessionHolder, "the node's session in the registry", waitMs);
    await eventually(
      async () => connectedLines((await logs(holder)).records).length > 0,
      () => `the daemon's records on ${holder.name}${diagnostics()}`,
      waitMs,
    );
    const pages = await eventually(
      async () => {
        const read = await Promise.all(members.map((m) => logs(m)));
        return read.every((p) => JSON.stringify(p) === JSON.stringify(read[0])) ? read : null;
      },
      "the same page through a, b and c",
      waitMs,
    );
    const page = pages[0]!;
    assert.ok(page.records.length >= 2 && page.size === page.records.length, JSON.stringify(page));
    assert.equal(page.capacity, 1000);
    assert.ok(
      page.records.some((r) => r.message.startsWith("Plugin relay listening on") && r.logger === "cloud.daemon"),
      "the daemon's own lines, sent by it",
    );
    const seqs = page.records.map((r) => r.seq);
    assert.deepEqual(
      seqs,
      [...seqs].sort((x, y) => x - y),
      "in the daemon's order",
    );

    const query = `?level=INFO&logger=cloud.daemon&limit=1&afterSeq=${seqs[0]}`;
    const filtered = await Promise.all(members.map((m) => logs(m, query)));
    for (const p of filtered) assert.deepEqual(p, filtered[0]);
    assert.equal(filtered[0]!.records.length, 1);
    assert.deepEqual(
      filtered[0]!.records[0],
      page.records.filter((r) => r.seq > seqs[0]! && r.level !== "DEBUG" && r.level !== "TRACE" && /^cloud\.daemon(\.|$)/.test(r.logger)).at(-1),
    );
    assert.equal(filtered[0]!.level, "INFO");
    assert.equal(filtered[0]!.logger, "cloud.daemon");

    const unknown = await members[1]!.call("GET", "/api/v1/nodes/no-such-node/logs");
    assert.equal(unknown.status, 404, unknown.text);
  });

  it("a registry entry naming a controller that cannot be asked is 503 LOG_HOLDER_UNAVAILABLE, the stream's ticket left unused", async () => {
    const original = await redisClient.get(sessionKey());
    assert.ok(original, "the node's session");
    const holder = (await sessionHolder())!;
    const reader = members.find((m) => m !== holder)!;
    try {
      // A controller id no member record names: nobody to ask.
      await redisClient.set(sessionKey(), JSON.stringify({ controllerId: "ctl-000000000000", sessionId: "planted" }), "PX", 60_000);
      const read = await reader.call("GET", `/api/v1/nodes/${nodeId}/logs`);
      assert.equal(read.status, 503, read.text);
      assert.deepEqual(Object.keys(read.json.error).sort(), ["code", "message", "status"]);
      assert.equal(read.json.error.code, "LOG_HOLDER_UNAVAILABLE");
      assert.equal(read.json.error.status, 503);
      assert.match(read.json.error.message, /ctl-000000000000/);

      const kept = await ticket(reader);
      const refused = await fetch(`${reader.process!.url}/api/v1/nodes/${nodeId}/logs/stream?ticket=${kept}`);
      assert.equal(refused.status, 503, await refused.text());
      await redisClient.set(sessionKey(), original, "PX", 60_000);

      const stream = await openSse(`${reader.process!.url}/api/v1/nodes/${nodeId}/logs/stream?ticket=${kept}`);
      streams.push(stream);
      await stream.waitFor(1, (f) => f.event === "connected", 30_000);
      assert.ok(
        stream.frames.every((f) => f.event !== "error"),
        "the ticket refused with the 503 still opens the stream",
      );
      stream.close();
    } finally {
      await redisClient.set(sessionKey(), original, "PX", 60_000);
    }
  });

  it("a tail on a controller without the stream receives the daemon's new lines; after SIGKILL of the holder its new lines are readable through every live controller", async () => {
    const holder = (await sessionHolder())!;
    const h = members.indexOf(holder);
    // The daemon tries its controllers in turn: after the holder it goes to the next one, so the
    // tail is opened on the third, which holds the stream neither before nor (normally) after.
    const tailed = members[(h + 2) % 3]!;
    const before = await logs(tailed);
    const newestBefore = before.records.at(-1)!.seq;

    const stream = await openSse(`${tailed.process!.url}/api/v1/nodes/${nodeId}/logs/stream?ticket=${await ticket(tailed)}`);
    streams.push(stream);
    await stream.waitFor(before.records.length, isMessage, 30_000);
    assert.deepEqual(messages(stream.frames), before.records, "the replay is the holder's buffer");

    await harness.kill9(holder);
    killed.add(holder);
    const survivor = await eventually(
      async () => {
        const m = await sessionHolder();
        return m && m !== holder ? m : null;
      },
      () => `the daemon's session on a survivor${diagnostics()}`,
      waitMs,
    );

    // The lines the daemon logged while disconnected and on reconnecting reach the tail.
    const [reconnected] = await stream.waitFor(
      1,
      (f) => isMessage(f) && frameJson(f).seq > newestBefore && String(frameJson(f).message).startsWith("state connected"),
      waitMs,
    );
    assert.match(String(frameJson(reconnected!).message), new RegExp(survivor.grpcAddr.replace(/\./g, "\\.")));
    const tailedLines = messages(stream.frames).filter((r) => r.seq > newestBefore);
    assert.ok(
      tailedLines.some((r) => r.level === "WARN" && r.message.startsWith("Disconnected")),
      `the disconnect line: ${JSON.stringify(tailedLines)}`,
    );
    const tailedSeqs = messages(stream.frames).map((r) => r.seq);
    assert.equal(new Set(tailedSeqs).size, tailedSeqs.length, "each line once");
    assert.ok(
      stream.frames.every((f) => f.event !== "error"),
      "the tail stayed open",
    );
    console.log(`holder ${holder.name} killed; the daemon moved to ${survivor.name}; tailed through ${tailed.name}`);

    const pages = await eventually(
      async () => {
        const read = await Promise.all(live().map((m) => logs(m, `?afterSeq=${newestBefore}`)));
        const same = read.every((p) => JSON.stringify(p.records) === JSON.stringify(read[0]!.records));
        return same && read[0]!.records.some((r) => r.seq === frameJson(reconnected!).seq) ? read : null;
      },
      "the new lines through every live controller",
      waitMs,
    );
    const newLines = pages[0]!.records;
    assert.ok(newLines.some((r) => r.message.startsWith("Disconnected")));
    for (const line of newLines.filter((r) => r.seq <= frameJson(reconnected!).seq))
      assert.ok(
        tailedLines.some((t) => JSON.stringify(t) === JSON.stringify(line)),
        `the tail received ${line.message}`,
      );

    // The dead controller's member record still gives its gRPC address: a registry entry naming it
    // cannot be answered (the survivor rewrites its own entry within seconds, so the read retries
    // until it ran against the planted one).
    const reader = live().find((m) => m !== survivor)!;
    const current = (await redisClient.get(sessionKey()))!;
    const planted = JSON.stringify({ controllerId: ids.get(holder)!, sessionId: "planted" });
    try {
      const refused = await eventually(
        async () => {
          await redisClient.set(sessionKey(), planted, "PX", 60_000);
          const read = await reader.call("GET", `/api/v1/nodes/${nodeId}/logs`);
          return (await redisClient.get(sessionKey())) === planted ? read : null;
        },
        "a read against the planted entry",
        30_000,
      );
      assert.equal(refused.status, 503, refused.text);
      assert.equal(refused.json.error.code, "LOG_HOLDER_UNAVAILABLE");
      assert.match(refused.json.error.message, /cannot be reached|did not answer/);
    } finally {
      await redisClient.set(sessionKey(), current, "PX", 60_000);
    }
  });
});
