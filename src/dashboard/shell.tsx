/**
 * The frame around every page: the header (stream status, theme, user), the navigation (the pages
 * this user may see, in sections; a menu button on narrow screens), the routed page (its code loaded
 * on first use; the other pages' code fetched in the background once it is shown), and the failover
 * watch.
 */
import { useEffect, useRef, useState } from "preact/hooks";
import { useApp, useStreamStatus } from "./lib/app-context.js";
import { useFailover } from "./lib/use-failover.js";
import { applyTheme, loadTheme, nextTheme } from "./lib/theme.js";
import { href, useRoute } from "./lib/router.js";
import { PAGES, type PageComponent, type PageDef } from "./pages/registry.js";
import { ErrorBox, Loading } from "./ui/controls.js";
import type { StreamStatus } from "./live/types.js";

const STATUS_TEXT: Record<StreamStatus, string> = {
  connecting: "Connecting…",
  live: "Live",
  reconnecting: "Reconnecting…",
  full: "Controller busy: retrying",
  denied: "No live updates (permission)",
  unauthorized: "Signed out",
  stopped: "Paused",
};

export function Shell() {
  const { me, can, signOut } = useApp();
  const route = useRoute();
  const status = useStreamStatus();
  const failover = useFailover(status);
  const [theme, setTheme] = useState(loadTheme);
  const [menuOpen, setMenuOpen] = useState(false);
  const pages = PAGES.filter((p) => can(p.perm));
  const current = pages.find((p) => p.id === route.parts[0]) ?? pages[0];
  const prefetched = useRef(false);
  const prefetchOnce = () => {
    if (prefetched.current) return;
    prefetched.current = true;
    prefetchPages(pages);
  };
  useEffect(() => setMenuOpen(false), [route.raw]);
  useEffect(() => {
    document.title = current ? `${current.label} · Cloud dashboard` : "Cloud dashboard";
  }, [current]);
  return (
    <div class={menuOpen ? "shell menu-open" : "shell"}>
      <a class="skip" href="#main" onClick={(e) => (e.preventDefault(), document.getElementById("main")?.focus())}>
        Skip to content
      </a>
      <header class="topbar">
        <button type="button" class="btn btn-plain menu-button" aria-expanded={menuOpen} aria-controls="nav" onClick={() => setMenuOpen(!menuOpen)}>
          ☰<span class="sr-only"> Menu</span>
        </button>
        <a class="brand" href={href(["overview"])}>
          Cloud
        </a>
        <span class={`stream stream-${status}`} role="status" aria-live="polite" data-status={status}>
          <span class="dot" aria-hidden="true" />
          {STATUS_TEXT[status]}
        </span>
        <span class="spacer" />
        <button
          type="button"
          class="btn btn-plain"
          title="Theme"
          onClick={() => {
            const next = nextTheme(theme);
            applyTheme(next);
            setTheme(next);
          }}
        >
          Theme: {theme}
        </button>
        <span class="user" title={me.roles.join(", ")}>
          {me.username}
        </span>
        <button type="button" class="btn btn-plain" onClick={signOut}>
          Sign out
        </button>
      </header>
      {failover ? (
        <p class="banner" role="alert">
          {failover}
        </p>
      ) : null}
      <nav id="nav" class="nav" aria-label="Pages">
        <div class="nav-inner">
          {[...new Set(pages.map((p) => p.section))].map((section) => (
            <div key={section} class="nav-section">
              <h2 class="nav-heading">{section}</h2>
              <ul>
                {pages
                  .filter((p) => p.section === section)
                  .map((p) => (
                    <li key={p.id}>
                      <a href={href([p.id])} aria-current={p === current ? "page" : undefined}>
                        {p.label}
                      </a>
                    </li>
                  ))}
              </ul>
            </div>
          ))}
        </div>
      </nav>
      <main id="main" class="main" tabIndex={-1}>
        {current ? <PageView key={current.id} page={current} route={route} onShown={prefetchOnce} /> : <p>This user may see no page of the dashboard.</p>}
      </main>
    </div>
  );
}

/** Fetches the code of the other pages once the browser is idle, so that moving to one is instant. */
function prefetchPages(pages: readonly PageDef[]): void {
  // Safari has no requestIdleCallback.
  const idle = (fn: () => void) => (typeof requestIdleCallback === "function" ? requestIdleCallback(fn, { timeout: 5_000 }) : setTimeout(fn, 1_000));
  idle(() => {
    for (const page of pages) void page.load().catch(() => undefined);
  });
}

/** The page's component once its code is loaded. */
function PageView({ page, route, onShown }: { page: PageDef; route: ReturnType<typeof useRoute>; onShown(): void }) {
  const [loaded, setLoaded] = useState<{ component: PageComponent } | { error: unknown } | null>(null);
  const [attempt, setAttempt] = useState(0);
  useEffect(() => {
    let cancelled = false;
    page.load().then(
      (component) => {
        if (cancelled) return;
        setLoaded({ component });
        onShown();
      },
      (error: unknown) => !cancelled && setLoaded({ error }),
    );
    return () => {
      cancelled = true;
    };
  }, [page, attempt]);
  if (loaded === null) return <Loading />;
  if ("error" in loaded)
    return (
      <>
        <ErrorBox error={loaded.error} />
        <button type="button" class="btn btn-plain" onClick={() => (setLoaded(null), setAttempt(attempt + 1))}>
          Try again
        </button>
      </>
    );
  const Page = loaded.component;
  return <Page route={route} />;
}
