/**
 * Daemon reports → instance actor events. The daemon's runner states map onto the actor's events
 * (PREPARING ≈ DISPATCHED, STARTING ≈ SPAWNED, RUNNING ≈ READY, STOPPED/CRASHED ≈ EXITED, a crash
 * before the process ran ≈ FAILED); the actor's table decides what each means in its state, so a
 * report repeated after a reconnect changes nothing.
 *
 * Reconciliation: a report about an instance that is not live in the records (a replaced instance
 * on a node that came back, a leftover of a daemon restart) makes the owner force-stop it, so one
 * instance id never runs twice. An inventory (sent by the daemon after each handshake) that lacks
 * an instance the records place on the node means its process is gone: EXITED, recorded as LOST.
 * The owner's own query of a node (`list_instances`, {@link DaemonReportRouter.reconcile}) is read
 * the same way, with the races of a query in mind. A process found gone whose record holds a
 * requested stop (or whose daemon remembers it STOPPED) ends STOPPED, not CRASHED.
 */
import type { InstanceEvent } from "../../actors/instance/transitions.js";
import type { InstanceService } from "../domain/instances/instance-service.js";
import { FINISHED_STATES, type InstanceState } from "../domain/instances/instance-schemas.js";
import { EventTypes, type InstanceConsoleOutputPayload, type NodeCacheStatusPayload } from "../events/event-types.js";
import type { EventBus } from "../events/types.js";
import type { CrashReportMessage, InstanceStateReport } from "../wire/daemon-proto.js";
import type { DaemonReport } from "../wire/daemon-proto.js";
import type { Logger } from "../logs/types.js";
import type { Clock } from "../shared/clock.js";
import type { LiveInstances } from "./live-instances.js";

/** What a crash record needs from the daemon's crash report. */
export interface CrashDetails {
  exitCode: number;
  classification: string;
  logTail: string[];
  uptimeMs: number;
  timestampMs: number;
}

/** Crash reports waiting for their CRASHED state; bounded because a report may never be consumed. */
export const pendingCrashReportsMax = 10_000;

/** Console output of one instance, delivered to the console hub. */
export interface ConsoleSink {
  line(instanceId: string, line: string, stream: string, timestampMs: number): void;
}

export interface DaemonReportRouterDeps {
  live: LiveInstances;
  instances: Pick<InstanceService, "getDoc">;
  events: Pick<EventBus, "publish">;
  logger: Logger;
  clock: Clock;
  console?: ConsoleSink;
  /** Whether an instance actor runs here for `instanceId`. */
  isSupervised(instanceId: string): boolean;
  toInstance(instanceId: string, event: InstanceEvent): void;
  forceStopStray(nodeId: string, instanceId: string, group: string): Promise<void>;
  /** A node runs an instance whose live record another controller follows (or nobody, if its group is gone). */
  liveElsewhere?(group: string): void;
}

/** Routes one daemon's reports to the scheduler's actors. */
export class DaemonReportRouter {
  private readonly crashDetails = new Map<string, CrashDetails>();
  console: ConsoleSink | null;

  constructor(private readonly deps: DaemonReportRouterDeps) {
    this.console = deps.console ?? null;
  }

  route(report: DaemonReport): void {
    const { message, nodeId } = report;
    switch (message.payload) {
      case "instance_state":
        this.state(nodeId, message.instance_state);
        return;
      case "crash_report":
        this.crash(message.crash_report);
        return;
      case "console_line": {
        const line = message.console_line;
        this.console?.line(line.instance_id, line.line, line.stream, line.timestamp_ms);
        this.deps.events.publish(EventTypes.INSTANCE_CONSOLE_OUTPUT, {
          instanceId: line.instance_id,
          line: line.line,
          timestampMs: line.timestamp_ms,
        } satisfies InstanceConsoleOutputPayload);
        return;
      }
      case "inventory":
        void this.inventory(nodeId, message.inventory.instances).catch((err: unknown) =>
          this.deps.logger.error(`Reconciling the inventory of node ${nodeId} failed`, err),
        );
        return;
      case "cache_status":
        this.deps.events.publish(EventTypes.NODE_CACHE_STATUS, {
          nodeId,
          totalSizeBytes: message.cache_status.total_size_bytes,
          timestamp: new Date(this.deps.clock.nowMs()).toISOString(),
        } satisfies NodeCacheStatusPayload);
        return;
      default:
        return;
    }
  }

  /** The crash details the daemon reported for an instance, once. */
  takeCrashDetails(instanceId: string): CrashDetails | undefined {
    const details = this.crashDetails.get(instanceId);
    this.crashDetails.delete(instanceId);
    return details;
  }

  private state(nodeId: string, report: InstanceStateReport): void {
    const live = this.deps.live.get(report.instance_id);
    if (!live || live.node !== nodeId || FINISHED_STATES.has(live.state)) {
      void this.reconcileUnknown(nodeId, report);
      return;
    }
    if (!this.deps.isSupervised(report.instance_id)) return;
    for (const event of eventsOfReport(report)) this.deps.toInstance(report.instance_id, event);
  }

  private crash(report: CrashReportMessage): void {
    if (this.crashDetails.size >= pendingCrashReportsMax) this.crashDetails.delete(this.crashDetails.keys().next().value as string);
    this.crashDetails.set(report.instance_id, {
      exitCode: report.exit_code,
      classification: report.classification || "ERROR_EXIT",
      logTail: report.last_lines,
      uptimeMs: report.uptime_ms,
      timestampMs: report.timestamp_ms || this.deps.clock.nowMs(),
    });
  }

  /** A report about an instance that is not live here: stop the process unless the records say it is live. */
  private async reconcileUnknown(nodeId: string, report: InstanceStateReport): Promise<void> {
    if (report.state === "STOPPED" || report.state === "CRASHED") return;
    const doc = await this.deps.instances.getDoc(report.instance_id);
    if (doc && doc.node === nodeId && !FINISHED_STATES.has(doc.state)) return this.deps.liveElsewhere?.(doc.group);
    await this.deps.forceStopStray(nodeId, report.instance_id, report.group);
  }

  private async inventory(nodeId: string, reports: readonly InstanceStateReport[]): Promise<void> {
    const reported = new Set<string>();
    for (const report of reports) {
      reported.add(report.instance_id);
      this.state(nodeId, report);
    }
    const gone: Promise<void>[] = [];
    for (const instance of this.deps.live.onNode(nodeId)) {
      if (reported.has(instance.id) || !this.deps.isSupervised(instance.id)) continue;
      // SCHEDULED: the start command may still be on its way; the dispatch timeout covers it.
      if (instance.state === "SCHEDULED") continue;
      gone.push(this.gone(nodeId, instance.id, instance.state, null));
    }
    await Promise.all(gone);
  }

  /**
   * The owner's query of a node answered: `reports` is what the daemon runs now, then what ended
   * recently (list_instances); `asked` the state of each instance supervised here on that node when
   * the query was sent. Live reports go the usual way (events for supervised instances, a
   * force-stop for strays of owned groups). An instance the node no longer runs is ended, unless
   * it was SCHEDULED when asked (its start may have been on its way), it went back to an earlier
   * state since (a STATIC slot started again under its id), or its record, read again now, is
   * finished or on another node.
   */
  async reconcile(nodeId: string, reports: readonly InstanceStateReport[], asked: ReadonlyMap<string, InstanceState>): Promise<void> {
    const ended = new Map<string, InstanceStateReport>();
    for (const report of reports) {
      if (report.state === "STOPPED" || report.state === "CRASHED") ended.set(report.instance_id, report);
      else this.state(nodeId, report);
    }
    const running = new Set(reports.filter((r) => !ended.has(r.instance_id)).map((r) => r.instance_id));
    const gone: Promise<void>[] = [];
    for (const [id, before] of asked) {
      if (running.has(id) || before === "SCHEDULED") continue;
      const now = this.deps.live.get(id)?.state;
      if (now === undefined || !this.deps.isSupervised(id) || lifecycleRank(now) < lifecycleRank(before)) continue;
      gone.push(this.gone(nodeId, id, now, ended.get(id) ?? null));
    }
    await Promise.all(gone);
  }

  /**
   * The node no longer runs `id`: after reading its record again, it ends STOPPED when a stop was
   * asked for (on the record, by the daemon's STOPPED, or the actor is STOPPING), else CRASHED as
   * the daemon remembers it or with classification LOST. The actor's table ignores what it is past.
   */
  private async gone(nodeId: string, id: string, state: InstanceState, end: InstanceStateReport | null): Promise<void> {
    const doc = await this.deps.instances.getDoc(id);
    if (!doc || doc.node !== nodeId || FINISHED_STATES.has(doc.state) || !this.deps.isSupervised(id)) return;
    const requested = doc.stopRequested ?? (end?.state === "STOPPED" ? "STOP" : undefined);
    this.deps.logger.warn(
      `Node ${nodeId} no longer runs ${id} (was ${state}${requested ? `, ${requested} requested` : ""}${end ? `, ended ${end.state}` : ""})`,
    );
    if (requested !== undefined) {
      if (state !== "STOPPING") this.deps.toInstance(id, { type: requested });
      this.deps.toInstance(id, { type: "EXITED", exitCode: end?.exit_code ?? -1 });
      return;
    }
    if (end?.state === "CRASHED") {
      if (!this.crashDetails.has(id)) {
        const classification = /^[A-Z_]+/.exec(end.message)?.[0] ?? "ERROR_EXIT";
        this.crashDetails.set(id, {
          exitCode: end.exit_code,
          classification,
          logTail: [],
          uptimeMs: 0,
          timestampMs: end.timestamp_ms || this.deps.clock.nowMs(),
        });
      }
      for (const event of eventsOfReport(end)) this.deps.toInstance(id, event);
      return;
    }
    if (state !== "STOPPING") {
      this.crashDetails.set(id, { exitCode: -1, classification: "LOST", logTail: [], uptimeMs: 0, timestampMs: this.deps.clock.nowMs() });
    }
    this.deps.toInstance(id, state === "PREPARING" ? { type: "FAILED", reason: "LOST" } : { type: "EXITED", exitCode: -1 });
  }
}

/** Order of the live states in an instance's life (a later report cannot move an actor back). */
function lifecycleRank(state: InstanceState): number {
  return ["SCHEDULED", "PREPARING", "STARTING", "RUNNING", "DRAINING", "STOPPING"].indexOf(state);
}

/**
 * The actor events a daemon state report stands for, in order. A report may skip states (reports
 * sent while the stream was down are not repeated; an inventory gives only the current state), so
 * the events of the states before it come first; the actor ignores those it is already past.
 */
export function eventsOfReport(report: Pick<InstanceStateReport, "state" | "exit_code" | "message">): readonly InstanceEvent[] {
  switch (report.state) {
    case "PREPARING":
      return [{ type: "DISPATCHED" }];
    case "STARTING":
      return [{ type: "DISPATCHED" }, { type: "SPAWNED" }];
    case "RUNNING":
      return READY_CHAIN;
    case "STOPPING":
      // The daemon is stopping it on its own (the daemon itself is shutting down): an expected end.
      return [{ type: "STOP" }];
    case "STOPPED":
      return [{ type: "EXITED", exitCode: report.exit_code }];
    case "CRASHED":
      return /PREPARE_FAILED|SPAWN_FAILED/.test(report.message)
        ? [{ type: "FAILED", reason: report.message }]
        : [{ type: "EXITED", exitCode: report.exit_code }];
    default:
      return [];
  }
}

/** From any state before RUNNING to RUNNING: the process runs and is ready. */
export const READY_CHAIN: readonly InstanceEvent[] = [{ type: "DISPATCHED" }, { type: "SPAWNED" }, { type: "READY" }];
