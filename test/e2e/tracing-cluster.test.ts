// One trace across controllers: three controller processes on the production profile (shared
// PostgreSQL, Redis, one Raft cluster) and one real cloud-daemon that knows all three, every
// process exporting by OTLP/HTTP to a receiver this test runs. All sample no root span
// (samplerRatio 0), so what arrives was continued from the operator's sampled traceparent. A
// console command for a RUNNING simulated instance is sent to a controller that does NOT hold the
// daemon's stream: its server span and command span, the holding controller's span of the
// forwarded command, and the daemon's span of the command are one trace with unbroken parent
// links, each controller's spans named by its member id (`service.instance.id`). An unsampled
// traceparent leaves nothing exported anywhere.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Redis } from "ioredis";
import type { ClusterMemberProcess } from "./cluster-harness.js";
import { productionCluster, type ProductionCluster } from "./production-cluster.js";
import { cleanupDirs, type DaemonProcess } from "../gateway/harness.js";
import { SpanKinds, startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from "../support/otlp-receiver.js";
import { eventually } from "../support/wait.js";

const waitMs = 90_000;
/** Spans are batched for 1 s per process; a loaded machine may take much longer. */
const spansWaitMs = 30_000;
const group = "tracedcluster";
const { SERVER, CLIENT } = SpanKinds;

describe("one trace across controllers: operator → controller → holding controller → daemon", { timeout: 600_000 }, () => {
  let receiver: OtlpReceiver;
  let production: ProductionCluster;
  let redisClient: Redis;
  let members: ClusterMemberProcess[] = [];
  let daemon: DaemonProcess | undefined;
  const ids = new Map<ClusterMemberProcess, string>();
  let nodeId = "";
  let instanceId = "";
  /** The controller holding the daemon's stream, and one that does not. */
  let holder: ClusterMemberProcess;
  let sender: ClusterMemberProcess;

  const diagnostics = () => `\n--- received ${JSON.stringify(receiver.spans)}\n--- daemon\n${daemon?.output().slice(-3_000)}`;
  const sessionControllerId = async () => {
    const value = await redisClient.get(`cloud:v1:session:node:${nodeId}`);
    return value ? (JSON.parse(value) as { controllerId: string }).controllerId : null;
  };
  /** The console command route with an operator's `traceparent`. */
  const sendCommand = async (member: ClusterMemberProcess, traceparent: string, line: string) => {
    const res = await fetch(`${member.process!.url}/api/v1/services/${instanceId}/command`, {
      method: "POST",
      headers: { authorization: `Bearer ${member.process!.adminToken}`, "content-type": "application/json", traceparent },
      body: JSON.stringify({ command: line }),
    });
    return { status: res.status, traceId: res.headers.get("x-trace-id"), text: await res.text() };
  };

  before(async () => {
    receiver = await startOtlpReceiver();
    const telemetry = { enabled: true, otlpEndpoint: receiver.url, samplerRatio: 0 };
    production = await productionCluster({
      config: { scheduler: { evaluationIntervalSeconds: 1 }, telemetry },
      daemons: 1,
      daemonConfig: { maxMemoryMb: 1024, reconnectDelayMaxMs: 1_000, telemetry },
      nodesOnlineWaitMs: waitMs,
    });
    members = production.members;
    daemon = production.daemons[0];
    nodeId = production.nodeIds[0]!;
    redisClient = new Redis(production.redis.uri, { lazyConnect: false, maxRetriesPerRequest: 2 });
    const view = (await members[0]!.call("GET", "/api/v1/cluster/members")).json.members as { nodeId: string; raftAddr: string }[];
    for (const m of members) ids.set(m, view.find((x) => x.raftAddr.endsWith(`:${m.raftPort}`))!.nodeId);
    assert.equal(new Set(ids.values()).size, 3, "three member ids");

    const created = await members[0]!.call("POST", "/api/v1/groups", {
      name: group,
      platform: "simulated",
      scalingMode: "DYNAMIC",
      minInstances: 1,
      maxInstances: 1,
      memoryMb: 64,
      maxPlayers: 0,
      portRange: { start: 22600, end: 22620 },
    });
    assert.equal(created.status, 201, created.text);
    const running = await eventually(
      async () => {
        const list = (await members[0]!.call("GET", `/api/v1/services?group=${group}&state=RUNNING`)).json as { id: string }[];
        return list.length === 1 ? list : null;
      },
      () => `the instance RUNNING${diagnostics()}`,
      waitMs,
    );
    instanceId = running[0]!.id;

    const holderId = await eventually(sessionControllerId, "the daemon's session in the registry", waitMs);
    holder = members.find((m) => ids.get(m) === holderId)!;
    assert.ok(holder, `the holder ${holderId} is one of the three`);
    sender = members.find((m) => m !== holder)!;
  });

  after(async () => {
    redisClient?.disconnect();
    await production?.stop();
    await receiver?.close();
    cleanupDirs();
  });

  it("an unsampled traceparent (flags 00) is not continued anywhere: no X-Trace-Id", async () => {
    const unsampledTraceId = "0af7651916cd43dd8448eb211c80319c";
    const reply = await sendCommand(sender, `00-${unsampledTraceId}-b7ad6b7169203331-00`, "say untraced");
    assert.equal(reply.status, 200, reply.text);
    assert.equal(reply.traceId, null);
    // Checked once the sampled trace below has arrived from every process (same exporters, later).
  });

  it("continues the operator's traceparent on the controller it reached, the holding controller and the daemon", async () => {
    // The holder may have changed if the daemon reconnected meanwhile: the sender must not hold it.
    assert.equal(await sessionControllerId(), ids.get(holder), "the daemon's stream is still on the same controller");
    const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
    const operatorSpanId = "00f067aa0ba902b7";
    const reply = await sendCommand(sender, `00-${traceId}-${operatorSpanId}-01`, "say traced across controllers");
    assert.equal(reply.status, 200, reply.text);
    assert.deepEqual(JSON.parse(reply.text), { id: instanceId, command: "say traced across controllers", sent: true });
    assert.equal(reply.traceId, traceId, "X-Trace-Id names the trace");

    const senderId = ids.get(sender)!;
    const holderId = ids.get(holder)!;
    const ofTrace = () => receiver.spans.filter((s) => s.traceId === traceId);
    const find = (spans: ReceivedSpan[], service: string, instance: string | null, kind: number) =>
      spans.find((s) => s.service === service && (instance === null || s.serviceInstanceId === instance) && s.kind === kind);
    const [server, client, forwarded, handled] = await eventually(
      () => {
        const spans = ofTrace();
        const found = [
          find(spans, "cloud-controller", senderId, SERVER),
          find(spans, "cloud-controller", senderId, CLIENT),
          find(spans, "cloud-controller", holderId, SERVER),
          find(spans, "cloud-daemon", null, SERVER),
        ];
        return found.every((s) => s !== undefined) ? (found as ReceivedSpan[]) : null;
      },
      () => `the four spans of the trace (sender ${senderId}, holder ${holderId})${diagnostics()}`,
      spansWaitMs,
    );

    // The controller the operator reached.
    assert.equal(server!.name, "POST /api/v1/services/:id/command");
    assert.equal(server!.parentSpanId, operatorSpanId, "the server span continues the operator's span");
    assert.equal(server!.attributes["http.response.status_code"], 200);
    assert.equal(client!.name, "daemon stdin_instance");
    assert.equal(client!.parentSpanId, server!.spanId, "the command is sent inside the request's span");
    assert.equal(client!.attributes["cloud.node.id"], nodeId);
    // The controller holding the daemon's stream.
    assert.equal(forwarded!.name, "forwarded stdin_instance");
    assert.equal(forwarded!.parentSpanId, client!.spanId, "the holder continues the forwarding controller's command span");
    assert.equal(forwarded!.attributes["cloud.forwarded_by"], senderId);
    assert.equal(forwarded!.attributes["cloud.node.id"], nodeId);
    assert.equal(forwarded!.attributes["cloud.error_code"], undefined, "the daemon accepted the command");
    // The daemon.
    assert.equal(handled!.name, "handle stdin_instance");
    assert.equal(handled!.parentSpanId, forwarded!.spanId, "the daemon continues the holder's span");
    assert.ok(![...ids.values()].includes(handled!.serviceInstanceId), "the daemon's resource is its own, not a controller's");

    // Each process tells itself apart in the exported resource.
    assert.deepEqual(
      [server!, client!, forwarded!].map((s) => s.resource["service.name"]),
      ["cloud-controller", "cloud-controller", "cloud-controller"],
    );
    assert.notEqual(server!.serviceInstanceId, forwarded!.serviceInstanceId, "the two controllers' spans carry their member ids");
    const third = members.find((m) => m !== holder && m !== sender)!;
    assert.ok(
      receiver.spans.every((s) => s.serviceInstanceId !== ids.get(third)),
      "the third controller took no part in the command and exported nothing",
    );
    // Nothing else in the trace: one span per hop.
    assert.deepEqual(
      ofTrace()
        .map((s) => s.name)
        .sort(),
      ["POST /api/v1/services/:id/command", "daemon stdin_instance", "forwarded stdin_instance", "handle stdin_instance"].sort(),
    );
    // Root spans are sampled with samplerRatio 0 and the earlier request's context was flagged not
    // sampled: every exported span belongs to this trace.
    assert.deepEqual(
      receiver.spans.filter((s) => s.traceId !== traceId),
      [],
    );
    assert.ok(
      receiver.requests.every((r) => r.path === "/v1/traces"),
      "spans go to <otlpEndpoint>/v1/traces",
    );
  });
});
