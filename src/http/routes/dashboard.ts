/**
 * The dashboard, served under `/ui/` outside the API: `GET /ui/` is its page, `GET /ui/<file>` its
 * assets, and `/` and `/ui` redirect to `ui/` by a relative URL, so the same answers work behind a
 * reverse proxy that mounts the controller under a path prefix (the page finds the API relative to
 * its own address, see docs/decisions/dashboard.md). Files come from memory ({@link DashboardAssets})
 * with their cache headers and ETag (304 when the browser has the file), gzipped when the browser
 * takes it. Not part of the API, so the routes are not in the registry or the OpenAPI document.
 */
import type { Hono } from "hono";
import type { DashboardAssets } from "../dashboard-assets.js";
import type { AppEnv } from "../types.js";

/** The path the dashboard is served under. */
export const DASHBOARD_PATH = "/ui";

const NOT_BUILT =
  "The dashboard is not built. Run `npm run build` (or `npm run build:ui`) and restart the controller; `npm start` builds it when it is missing.\n";

/** Mounts `/`, `/ui` and `/ui/*`. */
export function dashboardRoutes(assets: DashboardAssets): (app: Hono<AppEnv>) => void {
  return (app) => {
    const redirect = (location: string) => new Response(null, { status: 302, headers: { location, "cache-control": "no-cache" } });
    app.get("/", () => redirect("ui/"));
    app.get(DASHBOARD_PATH, () => redirect("ui/"));
    app.get(`${DASHBOARD_PATH}/*`, (c) => {
      const path = c.req.path.slice(DASHBOARD_PATH.length + 1) || "index.html";
      if (assets.size === 0) return c.text(NOT_BUILT, 404, { "cache-control": "no-cache" });
      const asset = assets.get(path);
      if (!asset) return c.text(`Not found: ${path.slice(0, 200)}\n`, 404, { "cache-control": "no-cache" });
      const headers: Record<string, string> = {
        "content-type": asset.contentType,
        "cache-control": asset.cacheControl,
        etag: asset.etag,
        vary: "Accept-Encoding",
      };
      const ifNoneMatch = c.req.header("if-none-match");
      if (ifNoneMatch !== undefined && ifNoneMatch.split(",").some((tag) => tag.trim().replace(/^W\//, "") === asset.etag)) {
        return new Response(null, { status: 304, headers });
      }
      const acceptsGzip = /\bgzip\b/i.test(c.req.header("accept-encoding") ?? "");
      if (asset.gzip && acceptsGzip) {
        return new Response(asset.gzip, { status: 200, headers: { ...headers, "content-encoding": "gzip", "content-length": String(asset.gzip.byteLength) } });
      }
      return new Response(asset.body, { status: 200, headers: { ...headers, "content-length": String(asset.body.byteLength) } });
    });
  };
}
