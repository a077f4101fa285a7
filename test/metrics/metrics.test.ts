import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { register as globalRegistry } from "prom-client";
import { createMetrics, METRICS_CONTENT_TYPE, statusClass } from "../../src/metrics/metrics.js";

/** The sample line for `name{labels}` in exposition text, or undefined. */
function sample(text: string, name: string, labels = ""): string | undefined {
  const prefix = labels ? `${name}{${labels}} ` : `${name} `;
  return text.split("\n").find((line) => line.startsWith(prefix));
}

const value = (text: string, name: string, labels = ""): number | undefined => {
  const line = sample(text, name, labels);
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(" ") + 1));
};

describe("metrics service", () => {
  it("renders text format 0.0.4 with its content type, including default process metrics", async () => {
    const metrics = createMetrics({ enabled: true });
    assert.equal(metrics.contentType, "text/plain; version=0.0.4; charset=utf-8");
    assert.equal(metrics.contentType, METRICS_CONTENT_TYPE);
    const text = await metrics.render();
    assert.match(text, /^# HELP /m);
    assert.match(text, /^# TYPE process_cpu_user_seconds_total counter$/m);
    assert.match(text, /^# TYPE nodejs_heap_size_used_bytes gauge$/m);
  });

  it("never registers into prom-client's global default registry", async () => {
    const before = (await globalRegistry.getMetricsAsJSON()).length;
    createMetrics({ enabled: true });
    createMetrics({ enabled: true }); // a second service in the same process does not clash
    assert.equal((await globalRegistry.getMetricsAsJSON()).length, before);
  });

  it("counts HTTP requests by lower-case method and status class, and times them", async () => {
    const metrics = createMetrics({ enabled: true, processMetrics: false });
    metrics.observeHttp("GET", 200, 0.004);
    metrics.observeHttp("get", 204, 0.02);
    metrics.observeHttp("POST", 422, 0.5);
    metrics.observeHttp("DELETE", 999, 0.001);
    const text = await metrics.render();
    assert.equal(value(text, "cloud_http_requests_total", 'method="get",status_class="2xx"'), 2);
    assert.equal(value(text, "cloud_http_requests_total", 'method="post",status_class="4xx"'), 1);
    assert.equal(value(text, "cloud_http_requests_total", 'method="delete",status_class="unknown"'), 1);
    assert.match(text, /^# TYPE cloud_http_request_duration_seconds histogram$/m);
    assert.equal(value(text, "cloud_http_request_duration_seconds_count", 'method="get",status_class="2xx"'), 2);
    assert.equal(value(text, "cloud_http_request_duration_seconds_bucket", 'le="0.005",method="get",status_class="2xx"'), 1);
    assert.ok(Math.abs((value(text, "cloud_http_request_duration_seconds_sum", 'method="get",status_class="2xx"') ?? 0) - 0.024) < 1e-9);
  });

  it("maps statuses to classes", () => {
    assert.equal(statusClass(101), "1xx");
    assert.equal(statusClass(200), "2xx");
    assert.equal(statusClass(302), "3xx");
    assert.equal(statusClass(404), "4xx");
    assert.equal(statusClass(503), "5xx");
    assert.equal(statusClass(0), "unknown");
    assert.equal(statusClass(600), "unknown");
  });

  it("reads the cloud_*_total gauges from the supplied callbacks at scrape time", async () => {
    const metrics = createMetrics({ enabled: true, processMetrics: false });
    let groups = 3;
    metrics.setGaugeSources({
      groupsTotal: () => groups,
      nodesTotal: async () => 2,
      instancesTotal: () => 7,
      playersTotal: () => 42,
      crashesTotal: () => {
        throw new Error("store down");
      },
    });
    let text = await metrics.render();
    assert.equal(value(text, "cloud_groups_total"), 3);
    assert.equal(value(text, "cloud_nodes_total"), 2);
    assert.equal(value(text, "cloud_instances_total"), 7);
    assert.equal(value(text, "cloud_players_total"), 42);
    assert.equal(value(text, "cloud_crashes_total"), 0, "a failing source does not fail the scrape");
    assert.match(text, /^# TYPE cloud_groups_total gauge$/m);
    groups = 4;
    text = await metrics.render();
    assert.equal(value(text, "cloud_groups_total"), 4);
  });

  it("declares the metrics later issues record, with stable names, types and labels", async () => {
    const metrics = createMetrics({ enabled: true, processMetrics: false });
    const stop = metrics.schedulerTickDuration.startTimer();
    stop();
    metrics.schedulerTickDuration.observe(0.2);
    metrics.schedulerTickFailures.inc();
    metrics.leaseAcquisitions.inc();
    metrics.leaseRenewals.inc(3);
    metrics.leaseContentions.inc();
    metrics.grpcDaemonSessionsActive.inc();
    metrics.grpcDaemonSessionsActive.inc();
    metrics.grpcDaemonSessionsActive.dec();
    metrics.grpcDaemonMessagesIn.inc({ payload_case: "heartbeat" });
    metrics.grpcDaemonMessagesOut.inc({ payload_case: "start_instance", outcome: "delivered" });
    metrics.grpcDaemonMessagesOut.inc({ payload_case: "start_instance", outcome: "dropped" }, 2);
    metrics.sseClientsConnected.set(5);
    metrics.sseReplayBufferSize.set(2048);
    const text = await metrics.render();
    const types: Record<string, string> = {
      cloud_scheduler_tick_duration_seconds: "histogram",
      cloud_scheduler_tick_failures_total: "counter",
      cloud_coordination_lease_acquisitions_total: "counter",
      cloud_coordination_lease_renewals_total: "counter",
      cloud_coordination_lease_contentions_total: "counter",
      cloud_grpc_daemon_sessions_active: "gauge",
      cloud_grpc_daemon_messages_in_total: "counter",
      cloud_grpc_daemon_messages_out_total: "counter",
      cloud_sse_clients_connected: "gauge",
      cloud_sse_replay_buffer_size: "gauge",
      cloud_http_requests_total: "counter",
      cloud_http_request_duration_seconds: "histogram",
      cloud_groups_total: "gauge",
      cloud_nodes_total: "gauge",
      cloud_instances_total: "gauge",
      cloud_players_total: "gauge",
      cloud_crashes_total: "gauge",
    };
    for (const [name, type] of Object.entries(types)) assert.match(text, new RegExp(`^# TYPE ${name} ${type}$`, "m"), name);
    assert.equal(value(text, "cloud_scheduler_tick_duration_seconds_count"), 2);
    assert.equal(value(text, "cloud_scheduler_tick_failures_total"), 1);
    assert.equal(value(text, "cloud_coordination_lease_renewals_total"), 3);
    assert.equal(value(text, "cloud_grpc_daemon_sessions_active"), 1);
    assert.equal(value(text, "cloud_grpc_daemon_messages_in_total", 'payload_case="heartbeat"'), 1);
    assert.equal(value(text, "cloud_grpc_daemon_messages_out_total", 'payload_case="start_instance",outcome="dropped"'), 2);
    assert.equal(value(text, "cloud_sse_clients_connected"), 5);
    assert.equal(value(text, "cloud_sse_replay_buffer_size"), 2048);
  });

  it("records nothing and renders nothing when disabled", async () => {
    const metrics = createMetrics({ enabled: false });
    assert.equal(metrics.enabled, false);
    metrics.observeHttp("GET", 200, 0.1);
    metrics.schedulerTickFailures.inc();
    metrics.grpcDaemonMessagesOut.inc({ payload_case: "x", outcome: "delivered" });
    metrics.sseClientsConnected.set(3);
    metrics.sseReplayBufferSize.set(3);
    metrics.schedulerTickDuration.startTimer()();
    metrics.setGaugeSources({ groupsTotal: () => 1 });
    assert.equal(await metrics.render(), "");
    assert.equal((await metrics.registry.getMetricsAsJSON()).length, 0);
  });
});
