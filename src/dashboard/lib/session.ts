/**
 * The sign-in: the token lives in this tab's sessionStorage (never in a cookie, so no request is
 * authenticated by the browser on its own and there is nothing for a forged cross-site request to
 * ride on), keyed by the API address. Closing the tab forgets it. A page opened from another
 * controller's dashboard during a failover receives the token once in its URL fragment (which
 * browsers never send to a server), stores it, and removes it from the address bar at once.
 */

export interface Me {
  username: string;
  kind: string;
  roles: string[];
  permissions: string[];
}

const storageKey = (apiBase: string) => `cloud.dashboard.token:${apiBase}`;

export function loadToken(apiBase: string): string | null {
  try {
    return sessionStorage.getItem(storageKey(apiBase));
  } catch {
    return null;
  }
}

export function saveToken(apiBase: string, token: string | null): void {
  try {
    if (token) sessionStorage.setItem(storageKey(apiBase), token);
    else sessionStorage.removeItem(storageKey(apiBase));
  } catch {
    // Storage refused (private mode): the token stays in memory only.
  }
}

/** What a failover hands to the next controller's page: the token and where the stream was. */
export interface Handoff {
  token: string;
  lastSequence: number | null;
}

const HANDOFF_PARAM = "handoff";

/** The fragment route with a handoff appended (`#/groups?handoff=…`). */
export function withHandoff(route: string, handoff: Handoff): string {
  const value = encodeURIComponent(JSON.stringify(handoff));
  return `${route}${route.includes("?") ? "&" : "?"}${HANDOFF_PARAM}=${value}`;
}

/** Takes a handoff out of a fragment: the handoff (if any) and the fragment without it. */
export function takeHandoff(hash: string): { handoff: Handoff | null; hash: string } {
  const at = hash.indexOf("?");
  if (at < 0) return { handoff: null, hash };
  const params = new URLSearchParams(hash.slice(at + 1));
  const raw = params.get(HANDOFF_PARAM);
  if (raw === null) return { handoff: null, hash };
  params.delete(HANDOFF_PARAM);
  const rest = params.toString();
  const cleaned = hash.slice(0, at) + (rest ? `?${rest}` : "");
  try {
    const parsed = JSON.parse(raw) as Partial<Handoff>;
    if (typeof parsed.token !== "string" || parsed.token === "") return { handoff: null, hash: cleaned };
    const lastSequence = typeof parsed.lastSequence === "number" && Number.isInteger(parsed.lastSequence) ? parsed.lastSequence : null;
    return { handoff: { token: parsed.token, lastSequence }, hash: cleaned };
  } catch {
    return { handoff: null, hash: cleaned };
  }
}
