/** Parsing and building the dashboard's fragment routes (pure; lib/router.ts binds them to the page). */

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
