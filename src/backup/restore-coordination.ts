/**
 * A restore on a cluster. The restoring controller puts the whole cluster into maintenance (a flag
 * in the shared key-value store), waits until no controller holds a scheduling scope, restores,
 * stops the processes the restored records do not know, then lifts the flag and raises the restore
 * generation. Every controller (the restoring one included) follows the flag: while it is up its
 * scheduler holds nothing (actors stopped, leases released; the processes keep running) and its
 * writes answer 503 RESTORE_IN_PROGRESS; when it is gone and the generation moved, the scheduler
 * reads the restored records and adopts again, and cached principals are dropped.
 *
 * Controllers learn of the flag from a message on a pub/sub channel of its own (fast) and by reading
 * the flag every `pollIntervalMs` (pub/sub delivers at most once). On the development profile the
 * same code runs over the in-memory store with one controller.
 *
 * The restoring controller holds the flag like a lock (kv-hold.ts): renewed every third of its TTL
 * with a compare-and-set of its exact value, and the work gets an AbortSignal that fires when the
 * flag is lost (a renewal finds it gone, or none is confirmed within the TTL: the other controllers
 * may be scheduling again). The restore then stops writing between two batches (503
 * RESTORE_INTERRUPTED; its journal finishes it at the next start, as after a crash).
 */
import type { Logger } from "../logs/types.js";
import { KvHold } from "../coordination/kv-hold.js";
import type { Clock, Timer } from "../shared/clock.js";
import { ApiError } from "../shared/errors.js";
import type { KvStore } from "../store/ports.js";

/** `cloud:v1:restore:maintenance`: {id, controllerId, startedAt} while a restore runs. */
export const RESTORE_MAINTENANCE_KEY = "cloud:v1:restore:maintenance";
/** `cloud:v1:restore:generation`: raised once per finished restore. */
export const RESTORE_GENERATION_KEY = "cloud:v1:restore:generation";
/** The channel announcing a change of the flag (the message is only a nudge to read it). */
export const RESTORE_CHANNEL = "cloud:v1:restore";
/** Prefix of the group scopes' lease keys: none may be held while the records are replaced. */
const SCOPE_LEASE_PREFIX = "cloud:v1:lease:group:";

/** How often every controller reads the flag. */
export const RESTORE_POLL_INTERVAL_MS = 1_000;
/** Expiry of the flag; the restoring controller renews it every third of it, so a dead one frees the cluster. */
export const RESTORE_MAINTENANCE_TTL_MS = 60_000;
/** How often the restoring controller looks for scope leases still held. */
const QUIET_POLL_INTERVAL_MS = 100;

/** The maintenance flag's value. */
export interface RestoreMaintenance {
  id: string;
  controllerId: string;
  startedAt: string;
}

export interface RestoreRunOptions {
  /** Finishing a restore an earlier process was killed in: its flag, when still up, is taken over. */
  finishing?: boolean;
}

/** What a controller does when the flag goes up and when it comes down. */
export interface RestoreHooks {
  /** Give up every scheduling scope and acquire none (the processes keep running). */
  pause(): Promise<void>;
  /** Read the records again and acquire scopes as at a start. */
  resume(): Promise<void>;
  /** Drop cached principals (restored users and token versions apply at once). */
  reloadAuth(): void;
}

export interface RestoreCoordinationDeps {
  kv: KvStore;
  controllerId: string;
  clock: Clock;
  logger: Logger;
  hooks: RestoreHooks;
  /** How long the restoring controller waits for every scope lease to be released (at least one lease TTL). */
  quietTimeoutMs: number;
  pollIntervalMs?: number;
  maintenanceTtlMs?: number;
}

/** See the module comment. */
export class RestoreCoordination {
  private maintenance: RestoreMaintenance | null = null;
  /** The restore this controller itself runs. */
  private own: RestoreMaintenance | null = null;
  private paused = false;
  private generation = 0;
  private timer: Timer | null = null;
  private unsubscribe: (() => Promise<void>) | null = null;
  /** Checks run one after another. */
  private checking: Promise<void> = Promise.resolve();
  private stopped = false;

  constructor(private readonly deps: RestoreCoordinationDeps) {}

  /** The restore holding the cluster in maintenance, or null. */
  current(): RestoreMaintenance | null {
    return this.own ?? this.maintenance;
  }

  /** Reads the flag and the generation once, then follows them. */
  async start(): Promise<void> {
    this.generation = Number(await this.deps.kv.get(RESTORE_GENERATION_KEY)) || 0;
    this.unsubscribe = await this.deps.kv.subscribe(RESTORE_CHANNEL, () => void this.check());
    this.timer = this.deps.clock.setInterval(() => void this.check(), this.deps.pollIntervalMs ?? RESTORE_POLL_INTERVAL_MS, { unref: true });
    await this.check();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.timer?.cancel();
    this.timer = null;
    await this.unsubscribe?.().catch(() => undefined);
    await this.checking;
  }

  /**
   * Runs `work` (the restore) with the cluster in maintenance; see the module comment. 409
   * RESTORE_IN_PROGRESS when another restore holds the cluster; 503 CLUSTER_NOT_QUIET when some
   * controller still holds a scheduling scope after `quietTimeoutMs` (nothing was changed then).
   */
  async run<T>(id: string, work: (signal: AbortSignal) => Promise<T>, options: RestoreRunOptions = {}): Promise<T> {
    const { kv, logger, clock } = this.deps;
    const flag: RestoreMaintenance = { id, controllerId: this.deps.controllerId, startedAt: new Date(clock.nowMs()).toISOString() };
    const value = JSON.stringify(flag);
    const ttlMs = this.deps.maintenanceTtlMs ?? RESTORE_MAINTENANCE_TTL_MS;
    const sentAtMs = clock.nowMs();
    if (!(await kv.setIfAbsent(RESTORE_MAINTENANCE_KEY, value, { ttlMs }))) {
      const stored = await kv.get(RESTORE_MAINTENANCE_KEY);
      const other = parseFlag(stored);
      // The interrupted restore's own flag (still up when its controller restarts within the TTL) is
      // taken over; another controller's live restore of the same backup never is.
      const ours = other?.id === id && other.controllerId === this.deps.controllerId;
      const takenOver = options.finishing === true && stored !== null && ours && (await kv.compareAndSet(RESTORE_MAINTENANCE_KEY, stored, value, { ttlMs }));
      if (!takenOver)
        throw new ApiError(409, "RESTORE_IN_PROGRESS", `A restore is in progress${other ? ` (backup ${other.id} on controller ${other.controllerId})` : ""}`);
    }
    this.own = flag;
    const hold = new KvHold({
      kv,
      key: RESTORE_MAINTENANCE_KEY,
      value,
      ttlMs,
      clock,
      sentAtMs,
      lostReason: (why) =>
        new ApiError(
          503,
          "RESTORE_INTERRUPTED",
          `The restore of backup ${id} stopped: its maintenance flag was lost (${why}); it is finished at the next start`,
        ),
    });
    let restored = false;
    try {
      logger.warn(`Cluster in maintenance for the restore of backup ${id}: schedulers pause, writes answer 503`);
      await this.announce();
      await this.enter(flag);
      await this.waitQuiet();
      hold.signal.throwIfAborted();
      const result = await work(hold.signal);
      restored = true;
      return result;
    } finally {
      hold.stop();
      if (restored) this.generation = await kv.increment(RESTORE_GENERATION_KEY);
      await kv
        .compareAndDelete(RESTORE_MAINTENANCE_KEY, value)
        .catch((err: unknown) => logger.warn("Lifting the restore maintenance flag failed; it expires", err));
      await this.announce();
      this.own = null;
      this.maintenance = null;
      await this.leave(restored ? "restored" : "restore abandoned");
    }
  }

  /** Reads the flag and the generation and follows them (serialized). */
  private check(): Promise<void> {
    this.checking = this.checking
      .then(() => this.checkOnce())
      .catch((err: unknown) => this.deps.logger.warn("Following the restore maintenance flag failed", err));
    return this.checking;
  }

  private async checkOnce(): Promise<void> {
    if (this.stopped || this.own) return;
    const flag = parseFlag(await this.deps.kv.get(RESTORE_MAINTENANCE_KEY));
    if (flag) {
      this.maintenance = flag;
      if (!this.paused) {
        this.deps.logger.warn(`Backup ${flag.id} is being restored by controller ${flag.controllerId}: scheduling pauses, writes answer 503`);
        await this.enter(flag);
      }
      return;
    }
    this.maintenance = null;
    const generation = Number(await this.deps.kv.get(RESTORE_GENERATION_KEY)) || 0;
    const moved = generation !== this.generation;
    this.generation = generation;
    if (this.paused) await this.leave("maintenance lifted");
    else if (moved) {
      // The whole restore passed between two reads: the records changed all the same.
      await this.enter(null);
      await this.leave("a restore finished meanwhile");
    }
  }

  private async enter(flag: RestoreMaintenance | null): Promise<void> {
    if (flag) this.maintenance = flag;
    this.paused = true;
    await this.deps.hooks.pause();
  }

  private async leave(why: string): Promise<void> {
    if (!this.paused) return;
    this.paused = false;
    this.deps.hooks.reloadAuth();
    await this.deps.hooks.resume();
    this.deps.logger.info(`Scheduling resumed from the stored records (${why})`);
  }

  private async announce(): Promise<void> {
    await this.deps.kv.publish(RESTORE_CHANNEL, "changed").catch((err: unknown) => this.deps.logger.warn("Announcing the restore maintenance failed", err));
  }

  /** Waits until no controller holds a group scope's lease. */
  private async waitQuiet(): Promise<void> {
    const deadlineMs = this.deps.clock.nowMs() + this.deps.quietTimeoutMs;
    for (;;) {
      const held = await this.deps.kv.keys(SCOPE_LEASE_PREFIX);
      if (held.length === 0) return;
      if (this.deps.clock.nowMs() >= deadlineMs) {
        throw new ApiError(
          503,
          "CLUSTER_NOT_QUIET",
          `${held.length} scheduling scopes are still held after ${this.deps.quietTimeoutMs} ms (for example ${held[0].slice(SCOPE_LEASE_PREFIX.length - "group:".length)}); nothing was restored`,
        );
      }
      await new Promise<void>((resolve) => this.deps.clock.setTimeout(resolve, QUIET_POLL_INTERVAL_MS));
    }
  }
}

function parseFlag(raw: string | null): RestoreMaintenance | null {
  if (!raw) return null;
  try {
    const flag = JSON.parse(raw) as Partial<RestoreMaintenance>;
    return typeof flag.id === "string" && typeof flag.controllerId === "string" && typeof flag.startedAt === "string" ? (flag as RestoreMaintenance) : null;
  } catch {
    return null;
  }
}
