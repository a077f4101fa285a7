/**
 * The live layer's browser parts: the stream over EventSource (ticket from `POST events/ticket`),
 * the tabs' BroadcastChannel, and the browser's timers. The EventSource is closed on any error and
 * the session decides what comes next: its own automatic reconnect would reuse a spent ticket.
 */
import type { ApiClient } from "./api.js";
import type { FeedChannel, FeedMessage } from "../live/live-feed.js";
import type { StreamHandlers, StreamTransport } from "../live/stream-session.js";
import type { Timers } from "../live/types.js";

export const browserTimers: Timers = {
  set: (fn, ms) => window.setTimeout(fn, ms),
  clear: (handle) => window.clearTimeout(handle as number),
  now: () => Date.now(),
};

/** Opens `url` as an EventSource and reports `connected`, `message`/`console` and errors. */
export function openEventSource(
  url: string,
  handlers: { open?(data: string): void; message(data: string, event: string, id: string): void; failed(message: string | null): void },
  messageEvents = ["message"],
) {
  const source = new EventSource(url);
  let done = false;
  const fail = (message: string | null) => {
    if (done) return;
    done = true;
    source.close();
    handlers.failed(message);
  };
  source.addEventListener("connected", (e) => handlers.open?.((e as MessageEvent<string>).data));
  for (const name of messageEvents)
    source.addEventListener(name, (e) => handlers.message((e as MessageEvent<string>).data, name, (e as MessageEvent<string>).lastEventId));
  source.addEventListener("error", (e) => {
    let message: string | null = null;
    if (e instanceof MessageEvent && typeof e.data === "string") {
      try {
        message = (JSON.parse(e.data) as { message?: string }).message ?? null;
      } catch {
        message = e.data;
      }
    }
    fail(message);
  });
  return {
    close: () => {
      done = true;
      source.close();
    },
  };
}

export function eventStreamTransport(api: ApiClient): StreamTransport {
  return {
    ticket: async () => (await api.post<{ ticket: string }>("events/ticket")).ticket,
    open: (ticket: string, lastSequence: number | null, handlers: StreamHandlers) =>
      openEventSource(api.url("events/stream", { ticket, lastSequence: lastSequence ?? undefined }), {
        open: (data) => {
          let latest = NaN;
          try {
            latest = Number((JSON.parse(data) as { latestSequence?: number }).latestSequence);
          } catch {
            // A connected frame without data: the latest is unknown.
          }
          handlers.connected(latest);
        },
        message: (data) => handlers.message(data),
        failed: (message) => handlers.failed(message),
      }),
  };
}

/** The tabs' channel for one user on one API; null where BroadcastChannel is missing. */
export function tabChannel(apiBase: string, username: string): FeedChannel | null {
  if (typeof BroadcastChannel === "undefined") return null;
  const channel = new BroadcastChannel(`cloud-dashboard:${apiBase}:${username}`);
  return {
    post: (message: FeedMessage) => {
      try {
        channel.postMessage(message);
      } catch {
        // Closed while the page unloads.
      }
    },
    listen: (handler) => (channel.onmessage = (e: MessageEvent<FeedMessage>) => handler(e.data)),
    close: () => channel.close(),
  };
}

/** A random id for this tab's election. */
export const tabId = (): string => `${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 10)}`;
