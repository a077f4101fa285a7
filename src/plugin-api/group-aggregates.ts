/**
 * GROUP_AGGREGATES_UPDATED (spec document 3): a group's `runningInstances` and `totalPlayers`,
 * published when they changed. Player moves and instance state changes mark the group; the marks
 * are collected for {@link aggregatesFlushDelayMs}, so a burst of joins costs one read and at most
 * one event per group. Each controller publishes for the changes it handled itself. A read costs
 * what the group's instance records cost to read: while a network of many large groups changes at
 * once (thousands of instances starting), the reads may take at most 1/{@link aggregatesReadShareMax}
 * of the time, so the next flush waits longer then.
 */
import { EventTypes, type GroupAggregatesUpdatedPayload, type InstanceStateChangedPayload } from "../events/event-types.js";
import type { CloudEvent, EventBus, Subscription } from "../events/types.js";
import type { InstanceService } from "../domain/instances/instance-service.js";
import type { Logger } from "../logs/types.js";
import type { Clock, Timer } from "../shared/clock.js";

/** How long changes are collected before the groups are read and published. */
export const aggregatesFlushDelayMs = 250;
/** A flush that took `t` ms is followed by the next one no sooner than `t × aggregatesReadShareMax` ms after it started. */
export const aggregatesReadShareMax = 20;
/** Groups remembered with their last published aggregates (one entry per group). */
export const aggregatesGroupsMax = 10_000;

/** Publishes a group's aggregates when they changed. */
export class GroupAggregatesPublisher {
  private readonly dirty = new Set<string>();
  private readonly last = new Map<string, string>();
  private timer: Timer | null = null;
  private flushing: Promise<void> = Promise.resolve();
  /** The next flush starts no sooner than this (the read share bound). */
  private nextFlushAtMs = 0;
  private subscription: Subscription | null = null;

  constructor(
    private readonly instances: Pick<InstanceService, "getDoc" | "aggregatesForGroup">,
    private readonly events: EventBus,
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {}

  /** Marks the groups of instances whose state changed on this controller. */
  start(): void {
    this.subscription = this.events.subscribe(EventTypes.INSTANCE_STATE_CHANGED, (event: CloudEvent) => {
      if (event.source.startsWith("peer:")) return;
      this.groupChanged((event.data as InstanceStateChangedPayload).group);
    });
  }

  async stop(): Promise<void> {
    this.subscription?.unsubscribe();
    this.timer?.cancel();
    this.timer = null;
    await this.flushing;
  }

  /** The players of an instance changed. */
  async instanceChanged(instanceId: string): Promise<void> {
    const doc = await this.instances.getDoc(instanceId);
    if (doc) this.groupChanged(doc.group);
  }

  groupChanged(group: string): void {
    this.dirty.add(group);
    if (this.timer === null) this.scheduleFlush(aggregatesFlushDelayMs);
  }

  private scheduleFlush(delayMs: number): void {
    this.timer = this.clock.setTimeout(
      () => {
        // A flush that ended after this timer was set may have pushed the next one further out.
        const waitMs = this.nextFlushAtMs - this.clock.nowMs();
        if (waitMs > 0) return this.scheduleFlush(waitMs);
        this.timer = null;
        this.flushing = this.flushing.then(() => this.flush());
      },
      Math.max(delayMs, this.nextFlushAtMs - this.clock.nowMs()),
    );
  }

  private async flush(): Promise<void> {
    const startedMs = this.clock.nowMs();
    try {
      await this.publishDirty();
    } finally {
      this.nextFlushAtMs = startedMs + (this.clock.nowMs() - startedMs) * aggregatesReadShareMax;
    }
  }

  private async publishDirty(): Promise<void> {
    const groups = [...this.dirty];
    this.dirty.clear();
    for (const group of groups) {
      try {
        const { runningInstances, totalPlayers } = await this.instances.aggregatesForGroup(group);
        const key = `${runningInstances}/${totalPlayers}`;
        if (this.last.get(group) === key) continue;
        if (this.last.size >= aggregatesGroupsMax) this.last.clear();
        this.last.set(group, key);
        this.events.publish(EventTypes.GROUP_AGGREGATES_UPDATED, { groupName: group, runningInstances, totalPlayers } satisfies GroupAggregatesUpdatedPayload);
      } catch (err) {
        this.logger.warn(`Reading the aggregates of group ${group} failed`, err);
      }
    }
  }
}
