/**
 * The development variant of {@link Leases} (spec document 2: with no key-value store configured
 * "every controller owns every group"). Nothing is stored and no metric is recorded (the spec's
 * lease counters are non-zero only with key-value-backed coordination).
 *
 * Every lease carries {@link DEVELOPMENT_FENCING_TOKEN}. A constant token survives a controller
 * restart: daemons keep the highest token per group across reconnects and refuse a lower one, so
 * a counter that starts again from 1 in a fresh in-memory store would make a restarted development
 * controller's commands stale. Tokens of key-value leases start at 1, above this one, so a daemon
 * moved from a development controller to a production cluster accepts the cluster's tokens.
 */
import { assert } from "../shared/errors.js";
import { isValidControllerId, LeaseLostError, type Lease, type Leases } from "./lease.js";

/** The fencing token of every development lease; below every key-value token (they start at 1). */
export const DEVELOPMENT_FENCING_TOKEN = 0;

/** Leases that are always held by this controller (development profile, one controller). */
export class AlwaysOwnedLeases implements Leases {
  constructor(readonly controllerId: string) {
    assert(isValidControllerId(controllerId), `controller id must be non-empty and without "|": ${controllerId}`);
  }

  async acquire(resource: string): Promise<Lease> {
    return { resource, controllerId: this.controllerId, fencingToken: DEVELOPMENT_FENCING_TOKEN };
  }

  async owns(_resource: string): Promise<boolean> {
    return true;
  }

  /** Throws only for a lease that this object cannot have granted (another holder or token). */
  async ensureCurrent(lease: Lease): Promise<void> {
    if (lease.controllerId === this.controllerId && lease.fencingToken === DEVELOPMENT_FENCING_TOKEN) return;
    throw new LeaseLostError(lease.resource, lease, { controllerId: this.controllerId, fencingToken: DEVELOPMENT_FENCING_TOKEN });
  }

  async release(_lease: Lease): Promise<boolean> {
    return true;
  }
}
