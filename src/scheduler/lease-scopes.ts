/**
 * Per-group scopes held by key-value leases (`cloud:v1:lease:group:<name>`): the production
 * profile's {@link ScopeOwnership}. A {@link LeaseKeeper} tries to hold the lease of every known
 * group; the controller that holds a group's lease runs that group's actors, stamps its daemon
 * commands with the lease's fencing token and checks the lease before each write.
 *
 * With a {@link ScopePresence} (the production profile) the keeper takes only its fair share of the
 * groups among the live controllers and hands one over now and then to a controller that joined
 * (src/coordination/fair-share.ts); once this controller's id is taken over by another process it
 * drops every scope and releases nothing.
 */
import { LeaseLostError, type LeaseHolder, type Leases } from "../coordination/lease.js";
import { LeaseKeeper } from "../coordination/lease-keeper.js";
import type { Logger } from "../logs/types.js";
import type { Clock } from "../shared/clock.js";
import { groupScope, ScopeLostError, type ScopeListener, type ScopeOwnership } from "./scopes.js";

/** The live controllers, from the presence registry (src/coordination/controller-presence.ts). */
export interface ScopePresence {
  /** Ids of the live controllers that take scopes; throws when the registry cannot be read. */
  liveControllers(): Promise<string[]>;
  /** True once another process took this controller's id over. */
  lost(): boolean;
}

export interface LeaseScopeOptions {
  leases: Leases & { holder(resource: string): Promise<LeaseHolder | null> };
  /** 2 × scheduler.evaluationIntervalSeconds. */
  leaseTtlMs: number;
  clock: Clock;
  logger: Logger;
  /** Fair share among the live controllers; without it every free group is taken. */
  presence?: ScopePresence;
}

/** Scopes owned through per-group key-value leases. */
export class LeaseScopeOwnership implements ScopeOwnership {
  private readonly groups = new Set<string>();
  private keeper: LeaseKeeper | null = null;

  constructor(private readonly options: LeaseScopeOptions) {}

  scopeOf(group: string): string {
    return groupScope(group);
  }

  async start(listener: ScopeListener): Promise<void> {
    const { presence, leases } = this.options;
    this.keeper = new LeaseKeeper({
      leases: this.options.leases,
      resources: () => [...this.groups].map(groupScope),
      leaseTtlMs: this.options.leaseTtlMs,
      clock: this.options.clock,
      logger: this.options.logger,
      onAcquired: (resource, lease) => listener.acquired(resource, lease.fencingToken),
      onLost: (resource) => listener.lost(resource),
      share: presence && {
        liveControllers: () => presence.liveControllers(),
        holder: (resource) => leases.holder(resource),
        standDown: () => presence.lost(),
      },
    });
    this.keeper.start();
  }

  track(group: string): void {
    this.groups.add(group);
  }

  untrack(group: string): void {
    this.groups.delete(group);
  }

  async holderFencingToken(scope: string): Promise<number | null> {
    return (await this.options.leases.holder(scope))?.fencingToken ?? null;
  }

  async ensureCurrent(scope: string, fencingToken: number): Promise<void> {
    const lease = this.keeper?.lease(scope);
    if (!lease || lease.fencingToken !== fencingToken) throw new ScopeLostError(scope);
    try {
      await this.keeper!.ensureCurrent(lease);
    } catch (err) {
      if (err instanceof LeaseLostError) throw new ScopeLostError(scope);
      throw err;
    }
  }

  /**
   * Releases every lease, so another controller takes the groups over at once; not when this
   * controller's id was taken over (the stored leases then name the other process).
   */
  async stop(): Promise<void> {
    await this.keeper?.stop({ release: this.options.presence?.lost() !== true });
  }
}
