/**
 * What every page reaches through context: the API client, who is signed in and what they may do,
 * the live query cache, the live feed and its state, and notifications. Built once per sign-in by
 * `app.tsx`.
 */
import { createContext } from "preact";
import { useContext, useEffect, useRef, useState } from "preact/hooks";
import type { ApiClient } from "./api.js";
import type { Me } from "./session.js";
import type { QueryCache, QueryOptions, QueryState } from "../live/query-cache.js";
import type { LiveFeed } from "../live/live-feed.js";
import type { LiveState } from "../live/event-reducer.js";
import type { LiveEvent, StreamStatus } from "../live/types.js";

export type ToastKind = "info" | "success" | "error";

export interface LiveStore {
  get(): LiveState;
  subscribe(listener: () => void): () => void;
}

export interface Services {
  api: ApiClient;
  me: Me;
  can(permission: string): boolean;
  cache: QueryCache;
  feed: LiveFeed;
  live: LiveStore;
  toast(message: string, kind?: ToastKind): void;
  signOut(): void;
}

export const AppContext = createContext<Services | null>(null);

export function useApp(): Services {
  const services = useContext(AppContext);
  if (!services) throw new Error("useApp outside the signed-in app");
  return services;
}

export type QueryResult<T> = QueryState<T> & { refresh(): void };

/**
 * Watches a query while the component is mounted; `key` null watches nothing. The options of the
 * latest render are used (their functions may close over props).
 */
export function useQuery<T>(key: string | null, options: QueryOptions<T>): QueryResult<T> {
  const { cache } = useApp();
  const latest = useRef(options);
  latest.current = options;
  const [state, setState] = useState<QueryState<T>>(
    () => (key ? cache.peek<T>(key) : undefined) ?? { data: undefined, error: undefined, loading: key !== null, fetchedAt: null },
  );
  useEffect(() => {
    if (key === null) {
      setState({ data: undefined, error: undefined, loading: false, fetchedAt: null });
      return;
    }
    return cache.watch<T>(
      key,
      {
        load: () => latest.current.load(),
        watch: latest.current.watch ? (e) => latest.current.watch!(e) : undefined,
        patch: latest.current.patch ? (d, b) => latest.current.patch!(d, b) : undefined,
        replay: latest.current.replay,
        minIntervalMs: latest.current.minIntervalMs,
        pollMs: latest.current.pollMs,
      },
      setState,
    );
  }, [key]);
  return { ...state, refresh: () => key && cache.refresh(key) };
}

export function useStreamStatus(): StreamStatus {
  const { feed } = useApp();
  const [status, setStatus] = useState(feed.status);
  useEffect(() => {
    setStatus(feed.status);
    return feed.subscribe({ status: setStatus });
  }, [feed]);
  return status;
}

/** Calls `handler` with each batch of events while mounted. */
export function useEvents(handler: (batch: readonly LiveEvent[]) => void): void {
  const { feed } = useApp();
  const latest = useRef(handler);
  latest.current = handler;
  useEffect(() => feed.subscribe({ events: (batch) => latest.current(batch) }), [feed]);
}

/** Predicate helpers for `watch`. */
export const ofTypes =
  (...types: string[]) =>
  (e: LiveEvent): boolean =>
    types.some((t) => (t.endsWith("*") ? e.type.startsWith(t.slice(0, -1)) : e.type === t));
