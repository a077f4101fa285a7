/**
 * Where the dashboard and the API are, found from the page's own address, so the same build works
 * when a controller serves it at `/ui/`, behind a reverse proxy at `/some/prefix/ui/`, and from
 * Vite's dev server: the API is `../api/v1/` relative to the dashboard's directory.
 */

/** The dashboard's directory URL (ends with `/`), without query or fragment. */
export function dashboardBase(pageHref: string): string {
  const url = new URL(pageHref);
  url.hash = "";
  url.search = "";
  if (!url.pathname.endsWith("/")) url.pathname = url.pathname.slice(0, url.pathname.lastIndexOf("/") + 1);
  return url.toString();
}

/** The API root (`…/api/v1/`) for a dashboard at `base`. */
export function apiBase(base: string): string {
  return new URL("../api/v1/", base).toString();
}
