/**
 * The dashboard: the sign-in page until a token is held, then the signed-in app with its services
 * (API client, live feed shared between tabs, live query cache) built once per sign-in.
 */
import { useEffect, useMemo, useState } from "preact/hooks";
import { ApiClient, ApiError } from "./lib/api.js";
import { AppContext, type Services, type ToastKind } from "./lib/app-context.js";
import { browserTimers, eventStreamTransport, tabChannel, tabId } from "./lib/browser-live.js";
import { loadToken, saveToken, type Me } from "./lib/session.js";
import { QueryCache } from "./live/query-cache.js";
import { LiveFeed } from "./live/live-feed.js";
import { initialLiveState, reduceEvents, reduceResync, type LiveState } from "./live/event-reducer.js";
import { SignIn } from "./pages/sign-in.js";
import { Shell } from "./shell.js";
import { Toasts, type Toast } from "./ui/toasts.js";

export interface AppProps {
  apiBase: string;
  /** A stream position handed over by another controller's page (failover). */
  lastSequence: number | null;
}

export function App({ apiBase, lastSequence }: AppProps) {
  const [token, setToken] = useState(() => loadToken(apiBase));
  const [me, setMe] = useState<Me | null>(null);
  const [checkError, setCheckError] = useState<string | null>(null);
  const [toasts, setToasts] = useState<Toast[]>([]);

  const signOut = () => {
    saveToken(apiBase, null);
    setToken(null);
    setMe(null);
  };
  const api = useMemo(() => new ApiClient({ base: apiBase, token: () => token, onUnauthorized: signOut }), [apiBase, token]);

  useEffect(() => {
    if (!token) return;
    let cancelled = false;
    api
      .get<Me>("auth/me")
      .then((who) => !cancelled && setMe(who))
      .catch((err: unknown) => {
        if (cancelled) return;
        if (err instanceof ApiError && err.status === 401) signOut();
        else setCheckError(err instanceof Error ? err.message : String(err));
      });
    return () => {
      cancelled = true;
    };
  }, [api, token]);

  const toast = (message: string, kind: ToastKind = "info") => {
    const id = Math.random();
    setToasts((list) => [...list.slice(-4), { id, message, kind }]);
    window.setTimeout(() => setToasts((list) => list.filter((t) => t.id !== id)), kind === "error" ? 8_000 : 4_000);
  };

  let body;
  if (!token) {
    body = (
      <SignIn
        apiBase={apiBase}
        onSignedIn={(t) => {
          saveToken(apiBase, t);
          setCheckError(null);
          setToken(t);
        }}
      />
    );
  } else if (!me) {
    body = <main class="center">{checkError ? <p class="error-box">{checkError}</p> : <p class="muted">Signing in…</p>}</main>;
  } else {
    body = <SignedIn key={`${me.username}:${token}`} api={api} me={me} lastSequence={lastSequence} toast={toast} signOut={signOut} />;
  }
  return (
    <>
      {body}
      <Toasts toasts={toasts} />
    </>
  );
}

function SignedIn({
  api,
  me,
  lastSequence,
  toast,
  signOut,
}: {
  api: ApiClient;
  me: Me;
  lastSequence: number | null;
  toast: Services["toast"];
  signOut(): void;
}) {
  const services = useMemo<Services>(() => {
    const permissions = new Set(me.permissions);
    const cache = new QueryCache(browserTimers);
    const feed = new LiveFeed({
      transport: eventStreamTransport(api),
      timers: browserTimers,
      channel: tabChannel(api.base, me.username),
      tabId: tabId(),
      lastSequence,
    });
    let liveState: LiveState = initialLiveState;
    const liveListeners = new Set<() => void>();
    const notify = () => liveListeners.forEach((l) => l());
    feed.subscribe({
      events: (batch) => {
        liveState = reduceEvents(liveState, batch);
        cache.events(batch);
        notify();
      },
      resync: (reason) => {
        liveState = reduceResync(liveState, reason);
        cache.resync();
        notify();
      },
      status: (status) => {
        if (status === "unauthorized") signOut();
      },
    });
    return {
      api,
      me,
      can: (p) => permissions.has(p),
      cache,
      feed,
      live: {
        get: () => liveState,
        subscribe: (l) => {
          liveListeners.add(l);
          return () => liveListeners.delete(l);
        },
      },
      toast,
      signOut,
    };
  }, [api, me]);

  useEffect(() => {
    const { feed } = services;
    feed.start();
    const leave = () => feed.stop();
    window.addEventListener("pagehide", leave);
    return () => {
      window.removeEventListener("pagehide", leave);
      feed.stop();
    };
  }, [services]);

  return (
    <AppContext.Provider value={services}>
      <Shell />
    </AppContext.Provider>
  );
}
