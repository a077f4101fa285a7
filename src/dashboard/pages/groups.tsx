/**
 * Groups: the list (the CLI's status, filter and sort; every group in one windowed table), create,
 * and a group's own page. The list stays live through the `groups` query (lib/queries.ts).
 */
import { useState } from "preact/hooks";
import { useApp, useQuery } from "../lib/app-context.js";
import { GROUPS_KEY, groupsQuery } from "../lib/queries.js";
import { href, navigate, type Route } from "../lib/router.js";
import { groupStatus, type GroupListItem } from "../lib/types.js";
import { Button, Field, PageHeader, QueryView, StateBadge } from "../ui/controls.js";
import { Dialog } from "../ui/dialog.js";
import { WindowedTable } from "../ui/table.js";
import { CreateGroupForm } from "./group-form.js";
import { GroupDetail } from "./group-detail.js";

type SortKey = "name" | "players" | "instances";

/** The CLI's `group list --sort`: by name, or descending by players or running instances. */
export function sortGroups(rows: readonly GroupListItem[], by: SortKey): GroupListItem[] {
  const out = [...rows];
  if (by === "players") out.sort((a, b) => b.totalPlayers - a.totalPlayers || a.name.localeCompare(b.name));
  else if (by === "instances") out.sort((a, b) => b.runningInstances - a.runningInstances || a.name.localeCompare(b.name));
  else out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return out;
}

export function GroupsPage({ route }: { route: Route }) {
  if (route.parts[1]) return <GroupDetail name={route.parts[1]} route={route} />;
  return <GroupList />;
}

function GroupList() {
  const { api } = useApp();
  const [filter, setFilter] = useState("");
  const [sort, setSort] = useState<SortKey>("name");
  const [creating, setCreating] = useState(false);
  const groups = useQuery<GroupListItem[]>(GROUPS_KEY, groupsQuery(api));
  return (
    <>
      <PageHeader
        title="Groups"
        actions={
          <Button kind="primary" perm="groups.create" onClick={() => setCreating(true)}>
            Create group
          </Button>
        }
      />
      <div class="filters">
        <Field label="Filter">
          <input type="search" placeholder="name or platform" value={filter} onInput={(e) => setFilter(e.currentTarget.value)} />
        </Field>
        <Field label="Sort by">
          <select value={sort} onChange={(e) => setSort(e.currentTarget.value as SortKey)}>
            <option value="name">name</option>
            <option value="players">players</option>
            <option value="instances">running instances</option>
          </select>
        </Field>
      </div>
      <QueryView state={groups}>
        {(all) => {
          const needle = filter.toLowerCase();
          const rows = sortGroups(
            all.filter((g) => !needle || g.name.toLowerCase().includes(needle) || g.platform.toLowerCase().includes(needle)),
            sort,
          );
          return (
            <>
              <p class="muted" data-count={rows.length}>
                {rows.length === all.length ? `${all.length} groups` : `${rows.length} of ${all.length} groups`}
              </p>
              <WindowedTable
                label="Groups"
                rows={rows}
                rowKey={(g) => g.name}
                empty={all.length === 0 ? "No group yet." : "No group matches."}
                columns={[
                  { title: "Name", render: (g) => <a href={href(["groups", g.name])}>{g.name}</a> },
                  { title: "Status", render: (g) => <StateBadge state={groupStatus(g)} /> },
                  { title: "Platform", render: (g) => `${g.platform}${g.platformVersion ? ` ${g.platformVersion}` : ""}` },
                  { title: "Scaling", render: (g) => g.scalingMode },
                  { title: "Running", className: "num", render: (g) => `${g.runningInstances} (${g.minInstances}–${g.maxInstances})` },
                  { title: "Players", className: "num", render: (g) => g.totalPlayers },
                ]}
              />
            </>
          );
        }}
      </QueryView>
      <Dialog open={creating} title="Create group" onClose={() => setCreating(false)} wide>
        <CreateGroupForm
          onDone={(name) => {
            setCreating(false);
            if (name) navigate(href(["groups", name]));
          }}
        />
      </Dialog>
    </>
  );
}
