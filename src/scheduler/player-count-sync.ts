/**
 * Player counts on the instance records, written by the owner alone. The player registry (the
 * rosters in the key-value store) is the truth; a player route on any controller changes it. Only
 * the controller that schedules an instance writes its record — a count written by another one,
 * as a read and a write of the whole record, could put back a state the owner had moved on from.
 * So the owner follows the registry: at once for a change it handled itself or heard of (a peer's
 * PLAYER_CONNECTED / PLAYER_DISCONNECTED), and every {@link SchedulerTuning.playerCountSyncIntervalMs}
 * for every instance it supervises (moves do not cross controllers as events, and a controller
 * can die between the registry's change and its report), so a count that went wrong is repaired
 * within one interval.
 */
import type { Logger } from "../logs/types.js";
import type { Clock, Timer } from "../shared/clock.js";
import type { LiveInstances } from "./live-instances.js";
import type { SupervisedInstances } from "./supervised-instances.js";

/** Instances whose counts are read from the registry at once. */
const countsReadBatch = 200;

export interface PlayerCountSyncDeps {
  supervised: SupervisedInstances;
  live: LiveInstances;
  clock: Clock;
  logger: Logger;
  intervalMs: number;
  /** The registry's player count of each instance; absent when the registry does not know it (left as it is). */
  counts(instanceIds: readonly string[]): Promise<Map<string, number>>;
  /** The owner's path: the in-memory view, the record, EMPTY for a draining instance, the group told. */
  apply(instanceId: string, playerCount: number): Promise<void>;
}

export class PlayerCountSync {
  private timer: Timer | null = null;
  private running: Promise<void> | null = null;

  constructor(private readonly deps: PlayerCountSyncDeps) {}

  start(): void {
    this.timer ??= this.deps.clock.setInterval(() => void this.sweep(), this.deps.intervalMs, { unref: true });
  }

  async stop(): Promise<void> {
    this.timer?.cancel();
    this.timer = null;
    await this.running;
  }

  /** Reads the counts of the instances supervised here among `instanceIds` and applies those that differ. */
  async refresh(instanceIds: readonly string[]): Promise<void> {
    const owned = instanceIds.filter((id) => this.deps.supervised.has(id));
    for (let at = 0; at < owned.length; at += countsReadBatch) {
      const batch = owned.slice(at, at + countsReadBatch);
      const counts = await this.deps.counts(batch);
      for (const id of batch) {
        const count = counts.get(id);
        const live = this.deps.live.get(id);
        if (count === undefined || !live || !this.deps.supervised.has(id) || live.playerCount === count) continue;
        // One instance whose write fails does not hold up the others; it is tried again next pass.
        await this.deps
          .apply(id, count)
          .catch((err: unknown) => this.deps.logger.warn(`Writing the player count ${count} of ${id} failed; next pass in one interval`, err));
      }
    }
  }

  /** One pass over every supervised instance (one at a time). */
  sweep(): Promise<void> {
    if (this.running) return this.running;
    this.running = this.refresh([...this.deps.supervised.ids()])
      .catch((err: unknown) => this.deps.logger.warn("Reading the player counts of the owned instances failed; next pass in one interval", err))
      .finally(() => (this.running = null));
    return this.running;
  }
}
