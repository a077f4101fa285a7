/**
 * Crash records: an instance actor that ended CRASHED gets a crash record (the daemon's crash
 * report when one came, else what the actor knows), INSTANCE_CRASHED, and a count towards its
 * group's crash loop; a loop pauses the group (record `paused`, metric, GROUP_CRASH_LOOP) and the
 * group record says why: `schedulingIssue` CRASH_LOOP with the last crash's reason. A start that
 * failed (an instance CRASHED before it was RUNNING: unknown platform, missing jar, bind failure,
 * a start timeout) is the group's `schedulingIssue` START_FAILED, with the daemon's reason, until an
 * instance of the group reaches RUNNING; it never replaces a crash-loop pause's issue.
 */
import type { GroupEvent } from "../../actors/group/transitions.js";
import type { CrashService } from "../domain/crashes/crash-service.js";
import type { GroupService } from "../domain/groups/group-service.js";
import { isoFromMs } from "../domain/shared/time.js";
import { EventTypes, type GroupCrashLoopPayload, type InstanceCrashedPayload } from "../events/event-types.js";
import type { EventBus } from "../events/types.js";
import type { Logger } from "../logs/types.js";
import type { MetricsService } from "../metrics/metrics.js";
import type { Clock } from "../shared/clock.js";
import type { CrashCause, InstanceRef } from "./actor-effects.js";
import type { InstanceStateChange } from "./instance-lifecycle.js";
import { STARTING_STATES } from "./live-instances.js";
import { CrashLoopDetector, type CrashLoopOptions } from "./crash-loop.js";
import { crashReason, tailWithReason } from "./crash-reason.js";
import type { CrashDetails } from "./daemon-report-router.js";

/** Crash classifications that are not the group's fault: they do not count towards a crash loop. */
const NOT_THE_GROUPS_FAULT: ReadonlySet<string> = new Set(["NODE_LOST", "LOST"]);
/** The scheduling issue code of a crash-loop pause. */
export const CRASH_LOOP_ISSUE = "CRASH_LOOP";
/** The scheduling issue code of a failed start, kept until an instance of the group is RUNNING. */
export const START_FAILED_ISSUE = "START_FAILED";
/** Reasons of counted crashes waiting for their recorded CRASHED state; bounded because a state write may never come (scope lost). */
export const pendingStartFailuresMax = 10_000;
/** The last log line quoted in a crash-loop issue is cut beyond this. */
export const crashReasonLineCharsMax = 300;

export interface CrashRecorderDeps {
  crashes: Pick<CrashService, "record">;
  groups: Pick<GroupService, "setSchedulingState" | "getDoc">;
  events: Pick<EventBus, "publish">;
  metrics: Pick<MetricsService, "schedulerCrashLoops">;
  clock: Clock;
  logger: Logger;
  crashLoop: CrashLoopOptions;
  /** The daemon's crash report for the instance, once (the report router keeps them). */
  takeCrashDetails(instanceId: string): CrashDetails | undefined;
  toGroup(group: string, event: GroupEvent): void;
}

/** Records crashes and watches for crash loops. */
export class CrashRecorder {
  private readonly loops: CrashLoopDetector;
  /** The reason of each group's last counted crash, kept until its loop trips or the group resets. */
  private readonly lastCrashOf = new Map<string, string>();
  /**
   * Instance id → the start-failure message of its counted crash. Set by {@link record} before its
   * first await, which runs in the actor's transition, before the CRASHED state is recorded and
   * {@link stateChanged} hears which state the crash came from.
   */
  private readonly startFailureOf = new Map<string, string>();

  constructor(private readonly deps: CrashRecorderDeps) {
    this.loops = new CrashLoopDetector(deps.crashLoop, deps.clock);
  }

  /** `countsTowardsLoop` false: the crash is recorded but is not the group's fault (its node was lost). */
  async record(ref: InstanceRef, cause: CrashCause, countsTowardsLoop = true): Promise<void> {
    const details: CrashDetails = this.deps.takeCrashDetails(ref.instanceId) ?? {
      exitCode: cause.kind === "EXIT" ? cause.exitCode : -1,
      classification: cause.kind === "EXIT" ? (cause.exitCode === 0 ? "NORMAL_EXIT_UNEXPECTED" : "ERROR_EXIT") : classificationOfReason(cause.reason),
      logTail: [],
      uptimeMs: 0,
      timestampMs: this.deps.clock.nowMs(),
    };
    const reason = crashReason(cause, details.exitCode, details.logTail);
    if (countsTowardsLoop && !NOT_THE_GROUPS_FAULT.has(details.classification)) {
      if (this.startFailureOf.size >= pendingStartFailuresMax) this.startFailureOf.delete(this.startFailureOf.keys().next().value as string);
      this.startFailureOf.set(ref.instanceId, `the last start failed: ${ref.instanceId} on ${ref.node}: ${details.classification}: ${reason}`);
    }
    const crash = {
      instanceId: ref.instanceId,
      group: ref.group,
      nodeId: ref.node,
      exitCode: details.exitCode,
      classification: details.classification,
      logTail: tailWithReason(cause, details.logTail, reason),
      uptimeMs: details.uptimeMs,
    } satisfies InstanceCrashedPayload;
    try {
      await this.deps.crashes.record({ ...crash, reason, timestampMs: details.timestampMs });
    } catch (err) {
      this.deps.logger.error(`Recording the crash of ${ref.instanceId} failed`, err);
    }
    this.deps.events.publish(EventTypes.INSTANCE_CRASHED, crash);
    this.deps.logger.warn(`Instance ${ref.instanceId} of ${ref.group} crashed on ${ref.node}: ${details.classification} (${reason})`);
    if (!countsTowardsLoop || NOT_THE_GROUPS_FAULT.has(details.classification)) return;
    const verdict = this.loops.recordCrash(ref.group);
    // Bounded like the detector's windows: one entry per group with a counted crash, dropped on reset.
    // The crash's own tail: a process that never ran has the daemon's reason as its only line.
    this.lastCrashOf.set(ref.group, crashLoopQuote(ref, { ...details, logTail: crash.logTail }));
    if (verdict.tripped) this.deps.toGroup(ref.group, { type: "CRASH_LOOP", crashCount: verdict.crashCount, windowStartMs: verdict.windowStartMs });
  }

  /** The group actor entered its crash-loop pause: the record says so, and it is announced. */
  async pauseGroup(group: string, loop: { crashCount: number; windowStartMs: number }): Promise<void> {
    const windowS = Math.round(this.deps.crashLoop.crashLoopWindowMs / 1000);
    const last = this.lastCrashOf.get(group);
    const message = `paused: ${loop.crashCount} crashes within ${windowS} s${last ? `; the last: ${last}` : ""}`;
    const since = isoFromMs(this.deps.clock.nowMs());
    await this.deps.groups.setSchedulingState(group, { paused: true, schedulingIssue: { code: CRASH_LOOP_ISSUE, message, since } });
    this.deps.metrics.schedulerCrashLoops.inc();
    this.deps.logger.warn(`Group ${group} paused: ${loop.crashCount} crashes since ${isoFromMs(loop.windowStartMs)} (crash loop)`);
    this.deps.events.publish(EventTypes.GROUP_CRASH_LOOP, {
      group,
      crashCount: loop.crashCount,
      windowStart: isoFromMs(loop.windowStartMs),
    } satisfies GroupCrashLoopPayload);
  }

  /**
   * An instance's new state was recorded. CRASHED from a starting state with a counted crash: the
   * group's issue is the start failure (a crash-loop pause's issue stays). RUNNING: a start-failure
   * issue is cleared. Both are the group record's compare-and-set writes, decided on the issue read.
   */
  async stateChanged(change: InstanceStateChange): Promise<void> {
    if (change.to === "RUNNING") {
      // Every start ends here: the group's write lock is taken only when there is an issue to clear.
      if ((await this.deps.groups.getDoc(change.group))?.schedulingIssue?.code !== START_FAILED_ISSUE) return;
      await this.deps.groups.setSchedulingState(change.group, { reviseIssue: (current) => (current?.code === START_FAILED_ISSUE ? null : undefined) });
      return;
    }
    if (change.to !== "CRASHED") return;
    const message = this.startFailureOf.get(change.instanceId);
    this.startFailureOf.delete(change.instanceId);
    if (message === undefined || !STARTING_STATES.has(change.from)) return;
    const nowIso = isoFromMs(this.deps.clock.nowMs());
    await this.deps.groups.setSchedulingState(change.group, {
      reviseIssue: (current) =>
        current?.code === CRASH_LOOP_ISSUE
          ? undefined
          : { code: START_FAILED_ISSUE, message, since: current?.code === START_FAILED_ISSUE ? current.since : nowIso },
    });
  }

  /** The group was resumed or deleted: its crash window starts afresh. */
  reset(group: string): void {
    this.loops.reset(group);
    this.lastCrashOf.delete(group);
  }
}

/** One crash as a crash-loop issue quotes it: `<id> on <node>: <classification> (exit <code>): <last log line>`. */
export function crashLoopQuote(ref: InstanceRef, details: Pick<CrashDetails, "classification" | "exitCode" | "logTail">): string {
  const lastLine =
    [...details.logTail]
      .reverse()
      .find((line) => line.trim() !== "")
      ?.trim() ?? "";
  const quoted = lastLine.length > crashReasonLineCharsMax ? `${lastLine.slice(0, crashReasonLineCharsMax)}…` : lastLine;
  return `${ref.instanceId} on ${ref.node}: ${details.classification} (exit ${details.exitCode})${quoted ? `: ${quoted}` : ""}`;
}

/** The crash classification of a failure without a process exit. */
export function classificationOfReason(reason: string): string {
  if (reason === "NODE_LOST") return "NODE_LOST";
  if (reason.startsWith("TIMEOUT:")) return "TIMEOUT";
  if (reason.startsWith("PREPARE_FAILED")) return "PREPARE_FAILED";
  if (reason.startsWith("SPAWN_FAILED")) return "SPAWN_FAILED";
  return "START_FAILED";
}
