/**
 * What the daemon tells the controller about its instances. Runner events become stream reports
 * (instance_state, console_line, crash_report); after every hello_ack the controller gets one
 * inventory of every live instance, then the final reports (crash reports, STOPPED and CRASHED
 * states) it missed while disconnected, in order, from a bounded queue; then the cache status.
 * Console lines and intermediate states produced while disconnected are dropped: the inventory
 * says where each instance is now. Decisions: docs/decisions/daemon-stream.md.
 */
import type { CacheStatus, ConsoleLine, CrashReportMessage, DaemonMessage, InstanceStateReport } from "../wire/daemon-proto.js";
import { daemonMessage } from "../wire/daemon-proto.js";
import { systemClock, type Clock, type Timer } from "../shared/clock.js";
import type { CrashReport, InstanceRunner, InstanceSnapshot, RunnerEvent } from "./instance-runner.js";
import type { SendOptions } from "./gateway-client.js";
import type { TemplateCacheStatus } from "./template-cache.js";

/** Final reports kept while disconnected; beyond this the oldest are dropped. */
export const finalReportsQueuedMax = 1_000;
/** cache_status goes out at most this often. */
export const cacheStatusIntervalMs = 1_000;
/** exit_code on the wire when there is none (ended by a signal, or never ran). */
export const NO_EXIT_CODE = -1;

/** Where reports go (the gateway client). */
export interface ReportSink {
  send(message: DaemonMessage, options?: SendOptions): boolean;
}

type StateEvent = Extract<RunnerEvent, { type: "state" }>;
type ConsoleEvent = Extract<RunnerEvent, { type: "console" }>;

/** The message of a final state: the crash classification, with the reason when there is one. */
export function crashSummary(report: CrashReport): string {
  return report.reason ? `${report.classification}: ${report.reason}` : report.classification;
}

/** instance_state for a runner state event. */
export function stateReport(event: StateEvent, fencingToken: number, message = ""): InstanceStateReport {
  const final = event.state === "STOPPED" || event.state === "CRASHED";
  return {
    instance_id: event.instanceId,
    group: event.group,
    state: event.state,
    fencing_token: fencingToken,
    port: event.port,
    pid: event.pid ?? 0,
    exit_code: final ? (event.exitCode ?? NO_EXIT_CODE) : 0,
    message,
    timestamp_ms: event.timestampMs,
  };
}

/** console_line for a runner console event. */
export function consoleReport(event: ConsoleEvent, sequence: number): ConsoleLine {
  return { instance_id: event.instanceId, stream: event.stream, line: event.line, timestamp_ms: event.timestampMs, sequence };
}

/** crash_report for a runner crash report. */
export function crashReport(report: CrashReport, fencingToken: number): CrashReportMessage {
  return {
    instance_id: report.instanceId,
    group: report.group,
    exit_code: report.exitCode ?? NO_EXIT_CODE,
    signal: report.signal ?? "",
    classification: report.classification,
    last_lines: report.logTail,
    uptime_ms: report.uptimeMs,
    fencing_token: fencingToken,
    timestamp_ms: report.timestampMs,
  };
}

/** One inventory entry: where a live instance is now. */
export function inventoryEntry(snapshot: InstanceSnapshot, fencingToken: number, nowMs: number): InstanceStateReport {
  return {
    instance_id: snapshot.instanceId,
    group: snapshot.group,
    state: snapshot.state,
    fencing_token: fencingToken,
    port: snapshot.port,
    pid: snapshot.pid ?? 0,
    exit_code: 0,
    message: "",
    timestamp_ms: nowMs,
  };
}

/** cache_status for the cache's occupancy. */
export function cacheStatusReport(status: TemplateCacheStatus): CacheStatus {
  return { total_size_bytes: status.sizeBytes, entry_count: status.blobCount };
}

export interface InstanceReporterOptions {
  runner: Pick<InstanceRunner, "subscribe" | "list" | "highestFencingToken">;
  sink: ReportSink;
  /** The template cache's occupancy; without it no cache_status is sent. */
  cacheStatus?: () => TemplateCacheStatus;
  clock?: Clock;
  /** Told when final reports are dropped from a full queue. */
  onFinalReportsDropped?: (count: number) => void;
}

/** Forwards runner events to the controller and catches it up after each hello_ack. */
export class InstanceReporter {
  private readonly clock: Clock;
  private readonly unsubscribe: () => void;
  /** Final reports not yet handed to a stream, oldest first; at most finalReportsQueuedMax. */
  private readonly finalQueue: DaemonMessage[] = [];
  /** The crash event of an instance, until its CRASHED state event (emitted right after it). */
  private readonly pendingCrashes = new Map<string, CrashReport>();
  private consoleSequence = 0;
  private droppedConsole = 0;
  private droppedFinal = 0;
  private lastCacheStatus: CacheStatus | null = null;
  private lastCacheStatusAtMs = Number.NEGATIVE_INFINITY;
  private cacheTimer: Timer | null = null;

  constructor(private readonly options: InstanceReporterOptions) {
    this.clock = options.clock ?? systemClock;
    this.unsubscribe = options.runner.subscribe((event) => this.onEvent(event));
  }

  /** Console lines dropped so far (disconnected, or the stream's buffer was full). */
  get droppedConsoleLines(): number {
    return this.droppedConsole;
  }

  /** Final reports dropped so far because the queue was full. */
  get droppedFinalReports(): number {
    return this.droppedFinal;
  }

  /** Final reports waiting for a session. */
  get queuedFinalReports(): number {
    return this.finalQueue.length;
  }

  /** A hello_ack arrived: inventory first, then the queued final reports in order, then the cache status. */
  sessionOpened(): void {
    const nowMs = this.clock.nowMs();
    const instances = this.options.runner.list().map((snapshot) => inventoryEntry(snapshot, this.fencingTokenOf(snapshot.group), nowMs));
    if (!this.options.sink.send(daemonMessage("inventory", { instances }))) return;
    this.flushFinalReports();
    this.lastCacheStatus = null;
    this.sendCacheStatus();
  }

  /** The template cache may have changed size: a cache_status follows, at most once per {@link cacheStatusIntervalMs}. */
  cacheChanged(): void {
    if (!this.options.cacheStatus || this.cacheTimer !== null) return;
    const waitMs = this.lastCacheStatusAtMs + cacheStatusIntervalMs - this.clock.nowMs();
    if (waitMs <= 0) {
      this.sendCacheStatus();
      return;
    }
    this.cacheTimer = this.clock.setTimeout(() => {
      this.cacheTimer = null;
      this.sendCacheStatus();
    }, waitMs);
  }

  /** Stops listening to the runner and cancels the pending cache_status. */
  close(): void {
    this.unsubscribe();
    this.cacheTimer?.cancel();
    this.cacheTimer = null;
  }

  private fencingTokenOf(group: string): number {
    return this.options.runner.highestFencingToken(group) ?? 0;
  }

  private onEvent(event: RunnerEvent): void {
    switch (event.type) {
      case "console": {
        this.consoleSequence += 1;
        if (!this.options.sink.send(daemonMessage("console_line", consoleReport(event, this.consoleSequence)), { droppable: true })) this.droppedConsole += 1;
        return;
      }
      case "crash":
        this.pendingCrashes.set(event.report.instanceId, event.report);
        this.sendFinal(daemonMessage("crash_report", crashReport(event.report, this.fencingTokenOf(event.report.group))));
        return;
      case "state": {
        const token = this.fencingTokenOf(event.group);
        if (event.state !== "STOPPED" && event.state !== "CRASHED") {
          // Lost while disconnected: the next inventory tells where the instance is.
          this.options.sink.send(daemonMessage("instance_state", stateReport(event, token)));
          return;
        }
        const crash = this.pendingCrashes.get(event.instanceId);
        this.pendingCrashes.delete(event.instanceId);
        this.sendFinal(daemonMessage("instance_state", stateReport(event, token, crash ? crashSummary(crash) : "")));
        return;
      }
    }
  }

  /** Sends a final report after those already queued; queues it while no session takes it. */
  private sendFinal(message: DaemonMessage): void {
    if (this.finalQueue.length === 0 && this.options.sink.send(message)) return;
    this.finalQueue.push(message);
    if (this.finalQueue.length > finalReportsQueuedMax) {
      const dropped = this.finalQueue.length - finalReportsQueuedMax;
      this.finalQueue.splice(0, dropped);
      this.droppedFinal += dropped;
      this.options.onFinalReportsDropped?.(dropped);
    }
  }

  private flushFinalReports(): void {
    while (this.finalQueue.length > 0) {
      if (!this.options.sink.send(this.finalQueue[0]!)) return;
      this.finalQueue.shift();
    }
  }

  private sendCacheStatus(): void {
    if (!this.options.cacheStatus) return;
    const status = cacheStatusReport(this.options.cacheStatus());
    const last = this.lastCacheStatus;
    if (last !== null && last.total_size_bytes === status.total_size_bytes && last.entry_count === status.entry_count) return;
    if (!this.options.sink.send(daemonMessage("cache_status", status))) return;
    this.lastCacheStatus = status;
    this.lastCacheStatusAtMs = this.clock.nowMs();
  }
}
