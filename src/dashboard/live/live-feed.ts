/**
 * The dashboard's one view of the event stream, shared by its tabs. The tab elected leader
 * ({@link TabElection}) runs the {@link EventStreamSession} and posts what it delivers on the shared
 * channel; the other tabs receive it from there. So a browser holds one stream per user and
 * controller however many tabs are open, and the controller's 100-stream cap is not spent on tabs.
 * A tab that becomes leader resumes the stream from the last sequence it saw, so nothing between
 * two leaders is lost (duplicates are dropped by sequence). Without a channel (a browser without
 * BroadcastChannel) the tab simply runs its own stream.
 *
 * Deliveries to the page are batched ({@link FEED_BATCH_MS}), so a burst of events costs one render.
 */
import { isElectionMessage, TabElection, type ElectionMessage } from "./tab-election.js";
import { EventStreamSession, type StreamTransport } from "./stream-session.js";
import type { FeedListener, LiveEvent, ResyncReason, StreamStatus, Timers } from "./types.js";

/** Events are handed to the page at most this often. */
export const FEED_BATCH_MS = 32;

/** What travels on the shared channel besides the election. */
export type FeedMessage =
  | ElectionMessage
  | { k: "events"; batch: LiveEvent[] }
  | { k: "resync"; reason: ResyncReason; lastSequence: number | null }
  | { k: "status"; status: StreamStatus };

/** A BroadcastChannel as the feed uses it. */
export interface FeedChannel {
  post(message: FeedMessage): void;
  listen(handler: (message: FeedMessage) => void): void;
  close(): void;
}

export interface LiveFeedOptions {
  transport: StreamTransport;
  timers: Timers;
  /** The tabs' channel; null runs a stream in this tab alone. */
  channel: FeedChannel | null;
  /** This tab's election id (random). */
  tabId: string;
  /** Where to resume when this tab first leads (a sequence handed over from another controller's page). */
  lastSequence?: number | null;
  random?: () => number;
}

export class LiveFeed {
  private readonly listeners = new Set<FeedListener>();
  private readonly election: TabElection | null;
  private session: EventStreamSession | null = null;
  private last: number | null;
  private pending: LiveEvent[] = [];
  private flushTimer: unknown = null;
  private currentStatus: StreamStatus = "connecting";
  private running = false;

  constructor(private readonly options: LiveFeedOptions) {
    this.last = options.lastSequence ?? null;
    const channel = options.channel;
    this.election = channel
      ? new TabElection({ id: options.tabId, post: (m) => channel.post(m), timers: options.timers, onRole: (role) => this.roleChanged(role === "leader") })
      : null;
    channel?.listen((message) => this.receive(message));
  }

  /** The last sequence this tab saw, from its own stream or the leader's. */
  get lastSequence(): number | null {
    return this.session?.lastSequence ?? this.last;
  }

  get status(): StreamStatus {
    return this.currentStatus;
  }

  /** Whether this tab holds the stream. */
  get leading(): boolean {
    return this.session !== null;
  }

  subscribe(listener: FeedListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    if (this.election) this.election.start();
    else this.roleChanged(true);
  }

  stop(): void {
    if (!this.running) return;
    this.running = false;
    this.election?.stop();
    this.roleChanged(false);
    this.options.channel?.close();
    if (this.flushTimer !== null) this.options.timers.clear(this.flushTimer);
    this.flushTimer = null;
  }

  private roleChanged(leader: boolean): void {
    if (leader && this.running && !this.session) {
      const session = new EventStreamSession({
        transport: this.options.transport,
        timers: this.options.timers,
        lastSequence: this.last,
        random: this.options.random,
        listener: {
          events: (batch) => {
            this.options.channel?.post({ k: "events", batch: [...batch] });
            this.accept(batch);
          },
          resync: (reason) => {
            this.last = session.lastSequence;
            this.options.channel?.post({ k: "resync", reason, lastSequence: session.lastSequence });
            this.resync(reason);
          },
          status: (status) => {
            this.options.channel?.post({ k: "status", status });
            this.setStatus(status);
          },
        },
      });
      this.session = session;
      session.start();
    } else if (!leader && this.session) {
      this.last = this.session.lastSequence;
      this.session.stop();
      this.session = null;
    }
  }

  private receive(message: FeedMessage): void {
    if (isElectionMessage(message)) {
      this.election?.receive(message);
      // A tab that just opened learns how the stream stands.
      if (message.k === "probe" && this.session) this.options.channel?.post({ k: "status", status: this.currentStatus });
      return;
    }
    if (this.session) return; // a leader's own stream is the truth; another leader's posts are stale
    if (message.k === "events") this.accept(message.batch);
    else if (message.k === "resync") {
      this.last = message.lastSequence;
      this.resync(message.reason);
    } else if (message.k === "status") this.setStatus(message.status);
  }

  private accept(batch: readonly LiveEvent[]): void {
    for (const event of batch) {
      if (this.last !== null && event.sequence <= this.last) continue;
      this.last = event.sequence;
      this.pending.push(event);
    }
    if (this.pending.length > 0 && this.flushTimer === null) this.flushTimer = this.options.timers.set(() => this.flush(), FEED_BATCH_MS);
  }

  private flush(): void {
    this.flushTimer = null;
    const batch = this.pending;
    this.pending = [];
    for (const listener of this.listeners) listener.events?.(batch);
  }

  private resync(reason: ResyncReason): void {
    // Events queued before the resync are older than what the refetch will show.
    this.pending = [];
    for (const listener of this.listeners) listener.resync?.(reason);
  }

  private setStatus(status: StreamStatus): void {
    if (status === this.currentStatus) return;
    this.currentStatus = status;
    for (const listener of this.listeners) listener.status?.(status);
  }
}
