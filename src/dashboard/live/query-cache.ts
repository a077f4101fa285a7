/**
 * REST data the pages show, kept live by the event stream. A page watches a query (a key, how to
 * fetch it, which events concern it, optionally how to patch it in place); the cache fetches it
 * while watched, and when an event concerns it fetches it again, at most once per
 * `minIntervalMs` (one fetch in flight, a change seen meanwhile fetches once more after it), so a
 * burst of events costs a bounded number of requests and the screen is never more than about one
 * interval behind. A resync fetches every watched query again; `pollMs` refetches data no event
 * announces (readiness, leases). Unwatched entries keep their last data (shown at once on return,
 * then refreshed), the newest {@link UNWATCHED_ENTRIES_MAX} of them.
 *
 * A patch shows a change at once, without a fetch. With `replay` (a patch that sets values, newest
 * wins, so applying an event twice changes nothing), the events patched in while a fetch is in
 * flight are applied again to its answer: an answer read before a change then does not take the
 * change off the screen until the next fetch. At most {@link REPLAY_EVENTS_MAX} are kept; beyond
 * that the answer is shown as it is and fetched again.
 */
import type { LiveEvent, Timers } from "./types.js";

/** Default spacing of two fetches of one query. */
export const REFETCH_MIN_INTERVAL_MS = 400;
/** Entries kept without watchers. */
export const UNWATCHED_ENTRIES_MAX = 64;
/** Events kept per fetch in flight to patch its answer with (`replay`). */
export const REPLAY_EVENTS_MAX = 5_000;

export interface QueryOptions<T> {
  /** Fetches the data (usually one REST GET). */
  load(): Promise<T>;
  /** True when the event may change this query's data: it is fetched again. */
  watch?(event: LiveEvent): boolean;
  /** Applies events to the data directly (same object when nothing changed); runs before `watch`. */
  patch?(data: T, batch: readonly LiveEvent[]): T;
  /** The patch sets values (applying an event twice changes nothing): events seen during a fetch are applied to its answer too. */
  replay?: boolean;
  minIntervalMs?: number;
  /** Fetch again this often while watched, whatever the events say. */
  pollMs?: number;
}

export interface QueryState<T> {
  data: T | undefined;
  error: unknown;
  loading: boolean;
  /** When the data now shown was fetched (ms); null before the first answer. */
  fetchedAt: number | null;
}

interface Entry {
  options: QueryOptions<unknown>;
  state: QueryState<unknown>;
  watchers: Set<(state: QueryState<unknown>) => void>;
  inFlight: boolean;
  dirty: boolean;
  /** Events seen while a fetch is in flight (`replay`); null when not kept (none in flight, or too many). */
  replay: LiveEvent[] | null;
  lastStartMs: number;
  timer: unknown;
  pollTimer: unknown;
  unwatchedAt: number;
}

export class QueryCache {
  private readonly entries = new Map<string, Entry>();

  constructor(private readonly timers: Timers) {}

  /** Watches `key`; the listener gets every new state (first the current one). Returns the unwatch. */
  watch<T>(key: string, options: QueryOptions<T>, listener: (state: QueryState<T>) => void): () => void {
    let entry = this.entries.get(key);
    if (!entry) {
      entry = {
        options: options as QueryOptions<unknown>,
        state: { data: undefined, error: undefined, loading: true, fetchedAt: null },
        watchers: new Set(),
        inFlight: false,
        dirty: false,
        replay: null,
        lastStartMs: -Infinity,
        timer: null,
        pollTimer: null,
        unwatchedAt: 0,
      };
      this.entries.set(key, entry);
    }
    entry.options = options as QueryOptions<unknown>;
    const typed = listener as (state: QueryState<unknown>) => void;
    entry.watchers.add(typed);
    typed(entry.state);
    if (entry.watchers.size === 1) {
      this.request(entry, true);
      this.schedulePoll(entry);
    }
    return () => {
      const current = this.entries.get(key);
      if (!current) return;
      current.watchers.delete(typed);
      if (current.watchers.size > 0) return;
      current.unwatchedAt = this.timers.now();
      if (current.timer !== null) this.timers.clear(current.timer);
      if (current.pollTimer !== null) this.timers.clear(current.pollTimer);
      current.timer = current.pollTimer = null;
      this.evict();
    };
  }

  /** The current state of `key`, if known. */
  peek<T>(key: string): QueryState<T> | undefined {
    return this.entries.get(key)?.state as QueryState<T> | undefined;
  }

  /** Events from the stream: patches first, then refetches of the queries they concern. */
  events(batch: readonly LiveEvent[]): void {
    for (const entry of this.entries.values()) {
      if (entry.watchers.size === 0) continue;
      const { patch, watch } = entry.options;
      if (patch && entry.state.data !== undefined) {
        const next = patch(entry.state.data, batch);
        if (next !== entry.state.data) this.update(entry, { ...entry.state, data: next });
      }
      if (entry.replay) {
        if (entry.replay.length + batch.length > REPLAY_EVENTS_MAX) {
          entry.replay = null;
          entry.dirty = true;
        } else entry.replay.push(...batch);
      }
      if (watch && batch.some((event) => watch(event))) this.request(entry, false);
    }
  }

  /** Everything watched is fetched again (RESYNC_REQUIRED, the first connection, a reconnect). */
  resync(): void {
    for (const entry of this.entries.values()) if (entry.watchers.size > 0) this.request(entry, false);
  }

  /** Fetches `key` again now (after the page itself changed something), whatever the interval. */
  refresh(key: string): void {
    const entry = this.entries.get(key);
    if (entry && entry.watchers.size > 0) this.request(entry, true);
  }

  /** Fetches every watched key that starts with `prefix` again now. */
  refreshPrefix(prefix: string): void {
    for (const [key, entry] of this.entries) if (key.startsWith(prefix) && entry.watchers.size > 0) this.request(entry, true);
  }

  private request(entry: Entry, now: boolean): void {
    if (entry.inFlight) {
      entry.dirty = true;
      return;
    }
    const interval = entry.options.minIntervalMs ?? REFETCH_MIN_INTERVAL_MS;
    const wait = now ? 0 : entry.lastStartMs + interval - this.timers.now();
    if (wait <= 0) {
      void this.run(entry);
    } else if (entry.timer === null) {
      entry.timer = this.timers.set(() => {
        entry.timer = null;
        if (entry.watchers.size > 0) void this.run(entry);
      }, wait);
    }
  }

  private async run(entry: Entry): Promise<void> {
    if (entry.timer !== null) this.timers.clear(entry.timer);
    entry.timer = null;
    entry.inFlight = true;
    entry.dirty = false;
    entry.replay = entry.options.patch && entry.options.replay ? [] : null;
    entry.lastStartMs = this.timers.now();
    if (!entry.state.loading && entry.state.data === undefined) this.update(entry, { ...entry.state, loading: true });
    try {
      let data = await entry.options.load();
      const seen = entry.replay;
      if (seen && seen.length > 0 && entry.options.patch) data = entry.options.patch(data, seen);
      this.update(entry, { data, error: undefined, loading: false, fetchedAt: this.timers.now() });
    } catch (error) {
      this.update(entry, { ...entry.state, error, loading: false });
    } finally {
      entry.inFlight = false;
      entry.replay = null;
      if (entry.dirty && entry.watchers.size > 0) this.request(entry, false);
    }
  }

  private schedulePoll(entry: Entry): void {
    const pollMs = entry.options.pollMs;
    if (!pollMs) return;
    entry.pollTimer = this.timers.set(() => {
      entry.pollTimer = null;
      if (entry.watchers.size === 0) return;
      this.request(entry, false);
      this.schedulePoll(entry);
    }, pollMs);
  }

  private update(entry: Entry, state: QueryState<unknown>): void {
    entry.state = state;
    for (const watcher of entry.watchers) watcher(state);
  }

  private evict(): void {
    const idle = [...this.entries].filter(([, e]) => e.watchers.size === 0);
    if (idle.length <= UNWATCHED_ENTRIES_MAX) return;
    idle.sort((a, b) => a[1].unwatchedAt - b[1].unwatchedAt);
    for (const [key] of idle.slice(0, idle.length - UNWATCHED_ENTRIES_MAX)) this.entries.delete(key);
  }
}
