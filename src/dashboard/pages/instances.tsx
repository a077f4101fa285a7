/**
 * Instances: a filtered list read a page at a time (keyset paging), windowed, live: a state change
 * is patched into its row at once; the page is fetched again only when an event may change which
 * instances it holds (a new instance, or any change while the list is filtered by state).
 */
import { useState } from "preact/hooks";
import { useApp, useQuery } from "../lib/app-context.js";
import { href, navigate, type Route } from "../lib/router.js";
import { duration } from "../lib/format.js";
import type { Instance, KeysetPage } from "../lib/types.js";
import type { LiveEvent } from "../live/types.js";
import { patchInstanceRows } from "../live/event-reducer.js";
import { Field, PageHeader, QueryView, StateBadge } from "../ui/controls.js";
import { KeysetPager, WindowedTable } from "../ui/table.js";
import { InstanceDetail } from "./instance-detail.js";

const STATES = ["", "SCHEDULED", "PREPARING", "STARTING", "RUNNING", "DRAINING", "STOPPING", "STOPPED", "CRASHED"];
/** Instances per page (the table renders those in view). */
const INSTANCES_PER_PAGE = 200;

/**
 * Whether `event` may change which instances a page filtered by `group` and `state` holds: a new
 * instance (no old state) of a shown group, or, under a state filter, any state change of one.
 */
export function changesInstancePage(event: LiveEvent, group: string, state: string): boolean {
  if (event.type !== "INSTANCE_STATE_CHANGED") return false;
  if (group && event.data.group !== group) return false;
  return Boolean(state) || !event.data.oldState;
}

export function InstancesPage({ route }: { route: Route }) {
  if (route.parts[1]) return <InstanceDetail id={route.parts[1]} />;
  return <InstanceList route={route} />;
}

function InstanceList({ route }: { route: Route }) {
  const { api } = useApp();
  const group = route.query.get("group") ?? "";
  const node = route.query.get("node") ?? "";
  const state = route.query.get("state") ?? "";
  const [cursors, setCursors] = useState<string[]>([]);
  const cursor = cursors.at(-1) ?? "";
  const setFilter = (name: string, value: string) => {
    setCursors([]);
    navigate(href(["instances"], { group, node, state, [name]: value }), true);
  };
  const key = `services?group=${group}&node=${node}&state=${state}&cursor=${cursor}`;
  const page = useQuery<KeysetPage<Instance>>(key, {
    load: () => api.get("services", { group, node, state, cursor, pageSize: INSTANCES_PER_PAGE }),
    watch: (e) => changesInstancePage(e, group, state),
    patch: (p, batch) => {
      const data = patchInstanceRows(p.data, batch);
      return data === p.data ? p : { ...p, data: [...data] };
    },
    replay: true,
    minIntervalMs: 1_000,
  });
  return (
    <>
      <PageHeader title="Instances" />
      <form class="filters" role="search" onSubmit={(e) => e.preventDefault()}>
        <Field label="Group">
          <input name="group" value={group} onChange={(e) => setFilter("group", e.currentTarget.value.trim())} placeholder="any" />
        </Field>
        <Field label="Node">
          <input name="node" value={node} onChange={(e) => setFilter("node", e.currentTarget.value.trim())} placeholder="any" />
        </Field>
        <Field label="State">
          <select name="state" value={state} onChange={(e) => setFilter("state", e.currentTarget.value)}>
            {STATES.map((s) => (
              <option key={s} value={s}>
                {s || "any"}
              </option>
            ))}
          </select>
        </Field>
      </form>
      <QueryView state={page}>
        {(p) => (
          <>
            <KeysetPager cursors={cursors} next={p.nextCursor} total={p.total} shown={p.data.length} onPage={setCursors} />
            <WindowedTable
              label="Instances"
              rows={p.data}
              rowKey={(i) => i.id}
              empty="No instance matches."
              columns={[
                { title: "Instance", render: (i) => <a href={href(["instances", i.id])}>{i.id}</a> },
                { title: "Group", render: (i) => <a href={href(["groups", i.group])}>{i.group}</a> },
                { title: "State", render: (i) => <StateBadge state={i.state} /> },
                { title: "Node", render: (i) => i.node || "–" },
                { title: "Port", className: "num", render: (i) => i.port },
                { title: "Players", className: "num", render: (i) => i.playerCount },
                { title: "Uptime", render: (i) => duration(i.uptimeMs) },
              ]}
            />
          </>
        )}
      </QueryView>
    </>
  );
}
