/** The audit log: keyset pages (newest first) filtered by user, action and resource type; each entry's details and before/after. */
import { useState } from "preact/hooks";
import { useApp, useQuery } from "../lib/app-context.js";
import { time } from "../lib/format.js";
import { href, navigate, type Route } from "../lib/router.js";
import type { AuditEntry, KeysetPage } from "../lib/types.js";
import { Field, PageHeader, QueryView } from "../ui/controls.js";
import { DataTable, KeysetPager } from "../ui/table.js";

const ENTRIES_PER_PAGE = 50;

const pretty = (text: string | null | undefined) => {
  if (!text) return "";
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
};

export function AuditPage({ route }: { route: Route }) {
  const { api } = useApp();
  const username = route.query.get("username") ?? "";
  const action = route.query.get("action") ?? "";
  const resourceType = route.query.get("resourceType") ?? "";
  const [cursors, setCursors] = useState<string[]>([]);
  const cursor = cursors.at(-1) ?? "";
  const set = (key: string, value: string) => {
    setCursors([]);
    navigate(href(["audit"], { username, action, resourceType, [key]: value }), true);
  };
  // Writes show up here without a stream event: the first page refreshes every few seconds.
  const page = useQuery<KeysetPage<AuditEntry>>(`audit?u=${username}&a=${action}&r=${resourceType}&c=${cursor}`, {
    load: () => api.get("audit", { cursor, pageSize: ENTRIES_PER_PAGE, username, action, resourceType }),
    pollMs: cursor ? undefined : 5_000,
  });
  return (
    <>
      <PageHeader title="Audit log" />
      <form class="filters" role="search" onSubmit={(e) => e.preventDefault()}>
        <Field label="User">
          <input name="username" value={username} onChange={(e) => set("username", e.currentTarget.value.trim())} />
        </Field>
        <Field label="Action" hint="e.g. group.update">
          <input name="action" value={action} onChange={(e) => set("action", e.currentTarget.value.trim())} />
        </Field>
        <Field label="Resource type" hint="e.g. group, node">
          <input name="resourceType" value={resourceType} onChange={(e) => set("resourceType", e.currentTarget.value.trim())} />
        </Field>
      </form>
      <QueryView state={page}>
        {(p) => (
          <>
            <DataTable
              label="Audit entries"
              rows={p.data}
              rowKey={(e) => e._id}
              empty="No entry matches."
              columns={[
                { title: "When", render: (e) => time(e.createdAt) },
                { title: "User", render: (e) => e.username },
                { title: "Action", render: (e) => <code>{e.action}</code> },
                { title: "Resource", render: (e) => `${e.resourceType} ${e.resourceId}` },
                { title: "From", render: (e) => e.ipAddress },
                {
                  title: "Details",
                  render: (e) =>
                    e.details !== "{}" || e.before || e.after ? (
                      <details>
                        <summary>show</summary>
                        {e.details !== "{}" ? <pre class="log-tail">{pretty(e.details)}</pre> : null}
                        {e.before ? (
                          <>
                            <strong>Before</strong>
                            <pre class="log-tail">{pretty(e.before)}</pre>
                          </>
                        ) : null}
                        {e.after ? (
                          <>
                            <strong>After</strong>
                            <pre class="log-tail">{pretty(e.after)}</pre>
                          </>
                        ) : null}
                      </details>
                    ) : null,
                },
              ]}
            />
            <KeysetPager cursors={cursors} next={p.nextCursor} total={p.total} shown={p.data.length} onPage={setCursors} />
          </>
        )}
      </QueryView>
    </>
  );
}
