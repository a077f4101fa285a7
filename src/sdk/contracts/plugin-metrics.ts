/**
 * The plugin metrics payload of spec document 3 ("Plugin-side objects", `POST /api/plugin/metrics`):
 * the one declaration the plugin SDK sends, the controller's route validates and its metrics service
 * keeps, and the INSTANCE_METRICS event carries a part of. It lives in the SDK, which imports nothing
 * from the rest of the package, so both ends import it without the SDK pulling in controller code.
 *
 * Numbers are JavaScript numbers; the spec's Java types say which are whole: `double` for the TPS and
 * tick figures, `long` and `int` for the counts. `threadCount` and `daemonThreadCount` are the server
 * JVM's live threads and the daemon threads among them (`ThreadMXBean.getThreadCount()` and
 * `getDaemonThreadCount()`), so `daemonThreadCount <= threadCount`; the node daemon has no part in
 * them. The INSTANCE_METRICS event leaves out `heapCommittedMb`, `daemonThreadCount` and `uptimeMs`
 * (its field list in the spec has none of them); the instance's stored snapshot keeps them.
 */
import type { AssertNever } from "./type-checks.js";

/** One world of a metrics payload. */
export type WorldMetrics = {
  name: string;
  environment: string;
  entityCount: number;
  chunkCount: number;
  playerCount: number;
};

/** The metrics payload of spec document 3, every field present. */
export type MetricsPayload = {
  tps1m: number;
  tps5m: number;
  tps15m: number;
  msptAvg: number;
  heapUsedMb: number;
  heapMaxMb: number;
  heapCommittedMb: number;
  gcCollections: number;
  gcTimeMs: number;
  threadCount: number;
  daemonThreadCount: number;
  playerCount: number;
  maxPlayers: number;
  worldCount: number;
  totalEntities: number;
  totalChunks: number;
  worlds: WorldMetrics[];
  serverVersion: string;
  pluginCount: number;
  uptimeMs: number;
};

/** Every field of {@link MetricsPayload}, in the spec's order (the compile-time checks below keep it whole). */
export const METRICS_PAYLOAD_FIELDS = [
  "tps1m",
  "tps5m",
  "tps15m",
  "msptAvg",
  "heapUsedMb",
  "heapMaxMb",
  "heapCommittedMb",
  "gcCollections",
  "gcTimeMs",
  "threadCount",
  "daemonThreadCount",
  "playerCount",
  "maxPlayers",
  "worldCount",
  "totalEntities",
  "totalChunks",
  "worlds",
  "serverVersion",
  "pluginCount",
  "uptimeMs",
] as const satisfies readonly (keyof MetricsPayload)[];

/** Every field of {@link WorldMetrics}. */
export const WORLD_METRICS_FIELDS = ["name", "environment", "entityCount", "chunkCount", "playerCount"] as const satisfies readonly (keyof WorldMetrics)[];

/** Fields of the payload the INSTANCE_METRICS event does not carry. */
export const METRICS_FIELDS_NOT_IN_EVENT = ["heapCommittedMb", "daemonThreadCount", "uptimeMs"] as const satisfies readonly (keyof MetricsPayload)[];

/**
 * The INSTANCE_METRICS event's payload (spec document 3, "Built-in event types and fields"): the
 * instance and its group, and the metrics payload without {@link METRICS_FIELDS_NOT_IN_EVENT}.
 */
export type InstanceMetricsPayload = { instanceId: string; group: string } & Omit<MetricsPayload, (typeof METRICS_FIELDS_NOT_IN_EVENT)[number]>;

// A field added to a type and not to its list fails to compile here (a list naming a field the type
// does not have already fails at its `satisfies`).
type Missing<T, List extends readonly unknown[]> = Exclude<keyof T, List[number]>;
/** Compile-time only: the field lists above name every field of their types. */
export type MetricsFieldListsAreWhole = AssertNever<
  Missing<MetricsPayload, typeof METRICS_PAYLOAD_FIELDS> | Missing<WorldMetrics, typeof WORLD_METRICS_FIELDS>
>;
