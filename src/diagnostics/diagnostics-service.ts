/**
 * The support bundle of `GET /api/v1/system/diagnostics` (spec document 2, "Diagnostics and
 * sharing"): readiness, overview, settings, the effective configuration, a key-value summary, the
 * leases and the recent controller log records, redacted on the server (`redaction.ts`) before
 * anything leaves. The composition root hands in each source as a function, so this room knows no
 * service but the stores' and the logs' contracts.
 *
 * The key-value summary counts keys per kind (`cloud:v1:<kind>:…`) and names none: keys can hold
 * secrets (a ticket is its own key). Leases list the cluster's singleton leases (Raft) and the
 * key-value scope leases with their holders and fencing tokens.
 */
import { formatHumanLine } from "../logs/logger.js";
import { selectRecords, type LogQuery } from "../logs/log-query.js";
import type { LogLevel, LogRecord } from "../logs/types.js";
import type { KvStore } from "../store/ports.js";
import type { Clock } from "../shared/clock.js";
import { redactText, redactValue } from "./redaction.js";

/** Records a bundle carries at most (the controller buffer's capacity). */
export const DIAGNOSTICS_LOG_LINES_MAX = 2_000;
export const DIAGNOSTICS_LOG_LINES_DEFAULT = 500;
/** Key-value scope leases listed at most. */
export const DIAGNOSTICS_KV_LEASES_MAX = 1_000;

const KV_PREFIX = "cloud:v1:";
const KV_LEASE_PREFIX = `${KV_PREFIX}lease:`;

/** Where the bundle's parts come from. */
export interface DiagnosticsSources {
  readiness(): Promise<{ status: string; checks: Record<string, boolean> }>;
  overview(): Promise<unknown>;
  /** Runtime facts: version, profile, controller id, process. */
  settings(): Record<string, unknown>;
  /** The effective controller.yml (redacted here). */
  config(): unknown;
  kv: Pick<KvStore, "keys" | "get">;
  /** The cluster's singleton leases (`GET /api/v1/cluster/leases`); null when the cluster is not ready. */
  clusterLeases(): unknown;
  logs: { recent(): LogRecord[]; readonly capacity: number };
  /** Every secret value the controller knows, replaced wherever it occurs. */
  knownSecrets(): Promise<string[]>;
  clock: Clock;
}

/** What a bundle's log section holds. */
export interface DiagnosticsLogs {
  records: LogRecord[];
  size: number;
  capacity: number;
  level: LogLevel;
}

/** The bundle. */
export interface DiagnosticsBundle {
  generatedAt: string;
  readiness: { status: string; checks: Record<string, boolean> };
  overview: unknown;
  settings: Record<string, unknown>;
  config: unknown;
  kv: { keyCount: number; prefixes: Record<string, number> };
  leases: { cluster: unknown; kv: { resource: string; holder: string; fencingToken: number | null; ttlMs?: number }[] };
  logs: DiagnosticsLogs;
}

/** Options of one bundle. */
export interface DiagnosticsRequest {
  logLines?: number;
  logLevel?: LogLevel;
}

/** Builds redacted bundles. */
export class DiagnosticsService {
  constructor(private readonly sources: DiagnosticsSources) {}

  /** Every secret to remove, read once per bundle. */
  knownSecrets(): Promise<string[]> {
    return this.sources.knownSecrets();
  }

  /** Gathers and redacts a bundle. */
  async collect(request: DiagnosticsRequest = {}): Promise<DiagnosticsBundle> {
    const s = this.sources;
    const logLines = Math.min(request.logLines ?? DIAGNOSTICS_LOG_LINES_DEFAULT, DIAGNOSTICS_LOG_LINES_MAX);
    const logLevel = request.logLevel ?? "DEBUG";
    const [readiness, overview, kv, secrets] = await Promise.all([
      s.readiness().catch((err: unknown) => ({ status: "UNKNOWN", checks: {}, error: String(err) })),
      s.overview().catch((err: unknown) => ({ error: String(err) })),
      this.kvSummary().catch((err: unknown) => ({ summary: { keyCount: 0, prefixes: {}, error: String(err) }, leases: [] })),
      s.knownSecrets(),
    ]);
    let clusterLeases: unknown;
    try {
      clusterLeases = s.clusterLeases();
    } catch (err) {
      clusterLeases = { error: (err as Error).message };
    }
    const recent = s.logs.recent();
    const bundle: DiagnosticsBundle = {
      generatedAt: new Date(s.clock.nowMs()).toISOString(),
      readiness,
      overview,
      settings: s.settings(),
      config: s.config(),
      kv: kv.summary,
      leases: { cluster: clusterLeases, kv: kv.leases },
      logs: {
        records: logLines === 0 ? [] : selectRecords(recent, { level: logLevel, limit: logLines }),
        size: recent.length,
        capacity: s.logs.capacity,
        level: logLevel,
      },
    };
    return redactValue(bundle, secrets);
  }

  /** The bundle as one text (for a paste): the sections as JSON, then the log lines. */
  async collectText(request: DiagnosticsRequest = {}): Promise<string> {
    const bundle = await this.collect(request);
    const { logs, ...sections } = bundle;
    return `${JSON.stringify(sections, null, 2)}\n\n--- logs (${logs.records.length} of ${logs.size} records, ${logs.level} and above) ---\n${formatLogLines(logs.records)}`;
  }

  /** Controller log records through `query`, redacted, as HUMAN lines (for a paste). */
  async logText(records: readonly LogRecord[], query: LogQuery): Promise<string> {
    return redactText(formatLogLines(selectRecords(records, query)), await this.sources.knownSecrets());
  }

  private async kvSummary(): Promise<{ summary: DiagnosticsBundle["kv"]; leases: DiagnosticsBundle["leases"]["kv"] }> {
    const keys = await this.sources.kv.keys(KV_PREFIX);
    const prefixes: Record<string, number> = {};
    for (const key of keys) {
      const kind = key.slice(KV_PREFIX.length).split(":")[0] || "(none)";
      prefixes[kind] = (prefixes[kind] ?? 0) + 1;
    }
    const leases: DiagnosticsBundle["leases"]["kv"] = [];
    for (const key of keys.filter((k) => k.startsWith(KV_LEASE_PREFIX)).slice(0, DIAGNOSTICS_KV_LEASES_MAX)) {
      const value = await this.sources.kv.get(key);
      if (value === null) continue;
      const bar = value.lastIndexOf("|");
      const token = bar < 0 ? NaN : Number(value.slice(bar + 1));
      leases.push({
        resource: key.slice(KV_LEASE_PREFIX.length),
        holder: bar < 0 ? value : value.slice(0, bar),
        fencingToken: Number.isFinite(token) ? token : null,
      });
    }
    return { summary: { keyCount: keys.length, prefixes }, leases };
  }
}

/** Records as HUMAN lines (throwables on the lines after), as `cloudctl logs` prints them. */
export function formatLogLines(records: readonly LogRecord[]): string {
  return records.map((record) => formatHumanLine(record)).join("");
}
