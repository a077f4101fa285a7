/**
 * Security headers on every response. The dashboard's pages get a strict Content-Security-Policy:
 * scripts, styles, fonts and images only from this origin, no inline scripts or styles, requests
 * (fetch, EventSource) only to this origin, no framing; everything else (the API, `/metrics`) gets
 * `default-src 'none'`, since none of it is a page. Every response says `nosniff` and refuses to be
 * framed (`frame-ancestors 'none'` and, for older browsers, `X-Frame-Options: DENY`). A route that
 * set its own policy keeps it. docs/decisions/dashboard.md explains each directive.
 */
import type { MiddlewareHandler } from "hono";
import type { AppEnv } from "../types.js";

/** The dashboard's policy: same-origin assets and requests only, nothing inline, never framed. */
export const DASHBOARD_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "manifest-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

/** Responses that are not pages (JSON, streams, files) load nothing and are never framed. */
export const NON_PAGE_CSP = "default-src 'none'; frame-ancestors 'none'";

export const securityHeaders = (opts: { dashboardPrefix: string }): MiddlewareHandler<AppEnv> =>
  async function securityHeaders(c, next) {
    await next();
    const isDashboard = c.req.path === opts.dashboardPrefix || c.req.path.startsWith(`${opts.dashboardPrefix}/`);
    const set = (headers: Headers) => {
      headers.set("X-Content-Type-Options", "nosniff");
      headers.set("X-Frame-Options", "DENY");
      headers.set("Referrer-Policy", "no-referrer");
      if (!headers.has("Content-Security-Policy")) headers.set("Content-Security-Policy", isDashboard ? DASHBOARD_CSP : NON_PAGE_CSP);
    };
    try {
      set(c.res.headers);
    } catch {
      // Some responses (Response.redirect) have immutable headers: copy them into a mutable one.
      c.res = new Response(c.res.body, c.res);
      set(c.res.headers);
    }
  };
