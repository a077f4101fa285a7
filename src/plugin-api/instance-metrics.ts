/**
 * The metrics a plugin reports (`POST /api/plugin/metrics`, the payload of spec document 3): each
 * report is published as INSTANCE_METRICS and kept as the instance's latest snapshot in the
 * key-value store (`cloud:v1:instance-metrics:<id>`, expiring after {@link instanceMetricsTtlMs}
 * so a silent server shows none), readable over REST per instance and per group.
 */
import { KV_KEY_PREFIX } from "../coordination/keys.js";
import { EventTypes } from "../events/event-types.js";
import type { EventBus } from "../events/types.js";
import type { Clock } from "../shared/clock.js";
import type { KvStore } from "../store/ports.js";
import { isoFromMs } from "../domain/shared/time.js";
import type { InstanceMetricsPayload, MetricsPayload, WorldMetrics } from "../sdk/contracts/plugin-metrics.js";

/** A snapshot not renewed within this long is dropped (servers report about every 10-30 s). */
export const instanceMetricsTtlMs = 120_000;

/** `cloud:v1:instance-metrics:<instanceId>`. */
export const instanceMetricsKey = (instanceId: string): string => `${KV_KEY_PREFIX}instance-metrics:${instanceId}`;

/**
 * What a plugin sends: the payload of `src/sdk/contracts/plugin-metrics.ts`, each field optional (a
 * proxy has no TPS) except a world's name.
 */
export type MetricsReport = Partial<Omit<MetricsPayload, "worlds">> & {
  worlds?: (Pick<WorldMetrics, "name"> & Partial<WorldMetrics>)[];
};

/** The latest snapshot of an instance: the whole payload, whose instance and group, and when it came. */
export type InstanceMetricsSnapshot = { instanceId: string; group: string } & MetricsPayload & { reportedAt: string };

/** The aggregate over a group's latest snapshots. */
export interface GroupMetrics {
  group: string;
  /** Instances with a current snapshot. */
  reportingInstances: number;
  tps1mAvg: number | null;
  tps1mMin: number | null;
  msptAvg: number | null;
  msptMax: number | null;
  heapUsedMb: number;
  heapMaxMb: number;
  playerCount: number;
  totalEntities: number;
  totalChunks: number;
  instances: InstanceMetricsSnapshot[];
}

/** Records and reads instance metrics. */
export class InstanceMetricsService {
  constructor(
    private readonly kv: KvStore,
    private readonly events: EventBus,
    private readonly clock: Clock,
    /** Told each reported TPS (the metrics history's per-instance series). */
    private readonly onTps?: (instanceId: string, tps: number) => void,
  ) {}

  /** Keeps the report as the instance's latest snapshot and publishes INSTANCE_METRICS. */
  async record(instance: { instanceId: string; group: string }, report: MetricsReport): Promise<InstanceMetricsSnapshot> {
    const n = (value: number | undefined) => value ?? 0;
    if (report.tps1m !== undefined) this.onTps?.(instance.instanceId, report.tps1m);
    const worlds: WorldMetrics[] = (report.worlds ?? []).map((w) => ({
      name: w.name,
      environment: w.environment ?? "",
      entityCount: n(w.entityCount),
      chunkCount: n(w.chunkCount),
      playerCount: n(w.playerCount),
    }));
    const payload: InstanceMetricsPayload = {
      instanceId: instance.instanceId,
      group: instance.group,
      tps1m: n(report.tps1m),
      tps5m: n(report.tps5m),
      tps15m: n(report.tps15m),
      msptAvg: n(report.msptAvg),
      heapUsedMb: n(report.heapUsedMb),
      heapMaxMb: n(report.heapMaxMb),
      gcCollections: n(report.gcCollections),
      gcTimeMs: n(report.gcTimeMs),
      threadCount: n(report.threadCount),
      playerCount: n(report.playerCount),
      maxPlayers: n(report.maxPlayers),
      worldCount: report.worldCount ?? worlds.length,
      totalEntities: n(report.totalEntities),
      totalChunks: n(report.totalChunks),
      worlds,
      serverVersion: report.serverVersion ?? "",
      pluginCount: n(report.pluginCount),
    };
    const snapshot: InstanceMetricsSnapshot = {
      ...payload,
      heapCommittedMb: n(report.heapCommittedMb),
      daemonThreadCount: n(report.daemonThreadCount),
      uptimeMs: n(report.uptimeMs),
      reportedAt: isoFromMs(this.clock.nowMs()),
    };
    await this.kv.set(instanceMetricsKey(instance.instanceId), JSON.stringify(snapshot), { ttlMs: instanceMetricsTtlMs });
    this.events.publish(EventTypes.INSTANCE_METRICS, payload);
    return snapshot;
  }

  /** The instance's latest snapshot, or null when none is current. */
  async latest(instanceId: string): Promise<InstanceMetricsSnapshot | null> {
    const text = await this.kv.get(instanceMetricsKey(instanceId));
    if (text === null) return null;
    try {
      return JSON.parse(text) as InstanceMetricsSnapshot;
    } catch {
      return null;
    }
  }

  /** The aggregate over the current snapshots of `instanceIds` (the group's live instances). */
  async forGroup(group: string, instanceIds: readonly string[]): Promise<GroupMetrics> {
    const snapshots = (await Promise.all(instanceIds.map((id) => this.latest(id)))).filter((s): s is InstanceMetricsSnapshot => s !== null);
    const sum = (pick: (s: InstanceMetricsSnapshot) => number) => snapshots.reduce((total, s) => total + pick(s), 0);
    const count = snapshots.length;
    const round = (value: number) => Math.round(value * 100) / 100;
    return {
      group,
      reportingInstances: count,
      tps1mAvg: count ? round(sum((s) => s.tps1m) / count) : null,
      tps1mMin: count ? Math.min(...snapshots.map((s) => s.tps1m)) : null,
      msptAvg: count ? round(sum((s) => s.msptAvg) / count) : null,
      msptMax: count ? Math.max(...snapshots.map((s) => s.msptAvg)) : null,
      heapUsedMb: sum((s) => s.heapUsedMb),
      heapMaxMb: sum((s) => s.heapMaxMb),
      playerCount: sum((s) => s.playerCount),
      totalEntities: sum((s) => s.totalEntities),
      totalChunks: sum((s) => s.totalChunks),
      instances: snapshots,
    };
  }
}
