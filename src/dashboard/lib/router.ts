/**
 * Hash routing (`#/groups/lobby?tab=instances`): the page is always the dashboard's one
 * `index.html`, so a deep link works under any path prefix with no server rewrite, and relative
 * asset URLs always resolve against the dashboard's directory.
 */
import { useEffect, useState } from "preact/hooks";

export interface Route {
  /** Decoded path segments: `#/groups/lobby` is `["groups", "lobby"]`. */
  parts: string[];
  query: URLSearchParams;
  /** The fragment without `#`. */
  raw: string;
}

export function parseRoute(hash: string): Route {
  const raw = hash.replace(/^#/, "") || "/";
  const at = raw.indexOf("?");
  const path = at < 0 ? raw : raw.slice(0, at);
  const parts = path
    .split("/")
    .filter(Boolean)
    .map((p) => {
      try {
        return decodeURIComponent(p);
      } catch {
        return p;
      }
    });
  return { parts, query: new URLSearchParams(at < 0 ? "" : raw.slice(at + 1)), raw };
}

/** `#/a/b?x=1` for path segments (encoded) and a query. */
export function href(parts: (string | number)[], query: Record<string, string | number | undefined | null> = {}): string {
  const search = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null && v !== "") search.set(k, String(v));
  const q = search.toString();
  return `#/${parts.map((p) => encodeURIComponent(String(p))).join("/")}${q ? `?${q}` : ""}`;
}

export function navigate(to: string, replace = false): void {
  if (replace) history.replaceState(null, "", to);
  else location.hash = to.replace(/^#/, "");
  if (replace) window.dispatchEvent(new HashChangeEvent("hashchange"));
}

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(location.hash));
  useEffect(() => {
    const update = () => setRoute(parseRoute(location.hash));
    window.addEventListener("hashchange", update);
    return () => window.removeEventListener("hashchange", update);
  }, []);
  return route;
}
