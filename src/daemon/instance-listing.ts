/**
 * The answer to `list_instances`: what this node runs now, for the controller that owns a group to
 * reconcile its records with. Every live instance as in the inventory, then the instances that
 * ended recently with their final state (STOPPED after a requested stop, CRASHED otherwise, the
 * exit code and the crash summary), so an owner that missed the final report still learns how the
 * process ended. The memory of ends is bounded in count and age, and forgets an id that starts
 * again (a STATIC slot respawned under its id). Decisions: docs/decisions/daemon-runner.md.
 */
import type { InstanceStateReport } from "../wire/daemon-proto.js";
import { systemClock, type Clock } from "../shared/clock.js";
import type { InstanceRunner, RunnerEvent } from "./instance-runner.js";
import { crashSummary, inventoryEntry, stateReport } from "./instance-reports.js";

/** Ends remembered at most; the oldest is forgotten first. */
export const recentEndsMax = 1_000;
/** How long an end is remembered (the controllers' lease TTL and reconciliation interval fit in it). */
export const recentEndsRetentionMs = 10 * 60_000;

/** What the listing reads of the runner. */
export type ListedRunner = Pick<InstanceRunner, "list" | "subscribe" | "highestFencingToken">;

/** Live instances and recent ends of one runner. */
export class InstanceListing {
  /** Final reports by instance id, oldest first (Map order). */
  private readonly ends = new Map<string, InstanceStateReport>();
  private readonly crashes = new Map<string, string>();

  constructor(
    private readonly runner: ListedRunner,
    private readonly clock: Clock = systemClock,
  ) {
    runner.subscribe((event) => this.observe(event));
  }

  /** Every live instance now, then the recent ends of instances that are not live again. */
  list(): InstanceStateReport[] {
    const nowMs = this.clock.nowMs();
    const live = this.runner.list().map((snapshot) => inventoryEntry(snapshot, this.runner.highestFencingToken(snapshot.group) ?? 0, nowMs));
    const liveIds = new Set(live.map((report) => report.instance_id));
    for (const [id, end] of this.ends) if (nowMs - end.timestamp_ms > recentEndsRetentionMs) this.ends.delete(id);
    return [...live, ...[...this.ends.values()].filter((end) => !liveIds.has(end.instance_id))];
  }

  private observe(event: RunnerEvent): void {
    if (event.type === "crash") {
      this.crashes.set(event.report.instanceId, crashSummary(event.report));
      if (this.crashes.size > recentEndsMax) this.crashes.delete(this.crashes.keys().next().value as string);
      return;
    }
    if (event.type !== "state") return;
    if (event.state !== "STOPPED" && event.state !== "CRASHED") {
      // Started again under the same id: the old end says nothing about this run.
      if (event.previousState === null) this.ends.delete(event.instanceId);
      return;
    }
    const summary = this.crashes.get(event.instanceId) ?? "";
    this.crashes.delete(event.instanceId);
    this.ends.delete(event.instanceId);
    this.ends.set(event.instanceId, stateReport(event, this.runner.highestFencingToken(event.group) ?? 0, summary));
    if (this.ends.size > recentEndsMax) this.ends.delete(this.ends.keys().next().value as string);
  }
}
