/**
 * The controller's metrics (spec document 2, "Metrics"): one prom-client Registry per service (never
 * the global default registry) with the default process metrics and every cloud_* metric the
 * controller records. When disabled, every handle is a no-op and `render()` yields nothing, so
 * nothing is recorded; the HTTP layer answers 404 on /metrics.
 */
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client";

/** Latency buckets (seconds) for HTTP requests and scheduler ticks. */
export const DURATION_BUCKETS_SECONDS: readonly number[] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** Buckets of `cloud_scheduler_groups_evaluated` (groups per tick). */
export const GROUPS_PER_TICK_BUCKETS: readonly number[] = [0, 1, 2, 5, 10, 25, 50, 100, 250, 500, 1000];

export interface CounterHandle<L extends string = never> {
  inc(...args: [L] extends [never] ? [value?: number] : [labels: Record<L, string>, value?: number]): void;
}

export interface GaugeHandle {
  set(value: number): void;
  inc(value?: number): void;
  dec(value?: number): void;
}

export interface HistogramHandle {
  observe(value: number): void;
  /** Starts a timer; calling the result observes the elapsed seconds. */
  startTimer(): () => number;
}

/** Supplies a gauge's value at scrape time; the composition root passes these in. */
export type GaugeSource = () => number | Promise<number>;

/**
 * Gauges read through callbacks at scrape time (spec: configured groups, connected nodes, ...). A
 * gauge without a source stays at 0.
 */
export interface GaugeSources {
  groupsTotal?: GaugeSource;
  nodesTotal?: GaugeSource;
  instancesTotal?: GaugeSource;
  playersTotal?: GaugeSource;
  crashesTotal?: GaugeSource;
  /** `cloud_scheduler_last_tick_lag_millis`: ms since the last successful tick, 0 before the first. */
  schedulerLastTickLagMillis?: GaugeSource;
  /** `cloud_workflows_pending_transfers`: player transfer intents waiting. */
  workflowsPendingTransfers?: GaugeSource;
  /** `cloud_workflows_node_drains`: drain intents waiting (drained nodes still running instances). */
  workflowsNodeDrains?: GaugeSource;
  /** `cloud_workflows_healing_actions`: healing actions waiting (instances to replace). */
  workflowsHealingActions?: GaugeSource;
  /** `cloud_workflows_start_retries`: instance starts waiting to be dispatched again. */
  workflowsStartRetries?: GaugeSource;
}

/** Running totals of a timer since start: what the metrics history takes deltas of. */
export interface TimerTotals {
  count: number;
  sumSeconds: number;
}

export type PayloadCaseLabel = "payload_case";
export type OutboundLabels = "payload_case" | "outcome";

export interface MetricsService {
  readonly enabled: boolean;
  /** The service's own registry (never prom-client's global one). */
  readonly registry: Registry;
  /**
   * Counts one finished HTTP request in cloud_http_requests_total and
   * cloud_http_request_duration_seconds (method lower-cased, status as its class).
   */
  observeHttp(method: string, status: number, durationSeconds: number): void;
  /**
   * Installs callbacks that feed the sourced gauges. Sources given replace the earlier source of
   * the same gauge; gauges not named keep theirs, so several rooms can feed their own gauges.
   */
  setGaugeSources(sources: GaugeSources): void;
  /** One evaluation pass of one group (seconds). */
  readonly schedulerTickDuration: HistogramHandle;
  /** Groups evaluated in one scheduler tick (a histogram of counts: `_bucket`, `_sum`, `_count`). */
  readonly schedulerGroupsEvaluated: HistogramHandle;
  /** Token revocation entries written (a password change bumps the user's token version). */
  readonly jwtRevocations: CounterHandle;
  /** Totals of HTTP request durations since start (all methods and statuses). */
  httpTotals(): TimerTotals;
  /** Totals of scheduler evaluation passes since start. */
  schedulerTickTotals(): TimerTotals;
  readonly schedulerTickFailures: CounterHandle;
  /** Groups paused by the crash-loop detector. */
  readonly schedulerCrashLoops: CounterHandle;
  /**
   * Failed composition planning: what new instances of a group are made of (the frozen revision's
   * platform, jar, pinned template layers and catalog build) could not be settled, so none was placed.
   */
  readonly compositionPlanningFailures: CounterHandle;
  readonly leaseAcquisitions: CounterHandle;
  readonly leaseRenewals: CounterHandle;
  readonly leaseContentions: CounterHandle;
  readonly grpcDaemonSessionsActive: GaugeHandle;
  readonly grpcDaemonMessagesIn: CounterHandle<PayloadCaseLabel>;
  readonly grpcDaemonMessagesOut: CounterHandle<OutboundLabels>;
  readonly sseClientsConnected: GaugeHandle;
  /** Events the event stream retains for replay. */
  readonly sseReplayBufferSize: GaugeHandle;
  /** Text exposition format 0.0.4; empty when metrics are disabled. */
  render(): Promise<string>;
  /** Content type of {@link render}'s output: `text/plain; version=0.0.4; charset=utf-8`. */
  readonly contentType: string;
}

/** Exposition content type of text format 0.0.4. */
export const METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

/** `1xx`..`5xx` for valid statuses, `unknown` otherwise (spec label values). */
export function statusClass(status: number): string {
  return Number.isInteger(status) && status >= 100 && status <= 599 ? `${Math.floor(status / 100)}xx` : "unknown";
}

const noopCounter = { inc: () => {} } as CounterHandle<any>;
const noopGauge: GaugeHandle = { set: () => {}, inc: () => {}, dec: () => {} };
const noopHistogram: HistogramHandle = { observe: () => {}, startTimer: () => () => 0 };
const zeroTotals = (): TimerTotals => ({ count: 0, sumSeconds: 0 });

export interface MetricsOptions {
  enabled: boolean;
  /** Collect Node process metrics (default true); tests that only read cloud_* may turn it off. */
  processMetrics?: boolean;
}

/** Creates the metrics service with its own registry. */
export function createMetrics(options: MetricsOptions): MetricsService {
  const registry = new Registry();
  registry.setContentType(Registry.PROMETHEUS_CONTENT_TYPE);
  let sources: GaugeSources = {};

  if (!options.enabled) {
    return {
      enabled: false,
      registry,
      observeHttp: () => {},
      setGaugeSources: (next) => {
        sources = { ...sources, ...next };
      },
      schedulerTickDuration: noopHistogram,
      schedulerGroupsEvaluated: noopHistogram,
      jwtRevocations: noopCounter,
      httpTotals: zeroTotals,
      schedulerTickTotals: zeroTotals,
      schedulerTickFailures: noopCounter,
      schedulerCrashLoops: noopCounter,
      compositionPlanningFailures: noopCounter,
      leaseAcquisitions: noopCounter,
      leaseRenewals: noopCounter,
      leaseContentions: noopCounter,
      grpcDaemonSessionsActive: noopGauge,
      grpcDaemonMessagesIn: noopCounter,
      grpcDaemonMessagesOut: noopCounter,
      sseClientsConnected: noopGauge,
      sseReplayBufferSize: noopGauge,
      render: async () => "",
      contentType: METRICS_CONTENT_TYPE,
    };
  }

  if (options.processMetrics !== false) collectDefaultMetrics({ register: registry });
  const registers = [registry];

  const httpRequests = new Counter({
    name: "cloud_http_requests_total",
    help: "HTTP requests by method (lower case) and status class",
    labelNames: ["method", "status_class"] as const,
    registers,
  });
  const httpDuration = new Histogram({
    name: "cloud_http_request_duration_seconds",
    help: "HTTP request latency in seconds",
    labelNames: ["method", "status_class"] as const,
    buckets: [...DURATION_BUCKETS_SECONDS],
    registers,
  });

  const sourcedGauge = (name: string, help: string, pick: (s: GaugeSources) => GaugeSource | undefined) =>
    new Gauge({
      name,
      help,
      registers,
      async collect() {
        const source = pick(sources);
        if (!source) return;
        try {
          this.set(await source());
        } catch {
          // A failing source keeps the last value: a scrape must not fail because one store is down.
        }
      },
    });
  sourcedGauge("cloud_groups_total", "Configured groups", (s) => s.groupsTotal);
  sourcedGauge("cloud_nodes_total", "Connected nodes", (s) => s.nodesTotal);
  sourcedGauge("cloud_instances_total", "Running instances", (s) => s.instancesTotal);
  sourcedGauge("cloud_players_total", "Online players", (s) => s.playersTotal);
  sourcedGauge("cloud_crashes_total", "Crash records in the in-memory buffer (not a counter)", (s) => s.crashesTotal);
  sourcedGauge(
    "cloud_scheduler_last_tick_lag_millis",
    "Milliseconds since the last successful scheduler tick; 0 before the first",
    (s) => s.schedulerLastTickLagMillis,
  );
  sourcedGauge("cloud_workflows_pending_transfers", "Transfer intents waiting", (s) => s.workflowsPendingTransfers);
  sourcedGauge("cloud_workflows_node_drains", "Drain intents waiting", (s) => s.workflowsNodeDrains);
  sourcedGauge("cloud_workflows_healing_actions", "Healing actions waiting", (s) => s.workflowsHealingActions);
  sourcedGauge("cloud_workflows_start_retries", "Start retries waiting", (s) => s.workflowsStartRetries);

  const counter = (name: string, help: string): CounterHandle => {
    const c = new Counter({ name, help, registers });
    return { inc: (value?: number) => c.inc(value ?? 1) } as CounterHandle;
  };
  const gauge = (name: string, help: string): GaugeHandle => {
    const g = new Gauge({ name, help, registers });
    return { set: (v) => g.set(v), inc: (v) => g.inc(v ?? 1), dec: (v) => g.dec(v ?? 1) };
  };

  const tickDuration = new Histogram({
    name: "cloud_scheduler_tick_duration_seconds",
    help: "Duration of one scheduler evaluation pass in seconds",
    buckets: [...DURATION_BUCKETS_SECONDS],
    registers,
  });
  const groupsEvaluated = new Histogram({
    name: "cloud_scheduler_groups_evaluated",
    help: "Groups evaluated per scheduler tick",
    buckets: [...GROUPS_PER_TICK_BUCKETS],
    registers,
  });
  const http = zeroTotals();
  const ticks = zeroTotals();
  const messagesIn = new Counter({
    name: "cloud_grpc_daemon_messages_in_total",
    help: "Inbound daemon stream messages by payload case",
    labelNames: ["payload_case"] as const,
    registers,
  });
  const messagesOut = new Counter({
    name: "cloud_grpc_daemon_messages_out_total",
    help: "Outbound daemon stream messages by payload case and outcome (delivered or dropped)",
    labelNames: ["payload_case", "outcome"] as const,
    registers,
  });

  return {
    enabled: true,
    registry,
    observeHttp: (method, status, durationSeconds) => {
      const labels = { method: method.toLowerCase(), status_class: statusClass(status) };
      httpRequests.inc(labels);
      httpDuration.observe(labels, durationSeconds);
      http.count += 1;
      http.sumSeconds += durationSeconds;
    },
    setGaugeSources: (next) => {
      sources = { ...sources, ...next };
    },
    schedulerTickDuration: {
      observe: (seconds) => {
        tickDuration.observe(seconds);
        ticks.count += 1;
        ticks.sumSeconds += seconds;
      },
      startTimer: () => {
        const end = tickDuration.startTimer();
        return () => {
          const seconds = end();
          ticks.count += 1;
          ticks.sumSeconds += seconds;
          return seconds;
        };
      },
    },
    schedulerGroupsEvaluated: { observe: (count) => groupsEvaluated.observe(count), startTimer: () => groupsEvaluated.startTimer() },
    jwtRevocations: counter("cloud_coordination_jwt_revocations_total", "Token revocation entries written"),
    httpTotals: () => ({ ...http }),
    schedulerTickTotals: () => ({ ...ticks }),
    schedulerTickFailures: counter("cloud_scheduler_tick_failures_total", "Scheduler passes that threw"),
    schedulerCrashLoops: counter("cloud_scheduler_crash_loops_total", "Groups paused by the crash-loop detector"),
    compositionPlanningFailures: counter(
      "cloud_composition_planning_failures_total",
      "Failed composition planning (revision or catalog build of new instances)",
    ),
    leaseAcquisitions: counter("cloud_coordination_lease_acquisitions_total", "Leases acquired, excluding renewals"),
    leaseRenewals: counter("cloud_coordination_lease_renewals_total", "Lease renewals by the holder"),
    leaseContentions: counter("cloud_coordination_lease_contentions_total", "Lost lease acquisition races"),
    grpcDaemonSessionsActive: gauge("cloud_grpc_daemon_sessions_active", "Active daemon streams"),
    grpcDaemonMessagesIn: { inc: (labels: Record<PayloadCaseLabel, string>, value?: number) => messagesIn.inc(labels, value ?? 1) },
    grpcDaemonMessagesOut: { inc: (labels: Record<OutboundLabels, string>, value?: number) => messagesOut.inc(labels, value ?? 1) },
    sseClientsConnected: gauge("cloud_sse_clients_connected", "Connected event-stream clients"),
    sseReplayBufferSize: gauge("cloud_sse_replay_buffer_size", "Events retained for replay"),
    render: () => registry.metrics(),
    contentType: registry.contentType,
  };
}
