// One trace from a plugin request through the controller to the daemon: a controller and a real
// `cloud-daemon` child both export by OTLP/HTTP to a receiver this test runs. Both sample no root
// span (samplerRatio 0), so what arrives was continued from the plugin's sampled traceparent
// (parent-based sampling). Along the way, the scheduler's tick metrics and the node-drain and
// healing gauges move on the running controller.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { api, cleanupDirs, createToken, spawnDaemon, startGatewayController, type DaemonProcess, type GatewayController } from "../gateway/harness.js";
import { SpanKinds, startOtlpReceiver, type OtlpReceiver } from "../support/otlp-receiver.js";
import { eventually } from "../support/wait.js";

const metricValue = async (c: GatewayController, name: string): Promise<number> => {
  const text = await (await fetch(`${c.url}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${name} `));
  assert.ok(line, `${name} is exposed`);
  return Number(line.slice(name.length + 1));
};

const { SERVER, CLIENT } = SpanKinds;

describe("tracing from a plugin through the controller to the daemon", { timeout: 150_000 }, () => {
  let receiver: OtlpReceiver;
  let c: GatewayController;
  let daemon: DaemonProcess | undefined;
  let instance: { id: string; group: string; node: string };

  before(async () => {
    receiver = await startOtlpReceiver();
    c = await startGatewayController({
      scheduler: { evaluationIntervalMs: 1_000 },
      config: { telemetry: { enabled: true, otlpEndpoint: receiver.url, samplerRatio: 0, traceUiTemplate: "https://traces.example/trace/{traceId}?view=1" } },
    });
    const created = await api(c, "POST", "/api/v1/groups", {
      name: "traced",
      platform: "simulated",
      scalingMode: "DYNAMIC",
      minInstances: 1,
      maxInstances: 1,
      memoryMb: 128,
      maxPlayers: 0,
      portRange: { start: 24150, end: 24160 },
    });
    assert.equal(created.status, 201, JSON.stringify(created.json));
    const { token } = await createToken(c);
    daemon = spawnDaemon([c.grpcAddress], token, { maxMemoryMb: 1024, telemetry: { enabled: true, otlpEndpoint: receiver.url, samplerRatio: 0 } });
    const [running] = await eventually(
      async () => {
        const list = (await api(c, "GET", "/api/v1/services?group=traced&state=RUNNING")).json as { id: string; group: string; node: string }[];
        return list.length === 1 ? list : null;
      },
      () => `the instance RUNNING\n${daemon?.output().slice(-2_000)}`,
      60_000,
    );
    instance = running!;
  });

  after(async () => {
    await daemon?.stop();
    await c?.stop();
    await receiver?.close();
    cleanupDirs();
  });

  it("continues the plugin's traceparent in the controller's spans and the daemon's", async () => {
    const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
    const pluginSpanId = "00f067aa0ba902b7";
    // A token of the instance's current start, as the start command carried.
    const startId = (await c.controller.services.instances.getDoc(instance.id))?.startId;
    const workload = c.controller.services.credentials.issueWorkloadToken({ instanceId: instance.id, group: instance.group, node: instance.node }, startId);
    const res = await fetch(`${c.url}/api/plugin/ready`, {
      method: "POST",
      headers: { authorization: `Bearer ${workload.token}`, "content-type": "application/json", traceparent: `00-${traceId}-${pluginSpanId}-01` },
      body: "{}",
    });
    assert.equal(res.status, 200, await res.text());
    assert.equal(res.headers.get("x-trace-id"), traceId);
    assert.equal(res.headers.get("x-trace-url"), `https://traces.example/trace/${traceId}?view=1`);

    const ofTrace = () => receiver.spans.filter((s) => s.traceId === traceId);
    const [server, client, handled] = await eventually(
      () => {
        const spans = ofTrace();
        const serverSpan = spans.find((s) => s.service === "cloud-controller" && s.kind === SERVER);
        const clientSpan = spans.find((s) => s.service === "cloud-controller" && s.kind === CLIENT);
        const daemonSpan = spans.find((s) => s.service === "cloud-daemon");
        return serverSpan && clientSpan && daemonSpan ? [serverSpan, clientSpan, daemonSpan] : null;
      },
      () => `the controller's and the daemon's spans of the trace; received ${JSON.stringify(receiver.spans)}\n${daemon?.output().slice(-2_000)}`,
      30_000,
    );
    assert.equal(server!.name, "POST /api/plugin/ready");
    assert.equal(server!.parentSpanId, pluginSpanId, "the controller continues the plugin's span");
    assert.equal(client!.name, "daemon mark_instance_ready");
    assert.equal(client!.parentSpanId, server!.spanId, "the command is sent inside the request's span");
    assert.equal(handled!.name, "handle mark_instance_ready");
    assert.equal(handled!.kind, SERVER);
    assert.equal(handled!.parentSpanId, client!.spanId, "the daemon continues the traceparent of the stream's message");
    assert.ok(
      receiver.requests.every((r) => r.path === "/v1/traces"),
      "spans go to <otlpEndpoint>/v1/traces",
    );
    // Root spans are sampled with samplerRatio 0: nothing else (the scheduler's own dispatches, the
    // plugin's untraced calls through the relay) is exported.
    assert.deepEqual(
      receiver.spans.filter((s) => s.traceId !== traceId),
      [],
    );
  });

  it("an untraced request is sampled at samplerRatio (0 here): no trace headers", async () => {
    const res = await fetch(`${c.url}/api/v1/overview`, { headers: { authorization: `Bearer ${c.adminToken}` } });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("x-trace-id"), null);
  });

  it("feeds the scheduler's tick metrics", async () => {
    await eventually(async () => (await metricValue(c, "cloud_scheduler_groups_evaluated_count")) >= 2, "two ticks closed", 20_000);
    assert.ok((await metricValue(c, "cloud_scheduler_tick_duration_seconds_count")) >= 1, "evaluation passes timed");
    assert.ok((await metricValue(c, "cloud_scheduler_groups_evaluated_sum")) >= 1, "the group evaluated in some tick");
    const lagMs = await metricValue(c, "cloud_scheduler_last_tick_lag_millis");
    assert.ok(lagMs >= 0 && lagMs < 10_000, `lag ${lagMs} ms below a few intervals`);
  });

  it("counts a drain waiting for the node's instances, and instances to heal on an unreachable node", async () => {
    assert.equal(await metricValue(c, "cloud_workflows_node_drains"), 0);
    assert.equal((await api(c, "POST", `/api/v1/nodes/${instance.node}/drain`)).status, 200);
    await eventually(async () => (await metricValue(c, "cloud_workflows_node_drains")) === 1, "the drain waiting", 10_000);
    assert.equal((await api(c, "POST", `/api/v1/nodes/${instance.node}/undrain`)).status, 200);
    await eventually(async () => (await metricValue(c, "cloud_workflows_node_drains")) === 0, "no drain waiting", 10_000);

    assert.equal(await metricValue(c, "cloud_workflows_healing_actions"), 0);
    await daemon!.kill9();
    // The node is UNREACHABLE for its grace period (60 s) before its instance is replaced.
    await eventually(async () => (await metricValue(c, "cloud_workflows_healing_actions")) === 1, "the instance waiting to be healed", 30_000);
    assert.equal(await metricValue(c, "cloud_workflows_start_retries"), 0);
  });
});
