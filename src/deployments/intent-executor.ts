/**
 * The group owner's side of a deployment. The reconciler may run on a controller that does not
 * schedule the group; it writes an intent into the deployment's progress document, and the
 * controller that holds the group's lease carries it out through the scheduler's deployments seam
 * (instance-lifecycle.ts): new instances of the intent's revision until the group has `wantNew` of
 * them (never above `maxTotal` counted instances), and a drain (RUNNING with players) or stop of each instance in
 * `retire` that is still counted and of another revision. Every start is fenced by the group's
 * lease (the scheduler checks it before recording), and the intent is a level, not a list of
 * commands: carried out twice, or by the next owner after a failover, it does nothing more.
 */
import type { InstanceService } from "../domain/instances/instance-service.js";
import type { Logger } from "../logs/types.js";
import type { InstanceLifecycle } from "../scheduler/instance-lifecycle.js";
import { COUNTED_STATES } from "../scheduler/scaling.js";
import type { Clock, Timer } from "../shared/clock.js";
import type { DeploymentCollections, DeploymentIntent } from "./deployment-store.js";

/** A retirement asked for is not asked again for this long (the actor moves it out of the counted states first). */
export const retireRepeatMs = 10_000;
/** Starts of one group in one round, at most (the next round continues). */
export const startsPerRoundMax = 50;

export interface IntentExecutorOptions {
  collections: Pick<DeploymentCollections, "locks" | "progress">;
  instances: Pick<InstanceService, "findDocs">;
  lifecycle: InstanceLifecycle;
  isOwned(group: string): boolean;
  clock: Clock;
  logger: Logger;
  intervalMs: number;
}

export class IntentExecutor {
  private readonly retireAsked = new Map<string, number>();
  private timer: Timer | null = null;
  private running: Promise<void> | null = null;
  private stopped = false;

  constructor(private readonly options: IntentExecutorOptions) {}

  start(): void {
    const tick = () => {
      if (this.stopped) return;
      this.running = this.round()
        .catch((err: unknown) => this.options.logger.warn("Deployment intents: round failed; tried again next round", err))
        .finally(() => {
          if (!this.stopped) this.timer = this.options.clock.setTimeout(tick, this.options.intervalMs, { unref: true });
        });
    };
    tick();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.timer?.cancel();
    await this.running;
  }

  /** Carries out the intents of the active deployments of the groups this controller schedules. */
  async round(): Promise<void> {
    const { collections } = this.options;
    for (const lock of await collections.locks.find()) {
      if (this.stopped) return;
      if (!this.options.isOwned(lock.group)) continue;
      const progress = await collections.progress.get(`${lock.group}:${lock.revision}`);
      if (progress?.intent) await this.carryOut(lock.group, progress.intent);
    }
    const nowMs = this.options.clock.nowMs();
    for (const [id, atMs] of this.retireAsked) if (nowMs - atMs > retireRepeatMs) this.retireAsked.delete(id);
  }

  private async carryOut(group: string, intent: DeploymentIntent): Promise<void> {
    const { lifecycle, clock, logger } = this.options;
    const records = await this.options.instances.findDocs({ group });
    const nowMs = clock.nowMs();
    const retire = new Set(intent.retire);
    for (const record of records) {
      if (!retire.has(record.id) || record.deploymentRevision === intent.revision || !COUNTED_STATES.has(record.state)) continue;
      const askedMs = this.retireAsked.get(record.id);
      if (askedMs !== undefined && nowMs - askedMs < retireRepeatMs) continue;
      this.retireAsked.set(record.id, nowMs);
      // Players first: an instance with players drains (no new players, they move or the drain
      // times out) before it stops; one without players has nothing to drain.
      lifecycle.retireInstance(record.id, record.state === "RUNNING" && record.playerCount > 0 ? "DRAIN" : "STOP");
    }
    const counted = records.filter((r) => COUNTED_STATES.has(r.state) && !(retire.has(r.id) && r.deploymentRevision !== intent.revision));
    let total = counted.length;
    let fresh = counted.filter((r) => r.deploymentRevision === intent.revision).length;
    for (let i = 0; i < startsPerRoundMax && fresh < intent.wantNew && total < intent.maxTotal && this.options.isOwned(group); i++) {
      const started = await lifecycle.startInstanceOfRevision(group, intent.revision);
      if (!started.started) {
        logger.warn(`Deployment of ${group}: no instance of revision ${intent.revision} could start: ${started.reason}`);
        return;
      }
      fresh++;
      total++;
    }
  }
}
