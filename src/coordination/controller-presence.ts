/**
 * The controller presence registry in the shared key-value store: which controller processes are
 * alive, and the guard against two processes running under one controller id.
 *
 * `cloud:v1:controller:<controllerId>` holds
 * `{"nonce":…,"startedAt":…,"renewals":…,"schedules":…,"ttlMs":…}` with an expiry of `ttlMs` (the
 * lease TTL, 2 × scheduler.evaluationIntervalSeconds). `nonce` is random per process, so two
 * processes of one id never write the same value; `renewals` grows on every renewal (every third of
 * the TTL), so a live holder's value changes while a dead one's stays put until it expires;
 * `schedules` tells whether the process takes group scopes (the fair share of the lease keeper
 * counts only those).
 *
 * {@link ControllerPresence.liveControllers} counts an entry only while more than half of its TTL
 * is left: a live process renews it every third, so one below half has missed a renewal. A process
 * that died therefore stops counting at most half a TTL after its last renewal, before its leases
 * (renewed at the same pace, expiring after a whole TTL) are free, and the others take its groups
 * on their next tick.
 *
 * Claiming at start ({@link ControllerPresence.claim}):
 * - no entry: written with set-if-absent; the controller goes on;
 * - an entry of another process: the claimant watches it. When its value changes, a live process
 *   renews it: the claim fails with {@link DuplicateControllerError} and the controller does not
 *   start. When it expires (it was left by a process that died, for example a restart after
 *   `kill -9`), the claimant writes its own. So a restart after a crash waits at most one TTL; a
 *   graceful stop deletes the entry, and the next start does not wait at all.
 *
 * While running, a renewal is a compare-and-set of the exact value last written. An entry that
 * expired meanwhile (the store was flushed, or the process was frozen past the TTL) is written
 * again. An entry of another nonce means another process claimed this id while this one was not
 * renewing (frozen, or cut off from the store, for longer than the TTL): this process has lost its
 * id, stops renewing and reports it through `onTakenOver` (the controller stops).
 */
import { randomBytes } from "node:crypto";
import { sleep, type Clock, type Timer } from "../shared/clock.js";
import { assert } from "../shared/errors.js";
import type { Logger } from "../logs/types.js";
import type { KvStore } from "../store/ports.js";
import { CONTROLLER_PRESENCE_PREFIX, controllerPresenceKey } from "./keys.js";

/** The stored value of a presence entry. */
export interface PresenceRecord {
  readonly nonce: string;
  /** When the process claimed the id (ISO-8601 UTC). */
  readonly startedAt: string;
  readonly renewals: number;
  /** Whether the process takes group scopes (its scheduler runs). */
  readonly schedules: boolean;
  /** The expiry the process writes the entry with (null in an entry written without it). */
  readonly ttlMs: number | null;
}

/** A live entry of the registry. */
export interface PresenceEntry {
  readonly controllerId: string;
  /** Null when the value is not a presence record (it still names a live process). */
  readonly record: PresenceRecord | null;
  /** The entry's remaining time to live, null when unknown (no expiry). */
  readonly remainingMs: number | null;
}

/** Another live process runs under this controller id: the controller must not start. */
export class DuplicateControllerError extends Error {
  readonly code = "DUPLICATE_CONTROLLER_ID";
  constructor(
    readonly controllerId: string,
    readonly holder: PresenceRecord | null,
  ) {
    super(
      `Another controller process is running with controller id ${controllerId}` +
        (holder ? ` (started at ${holder.startedAt})` : "") +
        `: each controller needs its own raft.dataDir (the id is kept in its node-id file); this one does not start`,
    );
    this.name = "DuplicateControllerError";
  }
}

/** Options of {@link ControllerPresence}. */
export interface ControllerPresenceOptions {
  kv: KvStore;
  controllerId: string;
  /** Expiry of the entry; renewed every third of it. */
  ttlMs: number;
  /** Whether this process takes group scopes. */
  schedules: boolean;
  clock: Clock;
  logger: Logger;
  /** Called once when another process took this id over (see the module comment). */
  onTakenOver?: (holder: PresenceRecord | null) => void;
  /** Source of the process nonce; default 8 random bytes as hex. */
  nonce?: () => string;
  /** How often a claim reads an entry it waits on; default a tenth of the TTL (at least 10 ms). */
  pollMs?: number;
}

/** Parses a stored value; null when it is not a presence record. */
export function parsePresence(value: string): PresenceRecord | null {
  try {
    const parsed: unknown = JSON.parse(value);
    if (typeof parsed !== "object" || parsed === null) return null;
    const { nonce, startedAt, renewals, schedules, ttlMs } = parsed as Record<string, unknown>;
    if (typeof nonce !== "string" || typeof startedAt !== "string" || typeof renewals !== "number") return null;
    return { nonce, startedAt, renewals, schedules: schedules !== false, ttlMs: typeof ttlMs === "number" && ttlMs > 0 ? ttlMs : null };
  } catch {
    return null;
  }
}

/** Every entry of the registry (one `keys` scan, then a read and a TTL read per entry). */
export async function readPresence(kv: Pick<KvStore, "keys" | "get" | "ttlMs">): Promise<PresenceEntry[]> {
  const keys = await kv.keys(CONTROLLER_PRESENCE_PREFIX);
  const entries = await Promise.all(
    keys.map(async (key): Promise<PresenceEntry | null> => {
      const [value, remainingMs] = await Promise.all([kv.get(key), kv.ttlMs(key)]);
      return value === null ? null : { controllerId: key.slice(CONTROLLER_PRESENCE_PREFIX.length), record: parsePresence(value), remainingMs };
    }),
  );
  return entries.filter((entry): entry is PresenceEntry => entry !== null);
}

/** True when an entry has half its TTL or less left: its process missed a renewal. */
function missedRenewal(entry: PresenceEntry): boolean {
  const ttlMs = entry.record?.ttlMs;
  return ttlMs != null && entry.remainingMs !== null && entry.remainingMs <= ttlMs / 2;
}

/** This process's presence entry: claimed at start, renewed until {@link stop}. */
export class ControllerPresence {
  readonly controllerId: string;
  private readonly kv: KvStore;
  private readonly clock: Clock;
  private readonly logger: Logger;
  private readonly ttlMs: number;
  private readonly pollMs: number;
  private readonly key: string;
  private record: PresenceRecord;
  /** The value last written (null before the claim). */
  private value: string | null = null;
  private timer: Timer | undefined;
  private renewing: Promise<void> | undefined;
  private lostTo: PresenceRecord | null | undefined;
  private stopped = false;

  constructor(private readonly options: ControllerPresenceOptions) {
    assert(options.controllerId.length > 0, "controller id must not be empty");
    assert(Number.isSafeInteger(options.ttlMs) && options.ttlMs >= 30, "the presence TTL must be at least 30 ms");
    this.controllerId = options.controllerId;
    this.kv = options.kv;
    this.clock = options.clock;
    this.logger = options.logger;
    this.ttlMs = options.ttlMs;
    this.pollMs = options.pollMs ?? Math.max(10, Math.floor(options.ttlMs / 10));
    this.key = controllerPresenceKey(options.controllerId);
    const nonce = (options.nonce ?? (() => randomBytes(8).toString("hex")))();
    this.record = { nonce, startedAt: new Date(this.clock.nowMs()).toISOString(), renewals: 0, schedules: options.schedules, ttlMs: options.ttlMs };
  }

  /** The process nonce (random per process). */
  get nonce(): string {
    return this.record.nonce;
  }

  /** True once another process took this id over; the holder must then stop acting at once. */
  lost(): boolean {
    return this.lostTo !== undefined;
  }

  /**
   * Claims the id (see the module comment) and starts renewing. Throws
   * {@link DuplicateControllerError} when another live process holds it; waits at most one TTL (and
   * two polls) for the entry of a process that is gone.
   */
  async claim(): Promise<void> {
    assert(this.value === null && !this.stopped, "presence already claimed");
    const mine = JSON.stringify(this.record);
    const deadlineMs = this.clock.nowMs() + this.ttlMs + 2 * this.pollMs;
    let observed: string | null = null;
    for (;;) {
      const current = await this.kv.get(this.key);
      if (current === null) {
        if (await this.kv.setIfAbsent(this.key, mine, { ttlMs: this.ttlMs })) break;
        continue; // another process wrote it between the read and the write: the next read sees it
      }
      const holder = parsePresence(current);
      if (observed === null) {
        observed = current;
        this.logger.info(
          `Controller id ${this.controllerId} has a presence entry` +
            (holder ? ` of a process started at ${holder.startedAt}` : "") +
            `; waiting up to ${this.ttlMs} ms: a live process renews it (this one then does not start), the entry of one that died expires`,
        );
      } else if (current !== observed) {
        throw new DuplicateControllerError(this.controllerId, holder);
      }
      if (this.clock.nowMs() >= deadlineMs) {
        // Not renewed and not expired after a whole TTL: an entry without expiry. It names no live process.
        if (await this.kv.compareAndSet(this.key, current, mine, { ttlMs: this.ttlMs })) break;
        throw new DuplicateControllerError(this.controllerId, parsePresence((await this.kv.get(this.key)) ?? "") ?? holder);
      }
      await sleep(this.clock, this.pollMs);
    }
    this.value = mine;
    this.timer = this.clock.setInterval(() => void this.renewOnce(), Math.max(1, Math.floor(this.ttlMs / 3)), { unref: true });
  }

  /** One renewal now (the timer calls it every third of the TTL); never overlaps another. */
  renewOnce(): Promise<void> {
    if (this.stopped || this.value === null || this.lost()) return Promise.resolve();
    this.renewing ??= this.renew().finally(() => {
      this.renewing = undefined;
    });
    return this.renewing;
  }

  /** Resolves when no renewal is in flight. */
  async idle(): Promise<void> {
    await this.renewing;
  }

  /**
   * Checks a registry read against this process's entry: an entry of another nonce under this id
   * means the id was taken over. `readPresence` callers on this controller pass their result here.
   */
  observe(entries: readonly PresenceEntry[]): void {
    if (this.value === null || this.stopped || this.lost()) return;
    const own = entries.find((entry) => entry.controllerId === this.controllerId);
    if (own && own.record?.nonce !== this.record.nonce) this.takenOver(own.record);
  }

  /**
   * Ids of the live controllers that take scopes, this one included while it holds its id (the
   * lease keeper's fair share): entries with more than half their TTL left (see the module
   * comment). Throws when the registry cannot be read.
   */
  async liveControllers(): Promise<string[]> {
    const entries = await readPresence(this.kv);
    this.observe(entries);
    const ids = entries.filter((entry) => entry.record?.schedules !== false && !missedRenewal(entry)).map((entry) => entry.controllerId);
    return this.lost() || ids.includes(this.controllerId) ? ids : [...ids, this.controllerId];
  }

  /** Stops renewing and deletes the entry (unless another process holds it now). */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.timer?.cancel();
    await this.renewing;
    if (this.value === null || this.lost()) return;
    try {
      await this.kv.compareAndDelete(this.key, this.value);
    } catch (error) {
      this.logger.warn(`Deleting the presence entry of ${this.controllerId} failed; it expires on its own`, error);
    }
  }

  private async renew(): Promise<void> {
    const previous = this.value!;
    const next: PresenceRecord = { ...this.record, renewals: this.record.renewals + 1 };
    const nextValue = JSON.stringify(next);
    try {
      if (await this.kv.compareAndSet(this.key, previous, nextValue, { ttlMs: this.ttlMs })) return this.renewed(next, nextValue);
      const current = await this.kv.get(this.key);
      if (current === nextValue) return this.renewed(next, nextValue); // the write went through; its answer was lost
      if (current === null) {
        if (await this.kv.setIfAbsent(this.key, nextValue, { ttlMs: this.ttlMs })) {
          this.logger.warn(`The presence entry of controller ${this.controllerId} had expired; written again`);
          return this.renewed(next, nextValue);
        }
        return; // written by another process at this very moment: the next renewal finds it
      }
      const holder = parsePresence(current);
      if (holder?.nonce === this.record.nonce) return this.renewed(holder, current);
      this.takenOver(holder);
    } catch (error) {
      this.logger.warn(`Renewing the presence entry of controller ${this.controllerId} failed; retried in ${Math.floor(this.ttlMs / 3)} ms`, error);
    }
  }

  private renewed(record: PresenceRecord, value: string): void {
    this.record = record;
    this.value = value;
  }

  private takenOver(holder: PresenceRecord | null): void {
    if (this.lost()) return;
    this.lostTo = holder;
    this.timer?.cancel();
    this.logger.error(
      `Controller id ${this.controllerId} was taken over by another process` +
        (holder ? ` (started at ${holder.startedAt})` : "") +
        ` while this one did not renew its presence; this controller stops`,
    );
    try {
      this.options.onTakenOver?.(holder);
    } catch (error) {
      this.logger.error("The presence onTakenOver callback threw", error);
    }
  }
}
