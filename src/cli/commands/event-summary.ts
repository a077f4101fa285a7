/**
 * One line per event for `cloudctl events`: the key fields of each built-in type in words
 * (`lobby-3f2a STARTING → RUNNING on local`), and `key=value` pairs of every field for the rest
 * (custom MODULE:ACTION events, types added later). Never cut: what matters is often last.
 */

/** The fields of an event this module reads. */
export interface SummarizedEvent {
  type: string;
  source?: string | null;
  data?: unknown;
  lastSequence?: number;
  earliestSequence?: number;
  latestSequence?: number;
}

type Data = Record<string, unknown>;

const text = (value: unknown): string => {
  if (value === null || value === undefined) return "";
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
};

const percent = (value: unknown) => (typeof value === "number" ? `${(value * 100).toFixed(1)} %` : text(value));

/** The summary of each built-in type, from its data. */
const summaries: Record<string, (d: Data) => string> = {
  NODE_CONNECTED: (d) => `${text(d.nodeId)} connected`,
  NODE_DISCONNECTED: (d) => `${text(d.nodeId)} disconnected: ${text(d.reason)}`,
  NODE_STATUS: (d) => `${text(d.nodeId)} cpu ${percent(d.cpuUsage)}, memory ${text(d.usedMemoryMb)}/${text(d.totalMemoryMb)} MB`,
  NODE_HEARTBEAT_STALE: (d) => `${text(d.nodeId)} missed ${text(d.missedPongs)} heartbeats (last ${text(d.lastHeartbeatAt)})`,
  NODE_HEARTBEAT_RESUMED: (d) => `${text(d.nodeId)} heartbeats again`,
  NODE_DRAIN_REQUESTED: (d) => `${text(d.nodeId)} draining${d.shutdownAfterDrain ? ", then shutting down" : ""}`,
  NODE_DRAIN_COMPLETED: (d) => `${text(d.nodeId)} drained`,
  NODE_CACHE_STATUS: (d) => `${text(d.nodeId)} template cache ${text(d.totalSizeBytes)} bytes`,
  INSTANCE_STATE_CHANGED: (d) => `${text(d.instanceId)} ${text(d.oldState) || "-"} → ${text(d.newState)}${d.nodeId ? ` on ${text(d.nodeId)}` : ""}`,
  INSTANCE_CRASHED: (d) => {
    const tail = Array.isArray(d.logTail) ? d.logTail : [];
    const last = tail.length > 0 ? `: ${text(tail[tail.length - 1])}` : "";
    return `${text(d.instanceId)} crashed on ${text(d.nodeId)}: ${text(d.classification)}, exit ${text(d.exitCode)}${last}`;
  },
  INSTANCE_DRAINING: (d) => `${text(d.instanceId)} draining on ${text(d.nodeId)}`,
  INSTANCE_METRICS: (d) => `${text(d.instanceId)} tps ${text(d.tps1m)}, mspt ${text(d.msptAvg)}, players ${text(d.playerCount)}/${text(d.maxPlayers)}`,
  GROUP_CREATED: (d) => `group ${text(d.groupName)} created`,
  GROUP_UPDATED: (d) => `group ${text(d.groupName)} updated`,
  GROUP_DELETED: (d) => `group ${text(d.groupName)} deleted`,
  GROUP_AGGREGATES_UPDATED: (d) => `${text(d.runningInstances)} running, ${text(d.totalPlayers)} players`,
  GROUP_MAINTENANCE_CHANGED: (d) => `maintenance ${d.maintenance ? "on" : "off"}${d.message ? `: ${text(d.message)}` : ""}`,
  GROUP_CRASH_LOOP: (d) => `paused after ${text(d.crashCount)} crashes since ${text(d.windowStart)} (cloudctl group resume ${text(d.group)})`,
  DEPLOYMENT_CREATED: (d) => `revision ${text(d.revision)} rolling out (${text(d.strategy)})`,
  DEPLOYMENT_COMPLETED: (d) => `revision ${text(d.revision)}: ${text(d.outcome)}`,
  PLAYER_CONNECTED: (d) => `${text(d.name)} joined ${text(d.instanceId)}`,
  PLAYER_DISCONNECTED: (d) => `${text(d.name)} left ${text(d.instanceId)}`,
  PLAYER_TRANSFER: (d) => `${text(d.name)} ${text(d.fromInstanceId)} → ${text(d.toInstanceId)}`,
};

/** `key=value` for every field, values as JSON when they are not scalars. */
export function fieldPairs(data: unknown): string {
  if (data === null || typeof data !== "object") return text(data);
  return Object.entries(data as Data)
    .map(([key, value]) => `${key}=${text(value)}`)
    .join(" ");
}

/** The group an event is about (`group` or `groupName` of its data), if any. */
export function groupOf(event: Pick<SummarizedEvent, "data">): string | undefined {
  const data = (event.data ?? {}) as Data;
  const group = data.group ?? data.groupName;
  return typeof group === "string" ? group : undefined;
}

/** The EVENT column of an event. */
export function eventSummary(event: SummarizedEvent): string {
  if (event.type === "RESYNC_REQUIRED") {
    return `events after ${text(event.lastSequence)} are no longer buffered (oldest ${text(event.earliestSequence)}, newest ${text(event.latestSequence)})`;
  }
  const summary = summaries[event.type];
  const data = (event.data ?? {}) as Data;
  const line = summary ? summary(data) : fieldPairs(event.data);
  const from = event.source && event.source !== "controller" && !summary ? ` (from ${event.source})` : "";
  return `${line}${from}`;
}
