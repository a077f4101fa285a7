/**
 * In-process {@link KvStore} for the development profile (one controller). Semantics follow the
 * Redis adapter: a write without `ttlMs` leaves the key without expiry, `increment` keeps the
 * key's expiry, expired keys read as absent. Time comes from the injected clock, so tests expire
 * keys by advancing it. Pub/sub delivers asynchronously (never inside `publish`), in publish order,
 * and a throwing handler does not affect the others.
 */
import type { Clock } from "../../shared/clock.js";
import { nextTurn, systemClock } from "../../shared/clock.js";
import { assert } from "../../shared/errors.js";
import { formatSequencedEntry, type KvStore, type SequencedEntry, type SequencedLog } from "../ports.js";

/** Options of {@link MemoryKvStore}. */
export interface MemoryKvStoreOptions {
  clock?: Clock;
  /** Writes between two purges of expired keys, which bounds memory held by dead keys. */
  purgeEveryWrites?: number;
  /** Called when a subscriber throws; the default ignores the error. */
  onHandlerError?: (error: unknown, channel: string) => void;
}

interface Entry {
  value: string;
  expiresAtMs: number | null;
}

type Handler = (message: string) => void;

const defaultPurgeEveryWrites = 1_000;

/** The in-memory key-value store; everything is lost when the process exits. */
export class MemoryKvStore implements KvStore {
  private readonly entries = new Map<string, Entry>();
  private readonly channels = new Map<string, Set<Handler>>();
  private readonly logs = new Map<string, SequencedEntry[]>();
  private readonly clock: Clock;
  private readonly purgeEveryWrites: number;
  private readonly onHandlerError: (error: unknown, channel: string) => void;
  private writesSincePurge = 0;
  private closed = false;

  constructor(options: MemoryKvStoreOptions = {}) {
    this.clock = options.clock ?? systemClock;
    this.purgeEveryWrites = options.purgeEveryWrites ?? defaultPurgeEveryWrites;
    // The subscribers (event bridge, daemon relay) catch and log their own failures; what reaches
    // here must only not stop delivery to the channel's other subscribers.
    this.onHandlerError = options.onHandlerError ?? (() => undefined);
  }

  async get(key: string): Promise<string | null> {
    return this.live(key)?.value ?? null;
  }

  async set(key: string, value: string, options?: { ttlMs?: number }): Promise<void> {
    this.write(key, value, options?.ttlMs);
  }

  async setIfAbsent(key: string, value: string, options?: { ttlMs?: number }): Promise<boolean> {
    if (this.live(key)) return false;
    this.write(key, value, options?.ttlMs);
    return true;
  }

  async compareAndSet(key: string, expected: string, value: string, options?: { ttlMs?: number }): Promise<boolean> {
    if (this.live(key)?.value !== expected) return false;
    this.write(key, value, options?.ttlMs);
    return true;
  }

  async compareAndDelete(key: string, expected: string): Promise<boolean> {
    if (this.live(key)?.value !== expected) return false;
    this.entries.delete(key);
    return true;
  }

  async delete(key: string): Promise<boolean> {
    const existed = this.live(key) !== undefined;
    this.entries.delete(key);
    return existed;
  }

  async increment(key: string): Promise<number> {
    return this.incrementNow(key);
  }

  private incrementNow(key: string): number {
    this.assertOpen();
    const entry = this.live(key);
    const current = entry ? Number(entry.value) : 0;
    if (!/^-?\d+$/.test(entry?.value ?? "0") || !Number.isSafeInteger(current + 1)) {
      throw new Error(`value of ${key} is not an integer or out of range`);
    }
    this.entries.set(key, { value: String(current + 1), expiresAtMs: entry?.expiresAtMs ?? null });
    return current + 1;
  }

  async take(key: string): Promise<string | null> {
    const entry = this.live(key);
    this.entries.delete(key);
    return entry?.value ?? null;
  }

  async ttlMs(key: string): Promise<number | null> {
    const entry = this.live(key);
    if (!entry || entry.expiresAtMs === null) return null;
    return entry.expiresAtMs - this.clock.nowMs();
  }

  async keys(prefix: string): Promise<string[]> {
    this.assertOpen();
    const found: string[] = [];
    for (const key of this.entries.keys()) {
      if (key.startsWith(prefix) && this.live(key)) found.push(key);
    }
    return found.sort();
  }

  async publish(channel: string, message: string): Promise<void> {
    this.publishNow(channel, message);
  }

  private publishNow(channel: string, message: string): void {
    this.assertOpen();
    const handlers = this.channels.get(channel);
    if (!handlers || handlers.size === 0) return;
    const snapshot = [...handlers];
    nextTurn(() => {
      for (const handler of snapshot) {
        if (!this.channels.get(channel)?.has(handler)) continue; // unsubscribed meanwhile
        try {
          handler(message);
        } catch (error) {
          this.onHandlerError(error, channel);
        }
      }
    });
  }

  async appendSequenced(log: SequencedLog, value: string): Promise<number> {
    assert(Number.isSafeInteger(log.entriesMax) && log.entriesMax > 0, "entriesMax must be a positive integer");
    // Nothing awaits between the increment and the publish: the three steps are one.
    const sequence = this.incrementNow(log.counterKey);
    let entries = this.logs.get(log.listKey);
    if (!entries) {
      entries = [];
      this.logs.set(log.listKey, entries);
    }
    entries.push({ sequence, value });
    if (entries.length > log.entriesMax) entries.splice(0, entries.length - log.entriesMax);
    this.publishNow(log.channel, formatSequencedEntry(sequence, value));
    return sequence;
  }

  async readSequenced(log: SequencedLog, fromSequence: number): Promise<{ latestSequence: number; entries: SequencedEntry[] }> {
    const latestSequence = Number(this.live(log.counterKey)?.value ?? "0");
    const entries = (this.logs.get(log.listKey) ?? []).filter((entry) => entry.sequence >= fromSequence);
    return { latestSequence, entries };
  }

  async subscribe(channel: string, handler: (message: string) => void): Promise<() => Promise<void>> {
    this.assertOpen();
    // Wrapping makes every subscription distinct, even when one function subscribes twice.
    const subscription: Handler = (message) => handler(message);
    let handlers = this.channels.get(channel);
    if (!handlers) {
      handlers = new Set();
      this.channels.set(channel, handlers);
    }
    handlers.add(subscription);
    return async () => {
      const current = this.channels.get(channel);
      current?.delete(subscription);
      if (current?.size === 0) this.channels.delete(channel);
    };
  }

  async ping(): Promise<void> {
    this.assertOpen();
  }

  async close(): Promise<void> {
    this.closed = true;
    this.channels.clear();
    this.entries.clear();
    this.logs.clear();
  }

  private assertOpen(): void {
    assert(!this.closed, "key-value store is closed");
  }

  private live(key: string): Entry | undefined {
    this.assertOpen();
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    if (entry.expiresAtMs !== null && entry.expiresAtMs <= this.clock.nowMs()) {
      this.entries.delete(key);
      return undefined;
    }
    return entry;
  }

  private write(key: string, value: string, ttlMs: number | undefined): void {
    this.assertOpen();
    if (ttlMs !== undefined) assert(Number.isFinite(ttlMs) && ttlMs > 0, "ttlMs must be a positive number");
    const expiresAtMs = ttlMs === undefined ? null : this.clock.nowMs() + Math.ceil(ttlMs);
    this.entries.set(key, { value, expiresAtMs });
    if (++this.writesSincePurge >= this.purgeEveryWrites) this.purgeExpired();
  }

  private purgeExpired(): void {
    this.writesSincePurge = 0;
    const nowMs = this.clock.nowMs();
    for (const [key, entry] of this.entries) {
      if (entry.expiresAtMs !== null && entry.expiresAtMs <= nowMs) this.entries.delete(key);
    }
  }
}
