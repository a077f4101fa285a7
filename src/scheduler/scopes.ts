/**
 * Scope ownership: which groups this controller schedules, and the fencing token its daemon
 * commands carry. The scheduler host only talks to this interface, so the development profile (one
 * scope that every controller owns) and per-group leases in the key-value store are interchangeable.
 */

/** Callbacks of a {@link ScopeOwnership}. */
export interface ScopeListener {
  /** The scope is ours with `fencingToken` (again, after a renewal with a new token). */
  acquired(scope: string, fencingToken: number): void;
  /** The scope is no longer ours: stop acting on it at once. */
  lost(scope: string): void;
}

/** Thrown by {@link ScopeOwnership.ensureCurrent} when the scope moved: the mutation must not happen. */
export class ScopeLostError extends Error {
  readonly code = "LEASE_LOST";
  constructor(readonly scope: string) {
    super(`Scope ${scope} is no longer owned by this controller`);
    this.name = "ScopeLostError";
  }
}

/** Which scopes this controller owns. */
export interface ScopeOwnership {
  /** The scope a group belongs to. */
  scopeOf(group: string): string;
  /** Starts reporting acquisitions and losses to `listener`. */
  start(listener: ScopeListener): Promise<void>;
  /** A group exists (created, or found at start): its scope may now be acquired. */
  track(group: string): void;
  /** A group is gone: its scope no longer needs an owner. */
  untrack(group: string): void;
  /**
   * The fencing token of whoever holds `scope` now (this controller or another), or null when
   * nobody does. Operator actions reaching a controller that does not schedule the group stamp
   * their daemon command with it, so the daemon accepts them as the holder's.
   */
  holderFencingToken(scope: string): Promise<number | null>;
  /** Fencing check before a write: resolves when `scope` is still ours with `fencingToken`, else throws {@link ScopeLostError}. */
  ensureCurrent(scope: string, fencingToken: number): Promise<void>;
  stop(): Promise<void>;
}

/** The scope of a group: one per group, whoever owns it. */
export const groupScope = (group: string) => `group:${group}`;
/** The fencing token of the development profile's scopes (one controller: no other epoch exists). */
export const LOCAL_SCOPE_TOKEN = 1;

/**
 * The development profile: one controller owns the scope of every group, at once and for good,
 * with the constant token 1, so every group is scheduled here and no check can fail. Scopes are
 * per group as with leases, so a supervisor's children stay bounded by one group's size.
 */
export class LocalScopeOwnership implements ScopeOwnership {
  private readonly groups = new Set<string>();
  private listener: ScopeListener | null = null;

  scopeOf(group: string): string {
    return groupScope(group);
  }

  async start(listener: ScopeListener): Promise<void> {
    this.listener = listener;
    for (const group of this.groups) listener.acquired(groupScope(group), LOCAL_SCOPE_TOKEN);
  }

  track(group: string): void {
    if (this.groups.has(group)) return;
    this.groups.add(group);
    this.listener?.acquired(groupScope(group), LOCAL_SCOPE_TOKEN);
  }

  untrack(group: string): void {
    if (this.groups.delete(group)) this.listener?.lost(groupScope(group));
  }

  async holderFencingToken(): Promise<number | null> {
    return LOCAL_SCOPE_TOKEN;
  }

  async ensureCurrent(): Promise<void> {}

  async stop(): Promise<void> {
    this.listener = null;
  }
}
