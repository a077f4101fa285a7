/**
 * Failover of a page that talks to one controller directly (its own address is a member's REST
 * address): when that controller is gone, the page moves to another member's dashboard and carries
 * the sign-in and the stream position with it (lib/session.ts, `withHandoff`). Behind a load
 * balancer or reverse proxy the page's address is none of the members', so it stays: the proxy
 * sends the reconnecting stream and the next requests to a healthy controller by itself.
 */

export interface MemberAddress {
  nodeId: string;
  restAddr: string;
  leader?: boolean;
}

/** The member to move to: the leader when it is another member, else the next one after this page's; null when the page is not on a member. */
export function failoverTarget(members: readonly MemberAddress[], pageHost: string, triedHosts: readonly string[] = []): MemberAddress | null {
  const usable = members.filter((m) => m.restAddr && !m.restAddr.endsWith(":0"));
  const here = usable.findIndex((m) => m.restAddr === pageHost);
  if (here < 0) return null;
  const others = [...usable.slice(here + 1), ...usable.slice(0, here)].filter((m) => !triedHosts.includes(m.restAddr));
  return others.find((m) => m.leader) ?? others[0] ?? null;
}
