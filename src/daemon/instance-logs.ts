/**
 * The daemon's instance logs: every console line of an instance, and the daemon's own lines about
 * it (`[cloud] …`: state changes, how it ended, a start the daemon refused), appended to
 * `<dataDir>/instance-logs/<instanceId>.log` as JSON lines. They outlive the instance, so
 * `cloudctl logs <instance>` shows why one that is gone ended. Bounded: a file is rotated to
 * `<id>.log.1` past {@link instanceLogBytesMax} (one rotated file kept), and past
 * {@link instanceLogFilesMax} instances, or {@link instanceLogMaxAgeMs} without a write, the
 * oldest logs are removed. Writes are batched and never block the event loop; a read first waits
 * for the lines already handed over. Decisions: docs/decisions/daemon-runner.md ("Instance logs").
 */
import { mkdir, readdir, readFile, rename, rm, stat, appendFile } from "node:fs/promises";
import { join } from "node:path";
import type { RunnerEvent } from "./runner-types.js";

/** A log file is rotated once it grows past this (the rotated copy is kept: at most twice this per instance). */
export const instanceLogBytesMax = 1024 * 1024;
/** Instances whose logs are kept; the least recently written go first. */
export const instanceLogFilesMax = 500;
/** A log not written for this long is removed at the next prune. */
export const instanceLogMaxAgeMs = 7 * 24 * 3600 * 1000;
/** Lines one read answers at most. */
export const instanceLogReadLinesMax = 2_000;
/** Lines waiting to be written per instance; beyond this the oldest waiting line is dropped (and counted). */
export const instanceLogPendingLinesMax = 10_000;
/** Bytes written to a log in one append at most, so a file never grows far past its bound before it is rotated. */
export const instanceLogWriteBytesMax = 64 * 1024;
/** Prefix of the daemon's own lines in an instance log. */
export const DAEMON_LINE_PREFIX = "[cloud] ";

/** One line of an instance log. */
export interface InstanceLogLine {
  line: string;
  /** "stdout", "stderr", or "cloud" for the daemon's own lines. */
  stream: string;
  timestampMs: number;
}

const safeId = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

interface Writer {
  pending: string[];
  dropped: number;
  bytes: number | null;
  flushing: Promise<void> | null;
}

/** Appends to and reads instance logs under one directory. */
export class InstanceLogStore {
  private readonly writers = new Map<string, Writer>();
  private pruning: Promise<void> | null = null;

  constructor(
    readonly directory: string,
    private readonly nowMs: () => number = Date.now,
  ) {}

  /** Creates the directory and removes logs past the bounds. */
  async open(): Promise<void> {
    await mkdir(this.directory, { recursive: true });
    await this.prune();
  }

  /** Appends a line; ignored for an id that cannot be a file name (the runner refuses such ids anyway). */
  append(instanceId: string, entry: InstanceLogLine): void {
    if (!safeId.test(instanceId)) return;
    let writer = this.writers.get(instanceId);
    if (writer === undefined) {
      writer = { pending: [], dropped: 0, bytes: null, flushing: null };
      this.writers.set(instanceId, writer);
    }
    writer.pending.push(`${JSON.stringify({ t: entry.timestampMs, s: entry.stream, l: entry.line })}\n`);
    if (writer.pending.length > instanceLogPendingLinesMax) {
      writer.pending.shift();
      writer.dropped++;
    }
    writer.flushing ??= this.flush(instanceId, writer);
  }

  /** Appends one of the daemon's own lines about the instance. */
  note(instanceId: string, text: string): void {
    this.append(instanceId, { line: `${DAEMON_LINE_PREFIX}${text}`, stream: "cloud", timestampMs: this.nowMs() });
  }

  /** The last `tailLines` lines (at most {@link instanceLogReadLinesMax}), oldest first; null when there is no log. */
  async read(instanceId: string, tailLines: number): Promise<InstanceLogLine[] | null> {
    if (!safeId.test(instanceId)) return null;
    const want = Math.max(1, Math.min(instanceLogReadLinesMax, Math.floor(tailLines)));
    await this.writers.get(instanceId)?.flushing;
    const file = this.fileOf(instanceId);
    const current = await readLines(file);
    if (current === null) return null;
    const lines = current.length >= want ? current : [...((await readLines(`${file}.1`)) ?? []), ...current];
    return lines.slice(-want).flatMap(parseLine);
  }

  /** Waits for every line handed over so far to be written. */
  async idle(): Promise<void> {
    await Promise.all([...this.writers.values()].map((writer) => writer.flushing));
  }

  /** Removes logs beyond the count and age bounds (at most one prune runs at a time). */
  prune(): Promise<void> {
    this.pruning ??= this.pruneNow().finally(() => (this.pruning = null));
    return this.pruning;
  }

  private fileOf(instanceId: string): string {
    return join(this.directory, `${instanceId}.log`);
  }

  private async flush(instanceId: string, writer: Writer): Promise<void> {
    const file = this.fileOf(instanceId);
    try {
      if (writer.bytes === null) {
        writer.bytes = await stat(file).then(
          (info) => info.size,
          () => 0,
        );
        // A first write to a new log is a good time to keep the directory within its bounds.
        if (writer.bytes === 0) void this.prune();
      }
      while (writer.pending.length > 0) {
        if (writer.dropped > 0) {
          writer.pending.unshift(
            `${JSON.stringify({ t: this.nowMs(), s: "cloud", l: `${DAEMON_LINE_PREFIX}${writer.dropped} lines dropped (written too fast)` })}\n`,
          );
          writer.dropped = 0;
        }
        let taken = 0;
        let batch = "";
        while (taken < writer.pending.length && (taken === 0 || batch.length + writer.pending[taken].length <= instanceLogWriteBytesMax))
          batch += writer.pending[taken++];
        writer.pending.splice(0, taken);
        if (writer.bytes > 0 && writer.bytes + batch.length > instanceLogBytesMax) {
          await rename(file, `${file}.1`).catch(() => undefined);
          writer.bytes = 0;
        }
        await appendFile(file, batch);
        writer.bytes += Buffer.byteLength(batch);
      }
    } catch {
      // A log that cannot be written (disk full, directory removed) must not stop the instance.
      writer.pending = [];
    } finally {
      writer.flushing = null;
      if (writer.pending.length > 0) writer.flushing = this.flush(instanceId, writer);
      else this.writers.delete(instanceId);
    }
  }

  private async pruneNow(): Promise<void> {
    let names: string[];
    try {
      names = (await readdir(this.directory)).filter((name) => name.endsWith(".log"));
    } catch {
      return;
    }
    const files = (
      await Promise.all(
        names.map(async (name) => {
          const info = await stat(join(this.directory, name)).catch(() => null);
          return info ? { name, mtimeMs: info.mtimeMs } : null;
        }),
      )
    ).filter((file): file is { name: string; mtimeMs: number } => file !== null);
    files.sort((a, b) => b.mtimeMs - a.mtimeMs);
    const now = this.nowMs();
    const doomed = files.filter((file, index) => index >= instanceLogFilesMax || now - file.mtimeMs > instanceLogMaxAgeMs);
    for (const file of doomed) {
      if (this.writers.has(file.name.slice(0, -".log".length))) continue;
      await rm(join(this.directory, file.name), { force: true });
      await rm(join(this.directory, `${file.name}.1`), { force: true });
    }
  }
}

async function readLines(file: string): Promise<string[] | null> {
  try {
    const text = await readFile(file, "utf8");
    return text.split("\n").filter((line) => line !== "");
  } catch {
    return null;
  }
}

function parseLine(text: string): InstanceLogLine[] {
  try {
    const parsed = JSON.parse(text) as { t?: unknown; s?: unknown; l?: unknown };
    if (typeof parsed.l !== "string") return [];
    return [{ line: parsed.l, stream: typeof parsed.s === "string" ? parsed.s : "stdout", timestampMs: typeof parsed.t === "number" ? parsed.t : 0 }];
  } catch {
    // A line cut by a crash mid-write: skipped.
    return [];
  }
}

/** The runner events an instance log records: console lines as they are, the rest as the daemon's own lines. */
export function recordRunnerEvent(logs: Pick<InstanceLogStore, "append" | "note">, event: RunnerEvent): void {
  switch (event.type) {
    case "console":
      logs.append(event.instanceId, { line: event.line, stream: event.stream, timestampMs: event.timestampMs });
      return;
    case "state": {
      const detail = [
        event.state === "PREPARING" ? `port ${event.port}` : "",
        event.pid !== undefined && event.state === "STARTING" ? `pid ${event.pid}` : "",
        event.exitCode !== undefined && event.exitCode !== null ? `exit code ${event.exitCode}` : "",
        event.signal ? `signal ${event.signal}` : "",
      ].filter(Boolean);
      logs.note(event.instanceId, `${event.state}${detail.length > 0 ? ` (${detail.join(", ")})` : ""}`);
      return;
    }
    case "crash": {
      const { report } = event;
      const how = report.reason ?? (report.signal ? `signal ${report.signal}` : `exit code ${report.exitCode}`);
      logs.note(report.instanceId, `crashed: ${report.classification}: ${how}`);
      return;
    }
  }
}
