/**
 * The diagnostics bundle as `cloudctl diagnostics bundle` writes it (spec document 2): a tar.gz with
 * manifest.json, readiness.json, overview.json, settings.json, config.json, redis.json (the key-value
 * summary), leases.json and logs.txt (HUMAN lines; left out when no log lines were asked for), made
 * from one `GET /api/v1/system/diagnostics`. The controller has removed the secrets already.
 */
import { tarArchive, type TarEntry } from "./tar.js";

/** What `GET /api/v1/system/diagnostics` answers, as far as the bundle reads it. */
export interface DiagnosticsView {
  generatedAt?: string;
  readiness?: unknown;
  overview?: unknown;
  settings?: unknown;
  config?: unknown;
  kv?: unknown;
  leases?: unknown;
  logs?: { records?: LogLineRecord[] };
}

export interface LogLineRecord {
  ts: number;
  level: string;
  logger: string;
  thread: string;
  message: string;
  throwable?: string;
}

/** The entries of the CLI's bundle, in its order. */
export const DIAGNOSTICS_ENTRIES = [
  "manifest.json",
  "readiness.json",
  "overview.json",
  "settings.json",
  "config.json",
  "redis.json",
  "leases.json",
  "logs.txt",
];

/** A record as a HUMAN line: date, time with milliseconds, [thread], level padded to 5, last logger segment, " - ", message. */
export function humanLogLine(record: LogLineRecord): string {
  const iso = new Date(record.ts).toISOString();
  const lastSegment = record.logger.slice(record.logger.lastIndexOf(".") + 1);
  const line = `${iso.slice(0, 10)} ${iso.slice(11, 23)} [${record.thread}] ${record.level.padEnd(5)} ${lastSegment} - ${record.message}`;
  return record.throwable ? `${line}\n${record.throwable}` : line;
}

/** The archive's entries for the diagnostics `d` read from `controller` with `logLines` log lines asked for. */
export function diagnosticsEntries(d: DiagnosticsView, controller: string, logLines: number, nowMs: number): TarEntry[] {
  const json = (value: unknown) => `${JSON.stringify(value ?? null, null, 2)}\n`;
  const files: [string, string][] = [
    ["readiness.json", json(d.readiness)],
    ["overview.json", json(d.overview)],
    ["settings.json", json(d.settings)],
    ["config.json", json(d.config)],
    ["redis.json", json(d.kv)],
    ["leases.json", json(d.leases)],
  ];
  if (logLines > 0) files.push(["logs.txt", (d.logs?.records ?? []).map((r) => `${humanLogLine(r)}\n`).join("")]);
  const manifest = {
    generatedAt: d.generatedAt ?? new Date(nowMs).toISOString(),
    controller: controller.replace(/\/+$/, ""),
    logLines,
    logRecords: d.logs?.records?.length ?? 0,
    entries: ["manifest.json", ...files.map(([name]) => name)],
  };
  return [["manifest.json", json(manifest)] as [string, string], ...files].map(([name, content]) => ({ name, content, mtimeMs: nowMs }));
}

/** The bundle as tar bytes (gzip them with `gzip()` of tar.ts). */
export function diagnosticsTar(d: DiagnosticsView, controller: string, logLines: number, nowMs: number): Uint8Array {
  return tarArchive(diagnosticsEntries(d, controller, logLines, nowMs));
}
