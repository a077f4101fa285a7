/**
 * Hash routing (`#/groups/lobby?tab=instances`): the page is always the dashboard's one
 * `index.html`, so a deep link works under any path prefix with no server rewrite, and relative
 * asset URLs always resolve against the dashboard's directory.
 */
import { useEffect, useState } from "preact/hooks";
import { parseRoute, type Route } from "./route-parse.js";

export { href, parseRoute, type Route } from "./route-parse.js";

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
