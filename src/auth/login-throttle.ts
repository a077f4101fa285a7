/**
 * Login back-off per account and per client address, kept in the shared key-value store so that
 * every controller sees the same streaks (Redis in production, the in-process store in development).
 *
 * Each key holds a streak `{attempts, blockedUntilMs}`. An attempt is admitted only when the key is
 * not blocked, and admitting it counts it and blocks the key for the delay its failure would earn,
 * in one compare-and-set: so a burst of parallel guesses gets no more through than a sequence, and a
 * controller never checks a password before the attempt is on record. A successful login deletes
 * the account's streak and gives the address back the attempt it was charged; a failure leaves both
 * as admitted. A streak is forgotten {@link LoginBackoffPolicy.forgetAfterMs} after its block ends.
 *
 * Whether the account exists plays no part: an unknown username is throttled exactly like a known
 * one, so the answers tell nothing about which accounts exist.
 */
import { createHash } from "node:crypto";
import { loginAccountKey, loginAddressKey } from "../coordination/keys.js";
import type { Clock } from "../shared/clock.js";
import type { KvStore } from "../store/ports.js";

/** How one key backs off. */
export interface LoginBackoffPolicy {
  /** Failures in a row that cost nothing. */
  freeFailures: number;
  /** Block after the first failure beyond the free ones; each further failure doubles it. */
  firstDelayMs: number;
  /** The block never grows beyond this. */
  delayMaxMs: number;
  /** A streak is forgotten this long after its block ends (or after its last attempt). */
  forgetAfterMs: number;
}

const SECOND_MS = 1000;
const MINUTE_MS = 60 * SECOND_MS;

/**
 * Per account: five mistakes go unnoticed, then 1 s, 2 s, 4 s ... up to 15 min between attempts.
 * A guesser at the cap gets about 100 tries a day on one account.
 */
export const LOGIN_ACCOUNT_POLICY: LoginBackoffPolicy = { freeFailures: 5, firstDelayMs: SECOND_MS, delayMaxMs: 15 * MINUTE_MS, forgetAfterMs: 60 * MINUTE_MS };

/**
 * Per client address: more free failures, because several operators may share one address (a NAT,
 * a bastion host); it stops one address from trying a few passwords on each of many accounts.
 */
export const LOGIN_ADDRESS_POLICY: LoginBackoffPolicy = {
  freeFailures: 20,
  firstDelayMs: SECOND_MS,
  delayMaxMs: 15 * MINUTE_MS,
  forgetAfterMs: 60 * MINUTE_MS,
};

/**
 * Compare-and-set rounds for one key before giving up. Rounds only repeat when another attempt on
 * the same key wrote in between; giving up refuses the attempt for a second.
 */
export const LOGIN_THROTTLE_WRITE_ROUNDS_MAX = 8;
const CONTENDED_RETRY_MS = SECOND_MS;

/** Outcome of {@link LoginThrottle.admit}. */
export type LoginAdmission = { admitted: true } | { admitted: false; retryAfterMs: number };

interface Streak {
  attempts: number;
  blockedUntilMs: number;
}

/** Block a key earns when its `attempts`-th attempt in a row fails. */
export function loginDelayMs(policy: LoginBackoffPolicy, attempts: number): number {
  const beyond = attempts - policy.freeFailures;
  if (beyond <= 0) return 0;
  // The exponent is capped so that a long streak cannot overflow to Infinity before the cap applies.
  return Math.min(policy.delayMaxMs, policy.firstDelayMs * 2 ** Math.min(beyond - 1, 40));
}

function parseStreak(raw: string | null): Streak | null {
  if (raw === null) return null;
  try {
    const value = JSON.parse(raw) as Partial<Streak>;
    if (Number.isSafeInteger(value.attempts) && Number.isFinite(value.blockedUntilMs))
      return { attempts: value.attempts!, blockedUntilMs: value.blockedUntilMs! };
  } catch {
    // Another format: treated as no streak, and overwritten.
  }
  return null;
}

/** Options of {@link LoginThrottle}. */
export interface LoginThrottleOptions {
  kv: KvStore;
  clock: Clock;
  account?: LoginBackoffPolicy;
  address?: LoginBackoffPolicy;
}

/** Login back-off per account and per address over a {@link KvStore}. */
export class LoginThrottle {
  private readonly account: LoginBackoffPolicy;
  private readonly address: LoginBackoffPolicy;

  constructor(private readonly options: LoginThrottleOptions) {
    this.account = options.account ?? LOGIN_ACCOUNT_POLICY;
    this.address = options.address ?? LOGIN_ADDRESS_POLICY;
  }

  /**
   * Call before checking a password: admitted (and counted) or refused with the wait. The address
   * is asked first; an attempt on a blocked account still counts against its address.
   */
  async admit(username: string, address: string): Promise<LoginAdmission> {
    const byAddress = await this.admitKey(loginAddressKey(address), this.address);
    if (!byAddress.admitted) return byAddress;
    return await this.admitKey(accountKeyOf(username), this.account);
  }

  /** Call after a successful login: the account starts afresh and the address is charged nothing. */
  async succeeded(username: string, address: string): Promise<void> {
    await this.options.kv.delete(accountKeyOf(username));
    await this.refund(loginAddressKey(address));
  }

  private async admitKey(key: string, policy: LoginBackoffPolicy): Promise<LoginAdmission> {
    const { kv, clock } = this.options;
    for (let round = 0; round < LOGIN_THROTTLE_WRITE_ROUNDS_MAX; round++) {
      const raw = await kv.get(key);
      const current = parseStreak(raw);
      const nowMs = clock.nowMs();
      if (current && current.blockedUntilMs > nowMs) return { admitted: false, retryAfterMs: current.blockedUntilMs - nowMs };
      const attempts = (current?.attempts ?? 0) + 1;
      const delayMs = loginDelayMs(policy, attempts);
      const next = JSON.stringify({ attempts, blockedUntilMs: nowMs + delayMs } satisfies Streak);
      const ttlMs = delayMs + policy.forgetAfterMs;
      const written = raw === null ? await kv.setIfAbsent(key, next, { ttlMs }) : await kv.compareAndSet(key, raw, next, { ttlMs });
      if (written) return { admitted: true };
    }
    return { admitted: false, retryAfterMs: CONTENDED_RETRY_MS };
  }

  private async refund(key: string): Promise<void> {
    const { kv, clock } = this.options;
    for (let round = 0; round < LOGIN_THROTTLE_WRITE_ROUNDS_MAX; round++) {
      const raw = await kv.get(key);
      const current = parseStreak(raw);
      if (raw === null || current === null) return;
      if (current.attempts <= 1) {
        if (await kv.compareAndDelete(key, raw)) return;
        continue;
      }
      const next = JSON.stringify({ attempts: current.attempts - 1, blockedUntilMs: current.blockedUntilMs } satisfies Streak);
      const ttlMs = Math.max(0, current.blockedUntilMs - clock.nowMs()) + this.address.forgetAfterMs;
      if (await kv.compareAndSet(key, raw, next, { ttlMs })) return;
    }
    // Contended: the address keeps one attempt too many until the streak is forgotten.
  }
}

/** The account key holds a digest, so a 1,024-character username makes a short key. */
function accountKeyOf(username: string): string {
  return loginAccountKey(createHash("sha256").update(username, "utf8").digest("hex"));
}
