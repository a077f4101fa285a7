/**
 * One template: its files (browse, edit, upload, rename, delete), a search of its files, its layers,
 * its versions (rollback) and its variables; export and delete.
 */
import { useEffect, useState } from "preact/hooks";
import { useApp, useQuery } from "../lib/app-context.js";
import { errorMessage } from "../lib/api.js";
import { download } from "../lib/download.js";
import { bytes, short, time } from "../lib/format.js";
import { href, navigate, type Route } from "../lib/router.js";
import type { Template, TemplateVersion } from "../lib/types.js";
import { Badge, Button, Card, PageHeader, QueryView, Tabs } from "../ui/controls.js";
import { useConfirm } from "../ui/dialog.js";
import { DataTable } from "../ui/table.js";
import { TemplateFiles } from "./template-files.js";
import { TemplateLayers, TemplateSearch } from "./template-search.js";

export function TemplateDetail({ name, route }: { name: string; route: Route }) {
  const { api, toast } = useApp();
  const base = `templates/${encodeURIComponent(name)}`;
  const tab = route.query.get("tab") ?? "files";
  const template = useQuery<Template>(base, { load: () => api.get(base), watch: (e) => e.type === "TEMPLATE_UPDATED" && e.data.templateName === name });
  const [confirm, confirmDialog] = useConfirm();
  return (
    <>
      <p>
        <a href={href(["templates"])}>← Templates</a>
      </p>
      <QueryView state={template}>
        {(t) => (
          <>
            <PageHeader
              title={t.name}
              actions={
                <>
                  <Button
                    onClick={() => download(api, `${base}/export`, `${t.name}.tar.gz`).catch((err: unknown) => toast(`Export: ${errorMessage(err)}`, "error"))}
                  >
                    Export
                  </Button>
                  <Button
                    perm="templates.delete"
                    kind="danger"
                    onClick={async () => {
                      if (
                        !(await confirm({
                          title: `Delete template ${t.name}`,
                          message: "The template and every version of it are deleted.",
                          typed: t.name,
                          danger: true,
                          confirmLabel: "Delete",
                        }))
                      )
                        return;
                      try {
                        await api.delete(base);
                        toast(`Template ${t.name} deleted`, "success");
                        navigate(href(["templates"]));
                      } catch (err) {
                        toast(`Delete: ${errorMessage(err)}`, "error");
                      }
                    }}
                  >
                    Delete
                  </Button>
                </>
              }
            >
              <p class="muted">
                {t.description || "No description"} · {t.platform || "any platform"} · <code data-template-hash={t.hash}>{short(t.hash, 12)}</code> ·{" "}
                {bytes(t.sizeBytes)}
              </p>
            </PageHeader>
            <Tabs
              tabs={[
                ["files", "Files"],
                ["search", "Search"],
                ["layers", "Layers"],
                ["versions", "Versions"],
                ["variables", "Variables"],
              ]}
              current={tab}
              onSelect={(id) => navigate(href(["templates", t.name], { tab: id }), true)}
            />
            {tab === "files" ? <TemplateFiles template={t} route={route} onChanged={() => template.refresh()} /> : null}
            {tab === "search" ? <TemplateSearch template={t} /> : null}
            {tab === "layers" ? <TemplateLayers template={t} /> : null}
            {tab === "versions" ? <Versions template={t} onChanged={() => template.refresh()} /> : null}
            {tab === "variables" ? <Variables name={t.name} /> : null}
            {confirmDialog}
          </>
        )}
      </QueryView>
    </>
  );
}

function Versions({ template, onChanged }: { template: Template; onChanged(): void }) {
  const { api, toast } = useApp();
  const base = `templates/${encodeURIComponent(template.name)}`;
  const versions = useQuery<TemplateVersion[]>(`${base}/versions`, {
    load: () => api.get(`${base}/versions`),
    watch: (e) => e.type === "TEMPLATE_UPDATED" && e.data.templateName === template.name,
  });
  const [confirm, confirmDialog] = useConfirm();
  return (
    <Card>
      <QueryView state={versions}>
        {(list) => (
          <DataTable
            label="Versions"
            rows={list}
            rowKey={(v) => v.hash}
            columns={[
              { title: "#", className: "num", render: (v) => list.length - list.indexOf(v) },
              {
                title: "Hash",
                render: (v) => (
                  <>
                    <code>{short(v.hash, 12)}</code> {v.hash === template.hash ? <Badge tone="ok">current</Badge> : null}
                  </>
                ),
              },
              { title: "Size", className: "num", render: (v) => bytes(v.sizeBytes) },
              { title: "Created", render: (v) => time(v.createdAt) },
              {
                title: "Actions",
                render: (v) =>
                  v.hash === template.hash ? null : (
                    <div class="actions">
                      <Button
                        perm="templates.update"
                        onClick={async () => {
                          if (
                            !(await confirm({
                              title: "Roll back",
                              message: `Restore the files of version ${short(v.hash, 12)}? Running instances keep theirs until they restart.`,
                              confirmLabel: "Roll back",
                            }))
                          )
                            return;
                          try {
                            await api.post(`${base}/rollback`, { hash: v.hash });
                            toast(`Rolled back to ${short(v.hash)}`, "success");
                            onChanged();
                            versions.refresh();
                          } catch (err) {
                            toast(`Rollback: ${errorMessage(err)}`, "error");
                          }
                        }}
                      >
                        Roll back
                      </Button>
                      <Button
                        perm="templates.delete"
                        kind="danger"
                        onClick={async () => {
                          if (
                            !(await confirm({
                              title: "Delete version",
                              message: `Delete the snapshot ${short(v.hash, 12)}?`,
                              danger: true,
                              confirmLabel: "Delete",
                            }))
                          )
                            return;
                          try {
                            await api.delete(`${base}/versions/${v.hash}`);
                            versions.refresh();
                          } catch (err) {
                            toast(`Delete version: ${errorMessage(err)}`, "error");
                          }
                        }}
                      >
                        Delete
                      </Button>
                    </div>
                  ),
              },
            ]}
          />
        )}
      </QueryView>
      {confirmDialog}
    </Card>
  );
}

function Variables({ name }: { name: string }) {
  const { api, can, toast } = useApp();
  const base = `templates/${encodeURIComponent(name)}`;
  const current = useQuery<{ variables: Record<string, string> }>(`${base}/variables`, { load: () => api.get(`${base}/variables`) });
  const [rows, setRows] = useState<[string, string][]>([]);
  const [scan, setScan] = useState<{ name: string; defined: boolean; files: string[] }[] | null>(null);
  useEffect(() => {
    if (current.data) setRows(Object.entries(current.data.variables));
  }, [current.data]);
  const editable = can("templates.update");
  const set = (i: number, at: 0 | 1, value: string) => setRows(rows.map((r, j) => (j === i ? (at === 0 ? [value, r[1]] : [r[0], value]) : r)));
  return (
    <Card
      title="Variables ({{name}} in text files)"
      actions={
        <Button
          onClick={() =>
            api.get<{ variables: { name: string; defined: boolean; files: string[] }[] }>(`${base}/variables/scan`).then(
              (r) => setScan(r.variables),
              (err: unknown) => toast(errorMessage(err), "error"),
            )
          }
        >
          Scan files
        </Button>
      }
    >
      <QueryView state={current}>
        {() => (
          <form
            onSubmit={async (e) => {
              e.preventDefault();
              try {
                await api.put(`${base}/variables`, { variables: Object.fromEntries(rows.filter(([k]) => k.trim())) });
                toast("Variables saved", "success");
                current.refresh();
              } catch (err) {
                toast(`Variables: ${errorMessage(err)}`, "error");
              }
            }}
          >
            {rows.length === 0 ? <p class="muted">No variable.</p> : null}
            {rows.map(([k, v], i) => (
              <div class="actions" key={i}>
                <input aria-label="Name" value={k} disabled={!editable} onInput={(e) => set(i, 0, e.currentTarget.value)} />
                <input aria-label="Value" value={v} disabled={!editable} onInput={(e) => set(i, 1, e.currentTarget.value)} />
                {editable ? (
                  <button type="button" class="btn btn-plain" onClick={() => setRows(rows.filter((_, j) => j !== i))}>
                    Remove
                  </button>
                ) : null}
              </div>
            ))}
            {editable ? (
              <div class="actions end">
                <button type="button" class="btn btn-plain" onClick={() => setRows([...rows, ["", ""]])}>
                  Add variable
                </button>
                <button type="submit" class="btn btn-primary">
                  Save variables
                </button>
              </div>
            ) : null}
          </form>
        )}
      </QueryView>
      {scan ? (
        <>
          <h3>Placeholders found</h3>
          <DataTable
            label="Placeholders"
            rows={scan}
            rowKey={(s) => s.name}
            empty="No {{placeholder}} in the text files."
            columns={[
              { title: "Name", render: (s) => <code>{s.name}</code> },
              { title: "Defined", render: (s) => <Badge tone={s.defined ? "ok" : "warn"}>{s.defined ? "yes" : "no"}</Badge> },
              { title: "Files", render: (s) => s.files.join(", ") },
            ]}
          />
        </>
      ) : null}
    </Card>
  );
}
