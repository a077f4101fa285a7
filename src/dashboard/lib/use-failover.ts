/**
 * Watches the controller this page talks to. When the stream has been down for
 * {@link FAILOVER_AFTER_MS} and the controller does not answer at all, a page opened on a member's
 * own address moves to another member's dashboard (lib/failover.ts), handing over the sign-in and
 * the stream position. Returns a banner text while it is down or moving.
 */
import { useEffect, useRef, useState } from "preact/hooks";
import { useApp } from "./app-context.js";
import { failoverTarget, type MemberAddress } from "./failover.js";
import { loadToken } from "./session.js";
import { withHandoff } from "./handoff.js";
import type { StreamStatus } from "../live/types.js";

export const FAILOVER_AFTER_MS = 6_000;
const MEMBERS_REFRESH_MS = 30_000;
const TRIED_KEY = "cloud.dashboard.failover-tried";

export function useFailover(status: StreamStatus): string | null {
  const { api, can, feed } = useApp();
  const members = useRef<MemberAddress[]>([]);
  const [banner, setBanner] = useState<string | null>(null);

  useEffect(() => {
    if (!can("CLUSTER_VIEW")) return;
    const load = () =>
      api
        .get<{ members: MemberAddress[] }>("cluster/members")
        .then((r) => (members.current = r.members))
        .catch(() => undefined);
    void load();
    const timer = window.setInterval(load, MEMBERS_REFRESH_MS);
    return () => window.clearInterval(timer);
  }, [api]);

  useEffect(() => {
    if (status === "live") {
      setBanner(null);
      sessionStorage.removeItem(TRIED_KEY);
      return;
    }
    if (status !== "reconnecting") return;
    const timer = window.setTimeout(async () => {
      try {
        await api.get("system/version");
        return; // it answers: the stream will come back by itself
      } catch {
        // Unreachable: look for another member.
      }
      const tried = JSON.parse(sessionStorage.getItem(TRIED_KEY) ?? "[]") as string[];
      const target = failoverTarget(members.current, location.host, [...tried, location.host]);
      const token = loadToken(api.base);
      if (!target || !token) {
        setBanner("The controller cannot be reached. Retrying…");
        return;
      }
      setBanner(`The controller cannot be reached. Moving to ${target.restAddr}…`);
      sessionStorage.setItem(TRIED_KEY, JSON.stringify([...tried, location.host]));
      const route = location.hash.replace(/^#/, "") || "/overview";
      location.assign(`${location.protocol}//${target.restAddr}${location.pathname}#${withHandoff(route, { token, lastSequence: feed.lastSequence })}`);
    }, FAILOVER_AFTER_MS);
    return () => window.clearTimeout(timer);
  }, [status]);

  return banner;
}
