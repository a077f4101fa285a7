/**
 * What a failover hands to the next controller's page (lib/use-failover.ts): the token and where
 * the stream was, in the URL fragment (browsers never send a fragment to a server), taken out of
 * the address bar by the page that receives it (main.tsx).
 */

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
