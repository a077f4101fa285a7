/**
 * The frame around every page: the header (stream status, theme, user), the navigation (the pages
 * this user may see; a menu button on narrow screens), the routed page, and the failover watch.
 */
import { useEffect, useState } from "preact/hooks";
import { useApp, useStreamStatus } from "./lib/app-context.js";
import { useFailover } from "./lib/use-failover.js";
import { applyTheme, loadTheme, nextTheme } from "./lib/theme.js";
import { href, useRoute } from "./lib/router.js";
import { PAGES } from "./pages/registry.js";
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
  useEffect(() => setMenuOpen(false), [route.raw]);
  useEffect(() => {
    document.title = current ? `${current.label} · Cloud dashboard` : "Cloud dashboard";
  }, [current]);
  const Page = current?.component;
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
        <ul>
          {pages.map((p) => (
            <li key={p.id}>
              <a href={href([p.id])} aria-current={p === current ? "page" : undefined}>
                {p.label}
              </a>
            </li>
          ))}
        </ul>
      </nav>
      <main id="main" class="main" tabIndex={-1}>
        {Page ? <Page route={route} /> : <p>This user may see no page of the dashboard.</p>}
      </main>
    </div>
  );
}
