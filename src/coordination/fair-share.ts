/**
 * The fair share of a {@link LeaseKeeper} among the live controllers: which free resources to take
 * in one tick and when to give one up for a controller that holds too few. Pure bookkeeping over
 * what the tick read; the keeper does the reads and the lease calls.
 *
 * - **Share** = ceil(wanted resources / live controllers taking scopes). A keeper takes a free
 *   resource while it holds fewer than its share, in its own order of preference (a hash of its id
 *   and the resource, so controllers that tick at the same moment mostly go for different ones).
 * - **Availability first**: a resource still free one tick after this keeper first saw it free is
 *   taken whatever the share, when every other live controller is at its share; two ticks after,
 *   when one is below it (that one ticked in between and did not take it: its presence is stale,
 *   or it cannot reach the store). A resource left free by the share rule is therefore owned again
 *   within three ticks of falling free, one lease TTL (ticks are a third of it apart).
 * - **Gentle rebalancing**: when a controller joins (or the groups shrink), a keeper that holds at
 *   least two more than the live controller holding fewest gives up one lease, at most one per
 *   tick, only with a complete view of the holders and while no wanted resource is free; that controller is below its share and
 *   takes it on its next tick. While a given-up lease is still free at this keeper's next tick,
 *   nobody wanted it: the keeper gives nothing up for {@link GIFT_BACKOFF_TICKS} ticks.
 */

/** Ticks without giving a lease up after one was left free (the controllers below their share did not take it). */
export const GIFT_BACKOFF_TICKS = 6;

/** What one tick read. */
export interface ShareView {
  /** This keeper's controller id. */
  readonly self: string;
  /** The wanted resources, without duplicates. */
  readonly wanted: readonly string[];
  /** The wanted resources this keeper holds, after this tick's renewals. */
  readonly held: ReadonlySet<string>;
  /** The live controllers that take resources, this one included. */
  readonly live: ReadonlySet<string>;
  /** Resources read this tick: the holder's controller id, or null when free. */
  readonly holders: ReadonlyMap<string, string | null>;
  /** Whether every wanted resource this keeper does not hold was read without error. */
  readonly complete: boolean;
}

/** What one tick does. */
export interface SharePlan {
  readonly share: number;
  /** Free resources to acquire whatever the share (free for long enough, or stored under this keeper's own id). */
  readonly overdue: readonly string[];
  /** Free resources to try, in order, while this keeper holds fewer than `share`. */
  readonly candidates: readonly string[];
  /** A held resource to give up for a controller below its share, with why; null for none. */
  readonly release: { resource: string; reason: string } | null;
}

/** 32-bit FNV-1a of `text`. */
function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash;
}

/** The cross-tick state of one keeper's fair share. */
export class FairShare {
  private tick = 0;
  /** Resource → the tick at which it was first seen free (and free at every read since). */
  private readonly freeSince = new Map<string, number>();
  private gift: { resource: string; tick: number } | null = null;
  private backoffUntilTick = 0;

  /** This keeper's preference for `resource` (lower first). */
  static preference(self: string, resource: string): number {
    return fnv1a(`${self}|${resource}`);
  }

  plan(view: ShareView): SharePlan {
    const tick = ++this.tick;
    const wanted = new Set(view.wanted);
    for (const resource of this.freeSince.keys()) if (!wanted.has(resource) || view.held.has(resource)) this.freeSince.delete(resource);
    const free: string[] = [];
    const own: string[] = [];
    const counts = new Map<string, number>();
    for (const id of view.live) if (id !== view.self) counts.set(id, 0);
    for (const [resource, holder] of view.holders) {
      if (!wanted.has(resource) || view.held.has(resource)) continue;
      if (holder === null) {
        free.push(resource);
        if (!this.freeSince.has(resource)) this.freeSince.set(resource, tick);
        continue;
      }
      this.freeSince.delete(resource);
      if (holder === view.self) own.push(resource);
      else if (counts.has(holder)) counts.set(holder, counts.get(holder)! + 1);
    }
    const share = Math.ceil(view.wanted.length / Math.max(1, view.live.size));
    this.settleGift(view, tick);
    const byPreference = (a: string, b: string) => FairShare.preference(view.self, a) - FairShare.preference(view.self, b) || (a < b ? -1 : 1);
    // A controller below its share gets one more tick to take a resource before this one steps in.
    const patienceTicks = [...counts.values()].some((count) => count < share) ? 2 : 1;
    const isOverdue = (resource: string) => tick - this.freeSince.get(resource)! >= patienceTicks;
    const overdue = [...own, ...free.filter(isOverdue)];
    const candidates = free.filter((resource) => !isOverdue(resource)).sort(byPreference);
    // Nothing is given up while a resource is free: whoever is below its share takes that one.
    const release = free.length === 0 && own.length === 0 ? this.chooseGift(view, counts, share, tick, byPreference) : null;
    return { share, overdue, candidates, release };
  }

  /** Follows the lease given up last: taken by another (done), or still free (nobody wanted it: back off). */
  private settleGift(view: ShareView, tick: number): void {
    if (!this.gift) return;
    const { resource } = this.gift;
    if (!view.wanted.includes(resource)) this.gift = null;
    else if (view.held.has(resource) || view.holders.get(resource) === null) {
      this.gift = null;
      this.backoffUntilTick = tick + GIFT_BACKOFF_TICKS;
    } else if (typeof view.holders.get(resource) === "string") this.gift = null;
  }

  private chooseGift(
    view: ShareView,
    counts: ReadonlyMap<string, number>,
    share: number,
    tick: number,
    byPreference: (a: string, b: string) => number,
  ): SharePlan["release"] {
    if (!view.complete || this.gift || tick < this.backoffUntilTick || counts.size === 0 || view.held.size === 0) return null;
    let fewest: [string, number] | null = null;
    for (const entry of counts) if (!fewest || entry[1] < fewest[1]) fewest = entry;
    if (!fewest || view.held.size < fewest[1] + 2) return null;
    const resource = [...view.held].sort(byPreference).at(-1)!;
    this.gift = { resource, tick };
    return {
      resource,
      reason: `rebalanced: this controller held ${view.held.size} (share ${share} of ${view.wanted.length} over ${view.live.size} controllers), ${fewest[0]} held ${fewest[1]}`,
    };
  }
}
