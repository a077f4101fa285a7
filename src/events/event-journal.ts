/**
 * The cluster-wide event journal behind the SSE stream (spec document 3, "Event stream"). Every
 * event published on this controller's bus (except INSTANCE_CONSOLE_OUTPUT and events the bridge
 * brought from a peer) is appended to one sequenced log in the key-value store: the store numbers
 * it from one counter, keeps the newest entries and announces it on a channel, in one atomic step
 * (`KvStore.appendSequenced`). Every controller reads that channel and keeps the same replay
 * buffer of the newest {@link REPLAY_BUFFER_EVENTS} events in sequence order, so every controller
 * serves the same sequence numbers for the same events and a client can resume on any of them.
 *
 * The buffer only ever grows at its end by the next number. An entry that arrives ahead of a
 * missing one (the channel's connection dropped messages) is held while the missing ones are read
 * back from the log; what the log no longer has after {@link JOURNAL_GAP_WAIT_MS} is a hole: the
 * buffer is emptied and starts after it, so every client whose position lies before the hole gets
 * RESYNC_REQUIRED instead of a silent gap. A periodic catch-up read finds entries whose
 * announcement was lost when no later one arrived.
 */
import type { Logger } from "../logs/types.js";
import type { Clock, Timer } from "../shared/clock.js";
import { systemClock } from "../shared/clock.js";
import { assert } from "../shared/errors.js";
import { parseSequencedEntry, type KvStore, type SequencedEntry, type SequencedLog } from "../store/ports.js";
import { SSE_EXCLUDED_EVENT_TYPES } from "./event-types.js";
import type { CloudEvent, EventBus, Subscription } from "./types.js";

/** Events kept for replay (spec: SSE replay buffer 2048 events); the store's log keeps as many. */
export const REPLAY_BUFFER_EVENTS = 2_048;
/** How long a missing sequence is waited for before it counts as a hole. */
export const JOURNAL_GAP_WAIT_MS = 2_000;
/** Interval of the catch-up read that finds announcements lost at the end of the log. */
export const JOURNAL_CATCH_UP_INTERVAL_MS = 5_000;
/** Appends sent to the store and not yet answered; beyond it new events are dropped and counted. */
export const JOURNAL_APPENDS_IN_FLIGHT_MAX = 10_000;
/** Entries held while a gap before them is filled; beyond it the gap is declared a hole at once. */
export const JOURNAL_HELD_ENTRIES_MAX = 4_096;

/** `cloud:v1:events:sequence`: the counter every journaled event takes its sequence from. */
export const EVENT_JOURNAL_COUNTER_KEY = "cloud:v1:events:sequence";
/** `cloud:v1:events:journal`: the list of the newest journaled events, and the channel announcing each. */
export const EVENT_JOURNAL_KEY = "cloud:v1:events:journal";

/** The journal's log in the key-value store. */
export const EVENT_JOURNAL_LOG: SequencedLog = {
  counterKey: EVENT_JOURNAL_COUNTER_KEY,
  listKey: EVENT_JOURNAL_KEY,
  channel: EVENT_JOURNAL_KEY,
  entriesMax: REPLAY_BUFFER_EVENTS,
};

/** One journaled event: its number, its type and the JSON the stream sends as the message's data. */
export interface JournalEntry {
  readonly sequence: number;
  readonly type: string;
  /** Who published it (a controller, or an instance id for plugin events); null when unknown. */
  readonly source: string | null;
  /** `{type, sequence, source, timestamp, data}` as JSON text, serialized once for every client. */
  readonly json: string;
  /** The stream's frame of it (`id`, `event: message`, `data`), made once for every client. */
  readonly frame: string;
}

/** Options of {@link EventJournal}. */
export interface EventJournalOptions {
  kv: KvStore;
  bus: EventBus;
  logger: Logger;
  clock?: Clock;
  log?: SequencedLog;
  replayBufferEvents?: number;
  gapWaitMs?: number;
  catchUpIntervalMs?: number;
  appendsInFlightMax?: number;
  /** Called with the number of buffered events whenever it changes (the replay-buffer gauge). */
  onBufferSize?: (events: number) => void;
}

/** Whether an event came over the bridge from a peer controller (it was journaled there). */
const isBridged = (event: CloudEvent): boolean => event.source.startsWith("peer:");

/** Sequenced, replayable events shared by every controller; see the module comment. */
export class EventJournal {
  private readonly kv: KvStore;
  private readonly logger: Logger;
  private readonly clock: Clock;
  private readonly log: SequencedLog;
  private readonly capacity: number;
  private readonly gapWaitMs: number;
  private readonly catchUpIntervalMs: number;
  private readonly appendsInFlightMax: number;
  private readonly ring: (JournalEntry | undefined)[];
  private readonly held = new Map<number, SequencedEntry>();
  private readonly listeners = new Set<() => void>();
  private readonly inFlight = new Set<Promise<void>>();
  private subscription: Subscription | undefined;
  private unsubscribeChannel: (() => Promise<void>) | undefined;
  private catchUpTimer: Timer | undefined;
  private gapTimer: Timer | undefined;
  private filling: Promise<void> | undefined;
  private synced = false;
  private state: "new" | "running" | "stopped" = "new";
  private latest = 0;
  private buffered = 0;
  private dropped = 0;
  private failed = 0;
  private holes = 0;

  constructor(private readonly options: EventJournalOptions) {
    this.kv = options.kv;
    this.logger = options.logger;
    this.clock = options.clock ?? systemClock;
    this.log = options.log ?? EVENT_JOURNAL_LOG;
    this.capacity = options.replayBufferEvents ?? REPLAY_BUFFER_EVENTS;
    this.gapWaitMs = options.gapWaitMs ?? JOURNAL_GAP_WAIT_MS;
    this.catchUpIntervalMs = options.catchUpIntervalMs ?? JOURNAL_CATCH_UP_INTERVAL_MS;
    this.appendsInFlightMax = options.appendsInFlightMax ?? JOURNAL_APPENDS_IN_FLIGHT_MAX;
    assert(Number.isSafeInteger(this.capacity) && this.capacity > 0, "replayBufferEvents must be a positive integer");
    this.ring = new Array<JournalEntry | undefined>(this.capacity);
  }

  /** Highest sequence in order so far (0 before the first event). */
  get latestSequence(): number {
    return this.latest;
  }

  /** Lowest buffered sequence; `latestSequence + 1` while the buffer is empty. */
  get earliestSequence(): number {
    return this.latest - this.buffered + 1;
  }

  /** Events buffered for replay. */
  get bufferedEvents(): number {
    return this.buffered;
  }

  /** Events not journaled because too many appends were in flight. */
  get droppedEvents(): number {
    return this.dropped;
  }

  /** Events whose append to the store failed. */
  get failedEvents(): number {
    return this.failed;
  }

  /** Gaps that were never filled (each made clients behind it resync). */
  get holeCount(): number {
    return this.holes;
  }

  /** Subscribes to the log's channel, reads the log's tail into the buffer, then journals local events. */
  async start(): Promise<void> {
    assert(this.state === "new", "event journal already started");
    this.state = "running";
    // Channel first, then the read: an entry announced in between is held and then deduplicated.
    this.unsubscribeChannel = await this.kv.subscribe(this.log.channel, (text) => this.receive(text));
    const { latestSequence, entries } = await this.kv.readSequenced(this.log, 1);
    if (entries.length > 0) this.latest = entries[0].sequence - 1;
    for (const entry of entries) this.acceptInOrder(entry);
    // A counter ahead of the kept entries (the list was lost): nothing before it can be replayed.
    if (latestSequence > this.latest) this.skipHoleTo(latestSequence + 1);
    this.synced = true;
    this.releaseHeld();
    this.reportSize();
    if (this.held.size > 0) void this.fill();
    this.subscription = this.options.bus.subscribeAll((event) => this.append(event));
    this.catchUpTimer = this.clock.setInterval(() => void this.fill(), this.catchUpIntervalMs, { unref: true });
  }

  /** Stops journaling and reading; waits for the appends in flight. */
  async stop(): Promise<void> {
    if (this.state === "stopped") return;
    this.state = "stopped";
    this.subscription?.unsubscribe();
    this.catchUpTimer?.cancel();
    this.gapTimer?.cancel();
    await Promise.all([...this.inFlight]);
    const unsubscribe = this.unsubscribeChannel;
    this.unsubscribeChannel = undefined;
    try {
      await unsubscribe?.();
    } catch (error) {
      this.logger.warn("Unsubscribing the event journal from its channel failed", error);
    }
    for (const listener of [...this.listeners]) listener();
  }

  /** Whether the journal stopped (streams end then). */
  get stopped(): boolean {
    return this.state === "stopped";
  }

  /** The buffered entry with this sequence, if it is still buffered. */
  entry(sequence: number): JournalEntry | undefined {
    if (sequence < this.earliestSequence || sequence > this.latest) return undefined;
    const entry = this.ring[sequence % this.capacity];
    return entry?.sequence === sequence ? entry : undefined;
  }

  /** Calls `listener` after new entries were buffered (and on stop); returns the unsubscribe function. */
  listen(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * Reads the log's tail now: a client that resumes here with a position announced elsewhere
   * but not yet here is answered from the log instead of being told it is ahead.
   */
  async catchUp(): Promise<void> {
    await this.fill();
  }

  private append(event: CloudEvent): Promise<void> | void {
    if (this.state !== "running" || isBridged(event) || SSE_EXCLUDED_EVENT_TYPES.has(event.type)) return;
    if (this.inFlight.size >= this.appendsInFlightMax) {
      this.dropped++;
      if (this.dropped === 1 || this.dropped % 1000 === 0)
        this.logger.warn(`Event journal: ${this.appendsInFlightMax} appends in flight, dropped ${this.dropped} events so far, latest ${event.type}`);
      return;
    }
    const value = JSON.stringify({ type: event.type, source: event.source, timestamp: event.timestamp, data: event.data });
    const appended = this.kv.appendSequenced(this.log, value).then(
      () => undefined,
      (error: unknown) => {
        this.failed++;
        if (this.failed === 1 || this.failed % 1000 === 0)
          this.logger.warn(`Event journal: appending failed ${this.failed} times so far, latest ${event.type}`, error);
      },
    );
    this.inFlight.add(appended);
    void appended.finally(() => this.inFlight.delete(appended));
    return appended;
  }

  private receive(text: string): void {
    if (this.state !== "running") return;
    const entry = parseSequencedEntry(text);
    if (!entry) {
      this.logger.warn("Event journal: ignored an unreadable announcement");
      return;
    }
    if (!this.synced || entry.sequence > this.latest + 1) {
      this.hold(entry);
      return;
    }
    if (entry.sequence === this.latest + 1) {
      this.acceptInOrder(entry);
      this.releaseHeld();
      this.afterGrowth();
    }
  }

  private hold(entry: SequencedEntry): void {
    if (entry.sequence <= this.latest) return;
    this.held.set(entry.sequence, entry);
    if (!this.synced) return;
    if (this.held.size > JOURNAL_HELD_ENTRIES_MAX) {
      this.skipHole();
      return;
    }
    if (this.gapTimer) return;
    void this.fill();
    this.gapTimer = this.clock.setTimeout(() => {
      this.gapTimer = undefined;
      void this.fill().then(() => {
        if (this.held.size > 0 && this.state === "running") this.skipHole();
      });
    }, this.gapWaitMs);
  }

  /** Reads what the log holds after the latest sequence and buffers it in order. */
  private fill(): Promise<void> {
    if (this.state !== "running" || !this.synced) return Promise.resolve();
    this.filling ??= (async () => {
      try {
        const { latestSequence, entries } = await this.kv.readSequenced(this.log, this.latest + 1);
        if (this.state !== "running") return;
        for (const entry of entries) if (!this.held.has(entry.sequence)) this.held.set(entry.sequence, entry);
        const before = this.latest;
        this.releaseHeld();
        if (this.latest < latestSequence) {
          // What is still missing is no longer in the log (trimmed while this controller was not
          // reading): appends are atomic, so nothing allocated can still be on its way.
          const firstKept = entries.find((entry) => entry.sequence > this.latest)?.sequence ?? latestSequence + 1;
          this.skipHoleTo(firstKept);
          this.releaseHeld();
        }
        if (this.latest !== before) this.afterGrowth();
      } catch (error) {
        this.logger.warn("Event journal: reading the log failed", error);
      } finally {
        this.filling = undefined;
      }
    })();
    return this.filling;
  }

  private releaseHeld(): void {
    for (const [sequence] of this.held) if (sequence <= this.latest) this.held.delete(sequence);
    for (let next = this.held.get(this.latest + 1); next; next = this.held.get(this.latest + 1)) {
      this.held.delete(next.sequence);
      this.acceptInOrder(next);
    }
    if (this.held.size === 0) {
      this.gapTimer?.cancel();
      this.gapTimer = undefined;
    }
  }

  /** Gives up on the missing sequences before the lowest held one. */
  private skipHole(): void {
    const lowest = Math.min(...this.held.keys());
    this.skipHoleTo(lowest);
    this.releaseHeld();
    this.afterGrowth();
  }

  private skipHoleTo(next: number): void {
    if (next <= this.latest + 1) return;
    this.holes++;
    this.logger.warn(`Event journal: events ${this.latest + 1}..${next - 1} are not in the log; clients behind them resync`);
    this.ring.fill(undefined);
    this.buffered = 0;
    this.latest = next - 1;
    this.reportSize();
  }

  private acceptInOrder(entry: SequencedEntry): void {
    assert(entry.sequence === this.latest + 1, `journal entry ${entry.sequence} out of order after ${this.latest}`);
    let parsed: { type?: unknown; source?: unknown; timestamp?: unknown; data?: unknown };
    try {
      parsed = JSON.parse(entry.value) as typeof parsed;
    } catch {
      parsed = {};
    }
    const type = typeof parsed.type === "string" ? parsed.type : "UNKNOWN";
    const json = entryJson(entry, parsed, type);
    const source = typeof parsed.source === "string" ? parsed.source : null;
    const frame = `id: ${entry.sequence}\nevent: message\ndata: ${json}\n\n`;
    this.ring[entry.sequence % this.capacity] = { sequence: entry.sequence, type, source, json, frame };
    this.latest = entry.sequence;
    if (this.buffered < this.capacity) this.buffered++;
  }

  private afterGrowth(): void {
    this.reportSize();
    for (const listener of [...this.listeners]) listener();
  }

  private reportSize(): void {
    this.options.onBufferSize?.(this.buffered);
  }
}

/** The keys of a journaled value, in the order {@link EventJournal} writes them. */
const VALUE_KEYS = ["type", "source", "timestamp", "data"];

/**
 * `{type, sequence, source, timestamp, data}` as JSON. A value as the journal writes it (those four
 * keys in that order, JSON without spaces) is spliced, not serialized again: the sequence goes in
 * after the type and the rest is the value's own text, which is what a new serialization would
 * give. Anything else (another writer, a damaged entry) is serialized field by field.
 */
function entryJson(entry: SequencedEntry, parsed: { type?: unknown; source?: unknown; timestamp?: unknown; data?: unknown }, type: string): string {
  const keys = Object.keys(parsed);
  if (
    typeof parsed.type === "string" &&
    parsed.source != null &&
    parsed.timestamp != null &&
    parsed.data != null &&
    keys.length === 4 &&
    keys.every((key, i) => key === VALUE_KEYS[i])
  ) {
    const head = `{"type":${JSON.stringify(type)},`;
    if (entry.value.startsWith(head) && entry.value.startsWith('"source":', head.length))
      return `${head}"sequence":${entry.sequence},${entry.value.slice(head.length)}`;
  }
  return JSON.stringify({ type, sequence: entry.sequence, source: parsed.source ?? null, timestamp: parsed.timestamp ?? null, data: parsed.data ?? {} });
}
