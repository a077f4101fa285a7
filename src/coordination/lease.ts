/**
 * The lease port (spec document 2, "Lease key spaces"): per-scope leases with fencing tokens that
 * partition mutating work between controllers. {@link KvLeases} implements it over the shared
 * key-value store; {@link AlwaysOwnedLeases} is the development variant where one controller owns
 * every scope.
 */

/** A held lease. The fencing token travels with every command sent on behalf of the scope. */
export interface Lease {
  readonly resource: string;
  readonly controllerId: string;
  readonly fencingToken: number;
}

/** The three collaborator operations on leases, plus release. */
export interface Leases {
  /** The controller these leases are taken for. */
  readonly controllerId: string;
  /**
   * Acquires the lease, or renews it when this controller already holds it (same token, fresh
   * expiry). Null when another controller holds it or won the race for it.
   */
  acquire(resource: string): Promise<Lease | null>;
  /** Fast pre-check: true when the stored holder is this controller. Reads only; never renews. */
  owns(resource: string): Promise<boolean>;
  /**
   * Fencing recheck before a mutation: resolves when the stored lease still names this lease's
   * holder and token, throws {@link LeaseLostError} otherwise (the caller writes nothing).
   */
  ensureCurrent(lease: Lease): Promise<void>;
  /** Gives the lease up when it is still this one; true when it was released. */
  release(lease: Lease): Promise<boolean>;
}

/** The stored holder of a lease, read without side effects (diagnostics, tests). */
export interface LeaseHolder {
  readonly controllerId: string;
  /** Null while the holder is between claiming the key and being granted a token. */
  readonly fencingToken: number | null;
}

/**
 * The stored lease no longer names the expected holder and token: another controller took over,
 * or the lease expired. Expected during failover; the caller aborts its mutation.
 */
export class LeaseLostError extends Error {
  readonly code = "LEASE_LOST";
  constructor(
    readonly resource: string,
    readonly expected: Lease,
    readonly found: LeaseHolder | null,
  ) {
    super(
      `Lease on ${resource} lost: expected ${expected.controllerId} with token ${expected.fencingToken}, found ` +
        (found ? `${found.controllerId} with token ${found.fencingToken ?? "(claim in progress)"}` : "no holder"),
    );
    this.name = "LeaseLostError";
  }
}

/** True when `a` and `b` are the same grant (same resource, holder and token). */
export function sameLease(a: Lease, b: Lease): boolean {
  return a.resource === b.resource && a.controllerId === b.controllerId && a.fencingToken === b.fencingToken;
}

/** Controller ids end at the first `|` of a stored lease value, so they cannot contain one. */
export function isValidControllerId(controllerId: string): boolean {
  return controllerId.length > 0 && !controllerId.includes("|");
}
