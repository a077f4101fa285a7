/**
 * The metrics history the dashboard charts from (docs/decisions/metrics.md). Every
 * `metrics.collectionIntervalSeconds` (on the injected Clock) each controller samples what it sees
 * into one document of the document store: connected nodes, running instances, online players (in
 * total and per group), the mean scheduler evaluation pass and the mean HTTP request latency of the
 * interval, and the TPS each instance's plugin reported since the last sample. Samples older than
 * `metrics.retentionHours` are deleted after every sample, so the history is bounded by retention
 * and interval; it survives restarts because it lives in the store. A query averages the samples of
 * every controller that fall into each step.
 */
import type { Logger } from "../logs/types.js";
import type { Clock, Timer } from "../shared/clock.js";
import type { Collection, Doc, DocumentStore } from "../store/ports.js";
import type { MetricsService, TimerTotals } from "./metrics.js";

/** The collection that holds the samples. */
export const METRICS_HISTORY_COLLECTION = "metrics_history";

/** Series of one sample beyond this are dropped (per-group players and per-instance TPS grow with the network). */
export const seriesPerSampleMax = 2_000;
/** Instances whose TPS is remembered between two samples; the oldest report is dropped beyond. */
export const tpsInstancesMax = 1_000;
/** Points one series of a query answer may have. */
export const pointsPerSeriesMax = 1_000;
/** Series one query may ask for. */
export const seriesPerQueryMax = 50;
/** Samples one query reads at most (newest dropped beyond, and the answer says `truncated`). */
export const samplesPerQueryMax = 50_000;

/** The series every sample has. */
export const BASE_SERIES = ["nodes", "instances", "players", "scheduler.tickMs", "http.latencyMs", "http.requests"] as const;
/** Prefix of the per-group player series (`players:<group>`). */
export const PLAYERS_OF_GROUP_PREFIX = "players:";
/** Prefix of the per-instance TPS series (`tps:<instance id>`). */
export const TPS_OF_INSTANCE_PREFIX = "tps:";

interface SampleDoc extends Doc {
  atMs: number;
  controllerId: string;
  /** `[series name, value]` pairs: names hold dots and colons, which not every store takes as field names. */
  values: [string, number][];
}

/** What one sample reads; the composition root passes the domain services in. */
export interface HistorySources {
  /** Connected nodes (ONLINE or DRAINING). */
  nodes(): Promise<number>;
  /** Live instances: their group, state and player count. */
  instances(): Promise<readonly { group: string; state: string; playerCount: number }[]>;
}

export interface MetricsHistoryDeps {
  documents: DocumentStore;
  clock: Clock;
  logger: Logger;
  /** This controller's member id: samples of several controllers are told apart by it. */
  controllerId: string;
  metrics: Pick<MetricsService, "httpTotals" | "schedulerTickTotals">;
  sources: HistorySources;
  /** `metrics.collectionIntervalSeconds` in ms. */
  intervalMs: number;
  /** `metrics.retentionHours` in ms. */
  retentionMs: number;
}

export interface HistoryQuery {
  series: readonly string[];
  fromMs: number;
  toMs: number;
  stepMs: number;
}

export interface HistoryAnswer {
  from: string;
  to: string;
  stepSeconds: number;
  /** More samples fell into the range than one query reads; the newest were left out. */
  truncated: boolean;
  /** Each series' points as `[epoch ms of the step's start, mean value]`, oldest first; steps without a sample are absent. */
  series: { name: string; points: [number, number][] }[];
}

/** Samples this controller's view every interval and answers range queries. */
export class MetricsHistory {
  private readonly samples: Collection<SampleDoc>;
  private readonly tps = new Map<string, number>();
  private timer: Timer | null = null;
  private lastHttp: TimerTotals;
  private lastTicks: TimerTotals;
  private running: Promise<void> | null = null;
  private droppedLogged = false;

  constructor(private readonly deps: MetricsHistoryDeps) {
    this.samples = deps.documents.collection<SampleDoc>(METRICS_HISTORY_COLLECTION, { indexes: [{ name: "metrics_history_at", field: "atMs" }] });
    this.lastHttp = deps.metrics.httpTotals();
    this.lastTicks = deps.metrics.schedulerTickTotals();
  }

  get intervalMs(): number {
    return this.deps.intervalMs;
  }

  /**
   * The seam for the plugin metrics route: the TPS an instance's plugin reported. The latest report
   * of each instance goes into the next sample, then is forgotten until the plugin reports again.
   */
  reportTps(instanceId: string, tps: number): void {
    if (!Number.isFinite(tps)) return;
    this.tps.delete(instanceId);
    this.tps.set(instanceId, tps);
    if (this.tps.size > tpsInstancesMax) this.tps.delete(this.tps.keys().next().value!);
  }

  start(): void {
    this.timer ??= this.deps.clock.setInterval(() => void this.sampleNow(), this.deps.intervalMs, { unref: true });
  }

  /** Stops sampling and waits for a sample under way. */
  async stop(): Promise<void> {
    this.timer?.cancel();
    this.timer = null;
    await this.running;
  }

  /** Takes one sample and prunes what is past the retention; one at a time (a slow store skips overlapping ticks). */
  sampleNow(): Promise<void> {
    if (this.running) return this.running;
    this.running = this.sample()
      .catch((err) => this.deps.logger.warn("Metrics history sample failed", err))
      .finally(() => (this.running = null));
    return this.running;
  }

  private async sample(): Promise<void> {
    const atMs = this.deps.clock.nowMs();
    const [nodes, instances] = await Promise.all([this.deps.sources.nodes(), this.deps.sources.instances()]);
    const values: Record<string, number> = {};
    let running = 0;
    let players = 0;
    const playersByGroup = new Map<string, number>();
    for (const instance of instances) {
      if (instance.state === "RUNNING") running += 1;
      players += instance.playerCount;
      playersByGroup.set(instance.group, (playersByGroup.get(instance.group) ?? 0) + instance.playerCount);
    }
    const http = this.deps.metrics.httpTotals();
    const ticks = this.deps.metrics.schedulerTickTotals();
    values.nodes = nodes;
    values.instances = running;
    values.players = players;
    values["scheduler.tickMs"] = meanMs(ticks, this.lastTicks);
    values["http.latencyMs"] = meanMs(http, this.lastHttp);
    values["http.requests"] = http.count - this.lastHttp.count;
    this.lastHttp = http;
    this.lastTicks = ticks;
    let room = seriesPerSampleMax - BASE_SERIES.length;
    let dropped = 0;
    const add = (name: string, value: number) => {
      if (room > 0) {
        values[name] = value;
        room -= 1;
      } else dropped += 1;
    };
    for (const [group, count] of playersByGroup) add(PLAYERS_OF_GROUP_PREFIX + group, count);
    for (const [instanceId, tps] of this.tps) add(TPS_OF_INSTANCE_PREFIX + instanceId, tps);
    this.tps.clear();
    if (dropped > 0 && !this.droppedLogged) {
      this.droppedLogged = true;
      this.deps.logger.warn(`Metrics history keeps ${seriesPerSampleMax} series per sample; ${dropped} left out`);
    }
    const controllerId = this.deps.controllerId;
    await this.samples.put({ _id: `${String(atMs).padStart(15, "0")}-${controllerId}`, atMs, controllerId, values: Object.entries(values) });
    await this.samples.deleteMany({ atMs: { $lt: atMs - this.deps.retentionMs } });
  }

  /** The samples in [fromMs, toMs), averaged per step (every controller's samples together). */
  async query(query: HistoryQuery): Promise<HistoryAnswer> {
    const docs = await this.samples.find(
      { atMs: { $gte: query.fromMs, $lt: query.toMs } },
      { sort: { field: "atMs", direction: 1 }, limit: samplesPerQueryMax + 1 },
    );
    const truncated = docs.length > samplesPerQueryMax;
    if (truncated) docs.length = samplesPerQueryMax;
    const wanted = new Set(query.series);
    const sampled = docs.map((doc) => ({ atMs: doc.atMs, values: new Map(doc.values.filter(([name]) => wanted.has(name))) }));
    const series = query.series.map((name) => {
      const buckets = new Map<number, { sum: number; count: number }>();
      for (const doc of sampled) {
        const value = doc.values.get(name);
        if (typeof value !== "number") continue;
        const stepStartMs = query.fromMs + Math.floor((doc.atMs - query.fromMs) / query.stepMs) * query.stepMs;
        const bucket = buckets.get(stepStartMs);
        if (bucket) {
          bucket.sum += value;
          bucket.count += 1;
        } else buckets.set(stepStartMs, { sum: value, count: 1 });
      }
      const points = [...buckets].map(([ms, b]): [number, number] => [ms, b.sum / b.count]);
      return { name, points };
    });
    return {
      from: new Date(query.fromMs).toISOString(),
      to: new Date(query.toMs).toISOString(),
      stepSeconds: query.stepMs / 1000,
      truncated,
      series,
    };
  }
}

/** Mean duration in ms of what a timer observed between two totals; 0 when it observed nothing. */
function meanMs(now: TimerTotals, before: TimerTotals): number {
  const count = now.count - before.count;
  return count > 0 ? ((now.sumSeconds - before.sumSeconds) / count) * 1000 : 0;
}
