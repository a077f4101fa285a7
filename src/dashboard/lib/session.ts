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
