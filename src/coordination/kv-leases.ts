/**
 * Leases with fencing tokens over the shared key-value store (spec document 2, "Lease key spaces").
 *
 * Keys: `cloud:v1:lease:<resource>` holds `<controllerId>|<token>` with an expiry of `leaseTtlMs`;
 * `cloud:v1:lease-token:<resource>` is the counter the tokens come from (never expires, never
 * deleted). Acquiring a free lease takes three steps:
 *
 *   1. claim:   SET NX PX  lease key = `<controllerId>|claim:<nonce>`   (nonce: random, per attempt)
 *   2. token:   INCR       token key → t
 *   3. grant:   compare-and-set lease key from the exact claim value to `<controllerId>|t`, PX again
 *
 * Why this order (and not INCR first, then SET NX with the token):
 *
 * - One holder at a time. The lease key is created only by SET NX, changed only by compare-and-set
 *   against the exact value just read or written by the same holder, and removed only by
 *   compare-and-delete of the exact value or by expiry. While the key exists nobody else can
 *   create it, so at any instant at most one controller is named in it.
 * - Tokens are never reused. Every token is a fresh INCR result; a counter never goes back (it has
 *   no expiry and nothing deletes it). A token whose grant fails is thrown away, leaving a gap.
 * - Tokens grow from holder to holder. The nonce makes the claim value unique, so a successful
 *   grant in step 3 proves the key held exactly this claim without interruption from step 1 to
 *   step 3 (once the key expires or is deleted, no later SET NX can write this value again). Step
 *   2 ran inside that interval, and the intervals of two holders never overlap, so a later
 *   holder's INCR ran after an earlier holder's INCR and returned a larger number. With INCR
 *   first this fails: a contender whose INCR is slow to be followed by its SET NX can obtain the
 *   lease after a holder with a larger token has come and gone, and daemons would refuse its
 *   commands as stale.
 *
 * Durability: the counter lives in the key-value store, which can lose it (a restart without
 * persistence, FLUSHALL, a failover to a replica that missed the last INCR). With a
 * {@link FencingHighWater} (the production profile), step 2 also records the token in the shared
 * document database and takes max(counter, recorded + 1), so the tokens still increase from holder
 * to holder: the argument above holds with "the recorded mark" for "the counter" (it is a
 * compare-and-set inside the same claim interval). See fencing-high-water.ts.
 *
 * For one round trip a claimed key holds `<controllerId>|claim:<nonce>` instead of a token; every
 * reader treats it as held by that controller. A claim left behind by an interrupted acquire of
 * this controller is completed (steps 2 and 3) by the next acquire; the argument above holds for it
 * unchanged because the grant still compares against the exact claim value.
 *
 * Calls for one resource on one instance run one after another, so two acquires of the same
 * controller never interleave their steps.
 */
import { randomBytes } from "node:crypto";
import { assert } from "../shared/errors.js";
import type { MetricsService } from "../metrics/metrics.js";
import type { KvStore } from "../store/ports.js";
import type { FencingHighWater } from "./fencing-high-water.js";
import { leaseKey, leaseTokenKey } from "./keys.js";
import { isValidControllerId, LeaseLostError, type Lease, type LeaseHolder, type Leases } from "./lease.js";

/** The lease counters of the metrics service (spec: cloud_coordination_lease_*_total). */
export type LeaseMetrics = Pick<MetricsService, "leaseAcquisitions" | "leaseRenewals" | "leaseContentions">;

/** Options of {@link KvLeases}. */
export interface KvLeasesOptions {
  kv: KvStore;
  /** This controller's id; it must not contain `|`. */
  controllerId: string;
  /** Expiry of a lease after each acquire or renewal: 2 × scheduler.evaluationIntervalSeconds. */
  leaseTtlMs: number;
  metrics?: LeaseMetrics;
  /** Source of claim nonces; tests may pass a seeded one. Default: 6 random bytes as hex. */
  nonce?: () => string;
  /** Where every granted token is recorded durably, so tokens never go back when the store loses its counter. */
  highWater?: FencingHighWater;
}

/**
 * Reads of a held lease before giving up: a renewal that finds the key changed between its read
 * and its write reads once more (the key may have just expired and be free again).
 */
const ACQUIRE_READS_MAX = 2;

const CLAIM_MARKER = "claim:";

const noMetrics: LeaseMetrics = {
  leaseAcquisitions: { inc: () => undefined },
  leaseRenewals: { inc: () => undefined },
  leaseContentions: { inc: () => undefined },
};

/** A stored lease value, parsed. */
type StoredLease =
  { kind: "granted"; controllerId: string; fencingToken: number } | { kind: "claim"; controllerId: string } | { kind: "unknown"; controllerId: string };

/** `<controllerId>|<token>`, the stored form of a granted lease. */
export function formatLeaseValue(controllerId: string, fencingToken: number): string {
  return `${controllerId}|${fencingToken}`;
}

function parseLeaseValue(value: string): StoredLease {
  const bar = value.indexOf("|");
  if (bar < 0) return { kind: "unknown", controllerId: value };
  const controllerId = value.slice(0, bar);
  const rest = value.slice(bar + 1);
  if (/^[1-9][0-9]*$/.test(rest) && Number.isSafeInteger(Number(rest))) {
    return { kind: "granted", controllerId, fencingToken: Number(rest) };
  }
  if (rest.startsWith(CLAIM_MARKER)) return { kind: "claim", controllerId };
  return { kind: "unknown", controllerId };
}

function holderOf(stored: StoredLease): LeaseHolder {
  return { controllerId: stored.controllerId, fencingToken: stored.kind === "granted" ? stored.fencingToken : null };
}

/** Leases over a {@link KvStore} (Redis in production); see the file comment for the protocol. */
export class KvLeases implements Leases {
  readonly controllerId: string;
  private readonly kv: KvStore;
  private readonly leaseTtlMs: number;
  private readonly metrics: LeaseMetrics;
  private readonly nonce: () => string;
  private readonly highWater: FencingHighWater | null;
  private readonly queues = new Map<string, Promise<unknown>>();

  constructor(options: KvLeasesOptions) {
    assert(isValidControllerId(options.controllerId), `controller id must be non-empty and without "|": ${options.controllerId}`);
    assert(Number.isSafeInteger(options.leaseTtlMs) && options.leaseTtlMs > 0, "leaseTtlMs must be a positive integer");
    this.kv = options.kv;
    this.controllerId = options.controllerId;
    this.leaseTtlMs = options.leaseTtlMs;
    this.metrics = options.metrics ?? noMetrics;
    this.nonce = options.nonce ?? (() => randomBytes(6).toString("hex"));
    this.highWater = options.highWater ?? null;
  }

  acquire(resource: string): Promise<Lease | null> {
    return this.oneAtATime(resource, () => this.acquireNow(resource));
  }

  async owns(resource: string): Promise<boolean> {
    const stored = await this.kv.get(leaseKey(resource));
    if (stored === null) return false;
    const parsed = parseLeaseValue(stored);
    return parsed.kind === "granted" && parsed.controllerId === this.controllerId;
  }

  /** The stored holder, or null when the lease is free. Reads only. */
  async holder(resource: string): Promise<LeaseHolder | null> {
    const stored = await this.kv.get(leaseKey(resource));
    return stored === null ? null : holderOf(parseLeaseValue(stored));
  }

  async ensureCurrent(lease: Lease): Promise<void> {
    const stored = await this.kv.get(leaseKey(lease.resource));
    if (stored === formatLeaseValue(lease.controllerId, lease.fencingToken)) return;
    throw new LeaseLostError(lease.resource, lease, stored === null ? null : holderOf(parseLeaseValue(stored)));
  }

  release(lease: Lease): Promise<boolean> {
    return this.kv.compareAndDelete(leaseKey(lease.resource), formatLeaseValue(lease.controllerId, lease.fencingToken));
  }

  private async acquireNow(resource: string): Promise<Lease | null> {
    const key = leaseKey(resource);
    for (let read = 0; read < ACQUIRE_READS_MAX; read++) {
      const stored = await this.kv.get(key);
      if (stored === null) return this.claimAndGrant(resource);
      const parsed = parseLeaseValue(stored);
      if (parsed.controllerId !== this.controllerId) return null;
      if (parsed.kind === "claim") return this.grant(resource, stored);
      if (parsed.kind === "unknown") return null;
      if (await this.kv.compareAndSet(key, stored, stored, { ttlMs: this.leaseTtlMs })) {
        this.metrics.leaseRenewals.inc();
        return { resource, controllerId: this.controllerId, fencingToken: parsed.fencingToken };
      }
    }
    return null;
  }

  private async claimAndGrant(resource: string): Promise<Lease | null> {
    const claim = `${this.controllerId}|${CLAIM_MARKER}${this.nonce()}`;
    if (!(await this.kv.setIfAbsent(leaseKey(resource), claim, { ttlMs: this.leaseTtlMs }))) {
      this.metrics.leaseContentions.inc();
      return null;
    }
    return this.grant(resource, claim);
  }

  private async grant(resource: string, claim: string): Promise<Lease | null> {
    const counted = await this.kv.increment(leaseTokenKey(resource));
    assert(Number.isSafeInteger(counted) && counted >= 1, `fencing token counter of ${resource} returned ${counted}`);
    const fencingToken = this.highWater ? await this.highWater.next(resource, counted) : counted;
    const value = formatLeaseValue(this.controllerId, fencingToken);
    if (!(await this.kv.compareAndSet(leaseKey(resource), claim, value, { ttlMs: this.leaseTtlMs }))) {
      this.metrics.leaseContentions.inc(); // the claim expired before the grant: the token is discarded
      return null;
    }
    this.metrics.leaseAcquisitions.inc();
    return { resource, controllerId: this.controllerId, fencingToken };
  }

  /** Runs calls for one resource one after another; the queue entry goes away when idle. */
  private oneAtATime<T>(resource: string, run: () => Promise<T>): Promise<T> {
    const previous = this.queues.get(resource) ?? Promise.resolve();
    const result = previous.then(run);
    const settled = result.then(
      () => undefined,
      () => undefined,
    );
    this.queues.set(resource, settled);
    void settled.then(() => {
      if (this.queues.get(resource) === settled) this.queues.delete(resource);
    });
    return result;
  }
}
