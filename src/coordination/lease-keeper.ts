/**
 * Keeps this controller's leases: every tick it renews the leases it holds and tries to acquire the
 * free ones among the wanted resources (for example `group:<name>` for every group), and tells its
 * owner through two callbacks: `onAcquired(resource, lease)` when a lease is granted (again) and
 * `onLost(resource)` when it must stop acting on the resource.
 *
 * `onLost` fires as soon as a renewal is refused (another holder, or a new token), when
 * {@link LeaseKeeper.ensureCurrent} finds the lease moved, when the resource is no longer wanted,
 * and at the latest at the local deadline `sent + leaseTtlMs - safetyMarginMs`, where `sent` is the
 * time the last confirmed acquire or renewal request was sent. The key-value store starts the TTL
 * when it receives the request, after `sent`, so the lease cannot have expired in the store
 * before the deadline; the margin absorbs timer lateness and clock-rate differences. A renewal
 * that cannot be confirmed by then (store unreachable, request hanging) therefore ends in
 * `onLost`, before any other controller can have acquired the lease.
 *
 * With a {@link KeeperShare} the keeper takes only its fair share of the free resources among the
 * live controllers and gives one lease up now and then when another controller holds too few
 * (fair-share.ts); when the live controllers cannot be read, it takes every free resource.
 */
import { systemClock, type Clock, type Timer } from "../shared/clock.js";
import { assert } from "../shared/errors.js";
import type { Logger } from "../logs/types.js";
import { FairShare } from "./fair-share.js";
import { LeaseLostError, sameLease, type Lease, type LeaseHolder, type Leases } from "./lease.js";

/** Resources acquired, renewed or released per tick; bounds one tick's work and the leases held. */
export const KEEPER_RESOURCES_PER_TICK_MAX = 1_000;
/** Lease requests of one tick in flight at once. */
export const KEEPER_REQUESTS_IN_FLIGHT_MAX = 16;

/** What a keeper needs to take only its fair share (fair-share.ts). */
export interface KeeperShare {
  /** The live controllers that take these resources (this one may be left out); throws when they cannot be read. */
  liveControllers(): Promise<Iterable<string>>;
  /** The stored holder of a resource, or null when it is free; reads only. */
  holder(resource: string): Promise<LeaseHolder | null>;
  /**
   * True once this keeper must hold nothing (its controller id was taken over by another process):
   * it forgets every lease without releasing it (the store names the other process now).
   */
  standDown?(): boolean;
}

/** Options of {@link LeaseKeeper}. */
export interface LeaseKeeperOptions {
  leases: Leases;
  /** The resources to hold when possible; read once per tick. */
  resources: () => readonly string[] | Promise<readonly string[]>;
  /** Expiry the leases are written with (2 × scheduler.evaluationIntervalSeconds). */
  leaseTtlMs: number;
  /** Time between ticks. Default: a third of the TTL, so two renewals are tried before the deadline. */
  renewIntervalMs?: number;
  /** How long before the TTL the keeper gives a lease up locally. Default: a sixth of the TTL. */
  safetyMarginMs?: number;
  resourcesPerTickMax?: number;
  requestsInFlightMax?: number;
  onAcquired: (resource: string, lease: Lease) => void;
  onLost: (resource: string) => void;
  /** Take only a fair share of the free resources; without it every free resource is tried. */
  share?: KeeperShare;
  /** Time and timers (unref'd: a pending lease timer alone does not keep the process alive). */
  clock?: Clock;
  logger?: Logger;
}

interface HeldLease {
  lease: Lease;
  /** The local deadline: the lease is given up when it has not been renewed by then. */
  validUntilMs: number;
  deadlineTimer: Timer | undefined;
}

const silentLogger: Logger = {
  name: "cloud.coordination.lease-keeper",
  trace: () => undefined,
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
};

/** Acquires and renews leases on a timer and reports gains and losses. */
export class LeaseKeeper {
  private readonly leases: Leases;
  private readonly clock: Clock;
  private readonly logger: Logger;
  private readonly leaseTtlMs: number;
  private readonly renewIntervalMs: number;
  private readonly safetyMarginMs: number;
  private readonly resourcesPerTickMax: number;
  private readonly requestsInFlightMax: number;
  private readonly held = new Map<string, HeldLease>();
  private tickTimer: Timer | undefined;
  private tickInFlight: Promise<void> | undefined;
  private started = false;
  private stopped = false;
  private releaseOnStop = true;
  private freeCursor = 0;
  private readonly fairShare = new FairShare();

  constructor(private readonly options: LeaseKeeperOptions) {
    this.leases = options.leases;
    this.clock = options.clock ?? systemClock;
    this.logger = options.logger ?? silentLogger;
    this.leaseTtlMs = options.leaseTtlMs;
    this.renewIntervalMs = options.renewIntervalMs ?? Math.floor(options.leaseTtlMs / 3);
    this.safetyMarginMs = options.safetyMarginMs ?? Math.floor(options.leaseTtlMs / 6);
    this.resourcesPerTickMax = options.resourcesPerTickMax ?? KEEPER_RESOURCES_PER_TICK_MAX;
    this.requestsInFlightMax = options.requestsInFlightMax ?? KEEPER_REQUESTS_IN_FLIGHT_MAX;
    assert(Number.isFinite(this.leaseTtlMs) && this.leaseTtlMs > 0, "leaseTtlMs must be positive");
    assert(this.renewIntervalMs > 0 && this.safetyMarginMs > 0, "renewIntervalMs and safetyMarginMs must be positive");
    assert(this.renewIntervalMs + this.safetyMarginMs < this.leaseTtlMs, "a renewal must be tried before the local deadline");
    assert(this.resourcesPerTickMax >= 1 && this.requestsInFlightMax >= 1, "per-tick bounds must be at least 1");
  }

  /** Starts ticking: the first tick runs at once, then one every `renewIntervalMs`. */
  start(): void {
    assert(!this.started, "lease keeper already started");
    this.started = true;
    this.scheduleTick(0);
  }

  /**
   * Stops ticking, waits for a tick in flight, then gives up every held lease: `onLost` first (the
   * owner stops acting), then the lease is released in the store so a peer can take it at once.
   * With `release: false` the leases are left to expire instead.
   */
  async stop(options: { release?: boolean } = {}): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.releaseOnStop = options.release !== false;
    this.tickTimer?.cancel();
    this.tickTimer = undefined;
    await this.tickInFlight;
    const leases = [...this.held.values()].map((held) => held.lease);
    for (const lease of leases) this.lose(lease.resource, "keeper stopped");
    if (!this.releaseOnStop) return;
    await Promise.all(
      leases.map(async (lease) => {
        try {
          await this.leases.release(lease);
        } catch (error) {
          this.logger.warn(`Releasing the lease on ${lease.resource} failed; it expires on its own`, error);
        }
      }),
    );
  }

  /** The lease held on `resource`, if any and not past its local deadline. */
  lease(resource: string): Lease | undefined {
    const held = this.held.get(resource);
    return held && this.clock.nowMs() < held.validUntilMs ? held.lease : undefined;
  }

  /** Resources whose lease this keeper holds. */
  heldResources(): string[] {
    return [...this.held.keys()];
  }

  /** Resolves when no tick is in flight. */
  async idle(): Promise<void> {
    await this.tickInFlight;
  }

  /**
   * The fencing recheck through the keeper: like {@link Leases.ensureCurrent}, and when the lease
   * moved, the keeper forgets it and fires `onLost` before the error reaches the caller.
   */
  async ensureCurrent(lease: Lease): Promise<void> {
    try {
      await this.leases.ensureCurrent(lease);
    } catch (error) {
      if (error instanceof LeaseLostError) {
        const held = this.held.get(lease.resource);
        if (held && sameLease(held.lease, lease)) this.lose(lease.resource, "lease moved");
      }
      throw error;
    }
  }

  /**
   * One pass: gives up leases of resources no longer wanted, renews held leases, then tries free
   * resources in rotation, at most `resourcesPerTickMax` of all three together. Renewals come
   * first, and an acquisition only uses what the renewals left, so the keeper never holds more
   * leases than it can renew in one tick. With a share, the free resources are read first and
   * only the plan's are tried (see {@link acquireShare}).
   */
  async tick(): Promise<void> {
    if (this.standsDown()) return;
    let wanted: readonly string[] | undefined;
    try {
      wanted = await this.options.resources();
    } catch (error) {
      this.logger.warn("Listing the resources to lease failed; renewing the held leases only", error);
    }
    let budget = this.resourcesPerTickMax;
    const wantedSet = wanted ? new Set(wanted) : undefined;
    const unwanted = wantedSet ? [...this.held.values()].filter((held) => !wantedSet.has(held.lease.resource)) : [];
    const releases = unwanted.slice(0, budget).map((held) => held.lease);
    budget -= releases.length;
    for (const lease of releases) this.lose(lease.resource, "resource no longer wanted");
    const renewals = [...this.held.keys()].slice(0, budget);
    budget -= renewals.length;
    await forEachBounded(releases, this.requestsInFlightMax, (lease) => this.releaseQuietly(lease));
    if (this.options.share && wanted) {
      await forEachBounded(renewals, this.requestsInFlightMax, (resource) => this.acquireOne(resource));
      await this.acquireShare(this.options.share, wanted, budget);
      return;
    }
    const acquisitions = wanted ? this.nextFree(wanted, budget) : [];
    await forEachBounded([...renewals, ...acquisitions], this.requestsInFlightMax, (resource) => this.acquireOne(resource));
  }

  /** Forgets every lease without releasing it once the share says so; true then. */
  private standsDown(): boolean {
    if (!this.options.share?.standDown?.()) return false;
    for (const resource of [...this.held.keys()]) this.lose(resource, "this controller's id was taken over by another process");
    return true;
  }

  /**
   * The fair-share part of a tick (after the renewals): reads the live controllers and the holders
   * of the resources not held here (in rotation, within what the renewals left of the budget),
   * takes what the plan says, and gives up the lease the plan names. When the live controllers
   * cannot be read, every free resource is tried, as without a share.
   */
  private async acquireShare(share: KeeperShare, wanted: readonly string[], budget: number): Promise<void> {
    let live: Set<string> | null = null;
    try {
      live = new Set(await share.liveControllers());
    } catch (error) {
      this.logger.warn("Reading the live controllers failed; trying every free resource this tick", error);
    }
    if (this.standsDown()) return;
    if (!live) {
      await forEachBounded(this.nextFree(wanted, budget), this.requestsInFlightMax, (resource) => this.acquireOne(resource));
      return;
    }
    const self = this.leases.controllerId;
    live.add(self);
    const unique = [...new Set(wanted)];
    const notHeld = unique.filter((resource) => !this.held.has(resource));
    const toRead = this.nextFree(unique, budget);
    const holders = new Map<string, string | null>();
    let complete = toRead.length === notHeld.length;
    await forEachBounded(toRead, this.requestsInFlightMax, async (resource) => {
      try {
        holders.set(resource, (await share.holder(resource))?.controllerId ?? null);
      } catch (error) {
        complete = false;
        this.logger.debug(`Reading the holder of ${resource} failed`, error);
      }
    });
    const held = new Set(unique.filter((resource) => this.held.has(resource)));
    const plan = this.fairShare.plan({ self, wanted: unique, held, live, holders, complete });
    let pending = 0;
    const attempts = [...plan.overdue.map((resource) => ({ resource, forced: true })), ...plan.candidates.map((resource) => ({ resource, forced: false }))];
    await forEachBounded(attempts, this.requestsInFlightMax, async ({ resource, forced }) => {
      if (forced) return void (await this.acquireOne(resource));
      if (this.held.size + pending >= plan.share) return;
      pending++;
      await this.acquireOne(resource);
      pending--;
    });
    const given = plan.release && this.held.get(plan.release.resource);
    if (!given || !plan.release) return;
    this.lose(plan.release.resource, plan.release.reason);
    await this.releaseQuietly(given.lease);
  }

  private nextFree(wanted: readonly string[], budget: number): string[] {
    const free = [...new Set(wanted)].filter((resource) => !this.held.has(resource));
    if (free.length <= budget) return free;
    const start = this.freeCursor % free.length;
    this.freeCursor = start + budget;
    return Array.from({ length: budget }, (_, i) => free[(start + i) % free.length]);
  }

  private async acquireOne(resource: string): Promise<void> {
    const sentAtMs = this.clock.nowMs();
    let lease: Lease | null;
    try {
      lease = await this.leases.acquire(resource);
    } catch (error) {
      this.logger.warn(`Acquiring or renewing the lease on ${resource} failed`, error);
      return; // the deadline timer gives the lease up if no renewal succeeds in time
    }
    const current = this.held.get(resource);
    if (lease === null) {
      if (current) this.lose(resource, "held by another controller");
      return;
    }
    const validUntilMs = sentAtMs + this.leaseTtlMs - this.safetyMarginMs;
    if (this.stopped || this.clock.nowMs() >= validUntilMs) {
      if (current) this.lose(resource, "renewal confirmed too late");
      if (this.stopped && this.releaseOnStop) await this.releaseQuietly(lease);
      return;
    }
    if (current && sameLease(current.lease, lease)) {
      if (validUntilMs > current.validUntilMs) this.armDeadline(current, validUntilMs);
      return;
    }
    if (current) this.lose(resource, `new fencing token ${lease.fencingToken}`);
    const held: HeldLease = { lease, validUntilMs, deadlineTimer: undefined };
    this.held.set(resource, held);
    this.armDeadline(held, validUntilMs);
    this.notify(() => this.options.onAcquired(resource, lease), "onAcquired", resource);
  }

  private armDeadline(held: HeldLease, validUntilMs: number): void {
    held.deadlineTimer?.cancel();
    held.validUntilMs = validUntilMs;
    held.deadlineTimer = this.clock.setTimeout(
      () => {
        held.deadlineTimer = undefined;
        if (this.held.get(held.lease.resource) === held) this.lose(held.lease.resource, "not renewed before the local deadline");
      },
      Math.max(0, validUntilMs - this.clock.nowMs()),
      { unref: true },
    );
  }

  private lose(resource: string, reason: string): void {
    const held = this.held.get(resource);
    if (!held) return;
    this.held.delete(resource);
    held.deadlineTimer?.cancel();
    this.logger.info(`Lease on ${resource} (token ${held.lease.fencingToken}) lost: ${reason}`);
    this.notify(() => this.options.onLost(resource), "onLost", resource);
  }

  private async releaseQuietly(lease: Lease): Promise<void> {
    try {
      await this.leases.release(lease);
    } catch (error) {
      this.logger.warn(`Releasing the lease on ${lease.resource} failed; it expires on its own`, error);
    }
  }

  private notify(callback: () => void, name: string, resource: string): void {
    try {
      callback();
    } catch (error) {
      this.logger.error(`Lease keeper ${name} callback for ${resource} threw`, error);
    }
  }

  private scheduleTick(delayMs: number): void {
    this.tickTimer = this.clock.setTimeout(
      () => {
        if (this.stopped) return;
        this.scheduleTick(this.renewIntervalMs);
        if (this.tickInFlight) {
          this.logger.warn("Lease keeper tick skipped: the previous tick is still running");
          return;
        }
        this.tickInFlight = this.tick()
          .catch((error: unknown) => this.logger.error("Lease keeper tick failed", error))
          .finally(() => {
            this.tickInFlight = undefined;
          });
      },
      delayMs,
      { unref: true },
    );
  }
}

/** Runs `work` over `items` with at most `concurrency` calls in flight; `work` must not throw. */
async function forEachBounded<T>(items: readonly T[], concurrency: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await work(items[next++]);
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, worker));
}
