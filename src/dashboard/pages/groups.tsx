/** Groups: the list with the CLI's status, filter and pages; create; a group's own page. */
import { useState } from "preact/hooks";
import { ofTypes, useApp, useQuery } from "../lib/app-context.js";
import { href, navigate, type Route } from "../lib/router.js";
import { groupStatus, type GroupListItem } from "../lib/types.js";
import { Button, Field, PageHeader, QueryView, StateBadge } from "../ui/controls.js";
import { Dialog } from "../ui/dialog.js";
import { DataTable } from "../ui/table.js";
import { CreateGroupForm } from "./group-form.js";
import { GroupDetail } from "./group-detail.js";

/** Rows shown per page of the list (a network may have a thousand groups). */
const GROUPS_PER_PAGE = 100;

export function GroupsPage({ route }: { route: Route }) {
  if (route.parts[1]) return <GroupDetail name={route.parts[1]} route={route} />;
  return <GroupList />;
}

function GroupList() {
  const { api } = useApp();
  const [filter, setFilter] = useState("");
  const [page, setPage] = useState(0);
  const [creating, setCreating] = useState(false);
  const groups = useQuery<GroupListItem[]>("groups", {
    load: () => api.get("groups"),
    watch: ofTypes("GROUP_*", "INSTANCE_STATE_CHANGED"),
  });
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
          <input
            type="search"
            placeholder="name or platform"
            value={filter}
            onInput={(e) => {
              setFilter(e.currentTarget.value);
              setPage(0);
            }}
          />
        </Field>
      </div>
      <QueryView state={groups}>
        {(all) => {
          const needle = filter.toLowerCase();
          const rows = all.filter((g) => !needle || g.name.toLowerCase().includes(needle) || g.platform.toLowerCase().includes(needle));
          const pages = Math.max(1, Math.ceil(rows.length / GROUPS_PER_PAGE));
          const current = Math.min(page, pages - 1);
          return (
            <>
              <DataTable
                label="Groups"
                rows={rows.slice(current * GROUPS_PER_PAGE, (current + 1) * GROUPS_PER_PAGE)}
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
              {pages > 1 ? (
                <nav class="pager" aria-label="Pages">
                  <span class="muted">
                    {rows.length} groups · page {current + 1} of {pages}
                  </span>
                  <button type="button" class="btn btn-plain" disabled={current === 0} onClick={() => setPage(current - 1)}>
                    ← Previous
                  </button>
                  <button type="button" class="btn btn-plain" disabled={current >= pages - 1} onClick={() => setPage(current + 1)}>
                    Next →
                  </button>
                </nav>
              ) : null}
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
