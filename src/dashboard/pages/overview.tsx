/**
 * Overview: counts, readiness, leader and members, nodes by state, groups needing attention, recent
 * events. The counts come first (`GET overview`, computed by the controller); the group list behind
 * "needing attention" (every group) is asked for once they are on screen, so it does not compete
 * with them. Recent events re-render on their own, at most every {@link RECENT_EVENTS_RENDER_MS}.
 */
import { useEffect, useRef, useState } from "preact/hooks";
import { useApp, useQuery } from "../lib/app-context.js";
import { GROUPS_KEY, groupsQuery, NODES_KEY, nodesQuery, OVERVIEW_KEY, overviewQuery } from "../lib/queries.js";
import { href } from "../lib/router.js";
import { time } from "../lib/format.js";
import { groupStatus, type GroupListItem, type Member, type Node, type Overview as OverviewRecord, type Readiness } from "../lib/types.js";
import { describeEvent, type LiveState } from "../live/event-reducer.js";
import { Badge, Card, ErrorBox, PageHeader, QueryView, StateBadge } from "../ui/controls.js";

const CHECK_NAMES: Record<string, string> = {
  stateStore: "State store",
  coordinationStore: "Coordination store",
  scheduler: "Scheduler",
  platformModules: "Platform modules",
};

/** The recent events are drawn at most this often (a busy network publishes hundreds a second). */
export const RECENT_EVENTS_RENDER_MS = 250;

export function Overview() {
  const { api, can } = useApp();
  const counts = useQuery<OverviewRecord>(OVERVIEW_KEY, overviewQuery(api));
  const ready = useQuery<Readiness>("ready", {
    load: () =>
      api.get<Readiness>("system/ready").catch((err: unknown) => {
        // 503 NOT_READY still says which checks fail, but as an error envelope; show it as not ready.
        if ((err as { status?: number }).status === 503) return { status: "NOT_READY", checks: {} } as Readiness;
        throw err;
      }),
    pollMs: 10_000,
  });
  const cluster = useQuery<{ clusterId: string; leaderId: string | null; nodeId: string; memberCount: number }>(can("CLUSTER_VIEW") ? "cluster" : null, {
    load: () => api.get("cluster"),
    pollMs: 15_000,
  });
  const members = useQuery<{ members: Member[] }>(can("CLUSTER_VIEW") ? "cluster/members" : null, { load: () => api.get("cluster/members"), pollMs: 15_000 });
  const nodes = useQuery<Node[]>(can("nodes.view") ? NODES_KEY : null, nodesQuery(api));
  const countsShown = counts.data !== undefined || counts.error !== undefined;
  const groups = useQuery<GroupListItem[]>(can("groups.view") && countsShown ? GROUPS_KEY : null, groupsQuery(api));

  const attention = (groups.data ?? []).filter((g) => groupStatus(g) !== "UP");
  const byState = new Map<string, number>();
  for (const n of nodes.data ?? []) byState.set(n.state, (byState.get(n.state) ?? 0) + 1);

  return (
    <>
      <PageHeader title="Overview" />
      <ErrorBox error={counts.error} />
      <div class="stats" aria-label="Counts">
        {(
          [
            ["Nodes", counts.data?.nodeCount, "nodes"],
            ["Instances", counts.data?.instanceCount, "instances"],
            ["Players", counts.data?.playerCount, "players"],
            ["Groups", counts.data?.groupCount, "groups"],
          ] as const
        ).map(([label, value, page]) => (
          <a key={label} class="stat" href={href([page])} data-stat={label.toLowerCase()}>
            <div class="value">{value ?? "–"}</div>
            <div class="label">{label}</div>
          </a>
        ))}
      </div>
      <div class="grid">
        <Card title="Readiness">
          <QueryView state={ready}>
            {(r) => (
              <>
                <p>
                  <StateBadge state={r.status} />
                </p>
                <ul>
                  {Object.entries(r.checks).map(([name, ok]) => (
                    <li key={name}>
                      {CHECK_NAMES[name] ?? name}: <Badge tone={ok ? "ok" : "bad"}>{ok ? "ok" : "failing"}</Badge>
                    </li>
                  ))}
                </ul>
              </>
            )}
          </QueryView>
        </Card>
        {can("CLUSTER_VIEW") ? (
          <Card title="Cluster" actions={<a href={href(["cluster"])}>Details</a>}>
            <QueryView state={cluster}>
              {(c) => (
                <>
                  <p>
                    Leader: <strong data-leader>{c.leaderId ?? "none (no quorum?)"}</strong> · this controller: <code>{c.nodeId}</code>
                  </p>
                  <ul>
                    {(members.data?.members ?? []).map((m) => (
                      <li key={m.nodeId}>
                        <code>{m.nodeId}</code> {m.restAddr ? <span class="muted">{m.restAddr}</span> : null}{" "}
                        {m.leader ? <Badge tone="info">leader</Badge> : null}
                      </li>
                    ))}
                  </ul>
                </>
              )}
            </QueryView>
          </Card>
        ) : null}
        {can("nodes.view") ? (
          <Card title="Nodes" actions={<a href={href(["nodes"])}>All nodes</a>}>
            <QueryView state={nodes}>
              {(list) =>
                list.length === 0 ? (
                  <p class="muted">No node has joined yet. Create a join token on the Nodes page and start a daemon with it.</p>
                ) : (
                  <p>
                    {[...byState].map(([state, n]) => (
                      <span key={state}>
                        <StateBadge state={state} /> {n}{" "}
                      </span>
                    ))}
                  </p>
                )
              }
            </QueryView>
          </Card>
        ) : null}
        {can("groups.view") ? (
          <Card title="Groups needing attention" actions={<a href={href(["groups"])}>All groups</a>}>
            <QueryView state={groups}>
              {() =>
                attention.length === 0 ? (
                  <p class="muted">Every group is up.</p>
                ) : (
                  <ul>
                    {attention.slice(0, 10).map((g) => (
                      <li key={g.name}>
                        <a href={href(["groups", g.name])}>{g.name}</a> <StateBadge state={groupStatus(g)} />
                      </li>
                    ))}
                    {attention.length > 10 ? <li class="muted">and {attention.length - 10} more</li> : null}
                  </ul>
                )
              }
            </QueryView>
          </Card>
        ) : null}
      </div>
      <Card title="Recent events">
        <RecentEvents />
      </Card>
    </>
  );
}

/** The live state's recent events, redrawn when they change but at most every {@link RECENT_EVENTS_RENDER_MS}. */
function RecentEvents() {
  const { live } = useApp();
  const [recent, setRecent] = useState<LiveState["recent"]>(() => live.get().recent);
  const timer = useRef(0);
  const recentRef = useRef(recent);
  recentRef.current = recent;
  useEffect(() => {
    const show = () => {
      timer.current = 0;
      setRecent(live.get().recent);
    };
    const unsubscribe = live.subscribe(() => {
      if (timer.current === 0 && live.get().recent !== recentRef.current) timer.current = window.setTimeout(show, RECENT_EVENTS_RENDER_MS);
    });
    return () => {
      unsubscribe();
      window.clearTimeout(timer.current);
    };
  }, [live]);
  if (recent.length === 0) return <p class="muted">Events appear here as they happen.</p>;
  return (
    <ul class="events" aria-label="Recent events">
      {recent.map((e) => (
        <li key={e.sequence} data-type={e.type}>
          <time>{time(e.timestamp)}</time>
          <span>{describeEvent(e)}</span>
        </li>
      ))}
    </ul>
  );
}
