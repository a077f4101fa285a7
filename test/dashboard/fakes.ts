/**
 * Fakes for the dashboard's live layer: timers on the shared fake clock, a stream transport whose
 * connections the test drives frame by frame, and a broadcast bus standing in for a BroadcastChannel
 * between tabs (delivery to every other tab, asynchronously, like the real one).
 */
import { FakeClock } from "../support/fake-clock.js";
import type { StreamHandlers, StreamTransport } from "../../src/dashboard/live/stream-session.js";
import type { FeedChannel, FeedMessage } from "../../src/dashboard/live/live-feed.js";
import type { LiveEvent, Timers } from "../../src/dashboard/live/types.js";

export function fakeTimers(clock: FakeClock): Timers {
  return {
    set: (fn, ms) => clock.setTimeout(fn, ms),
    clear: (handle) => (handle as { cancel(): void }).cancel(),
    now: () => clock.nowMs(),
  };
}

/** Lets pending promise callbacks run (the ticket request is async). */
export const settle = async () => {
  for (let i = 0; i < 5; i++) await Promise.resolve();
};

export interface OpenedStream {
  ticket: string;
  lastSequence: number | null;
  handlers: StreamHandlers;
  closed: boolean;
}

export class FakeTransport implements StreamTransport {
  readonly opened: OpenedStream[] = [];
  tickets = 0;
  /** The next ticket requests fail with these statuses, in order. */
  failures: number[] = [];

  async ticket(): Promise<string> {
    const status = this.failures.shift();
    if (status !== undefined) throw Object.assign(new Error(`HTTP ${status}`), { status });
    return `ticket-${++this.tickets}`;
  }

  open(ticket: string, lastSequence: number | null, handlers: StreamHandlers): { close(): void } {
    const stream: OpenedStream = { ticket, lastSequence, handlers, closed: false };
    this.opened.push(stream);
    return { close: () => (stream.closed = true) };
  }

  get last(): OpenedStream {
    return this.opened[this.opened.length - 1];
  }
}

export const event = (sequence: number, type = "GROUP_UPDATED", data: Record<string, unknown> = { groupName: "lobby" }): LiveEvent => ({
  type,
  sequence,
  source: "controller",
  timestamp: "2026-01-01T00:00:00.000Z",
  data,
});

export const frame = (e: LiveEvent | Record<string, unknown>) => JSON.stringify(e);

/** A BroadcastChannel between tabs: each post reaches every other member on a later microtask. */
export class FakeBus {
  private readonly members = new Set<{ handler: ((m: FeedMessage) => void) | null }>();
  posted = 0;

  channel(): FeedChannel {
    const member: { handler: ((m: FeedMessage) => void) | null } = { handler: null };
    this.members.add(member);
    return {
      post: (message) => {
        if (!this.members.has(member)) return; // closed: a killed tab says nothing more
        this.posted++;
        const copy = structuredClone(message);
        for (const other of this.members) if (other !== member) queueMicrotask(() => other.handler?.(copy));
      },
      listen: (handler) => (member.handler = handler),
      close: () => this.members.delete(member),
    };
  }
}
