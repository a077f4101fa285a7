/**
 * Backups: create, verify (the validation report), download, a dry-run restore with its report,
 * and a restore that needs the backup's id typed in. A restore replaces the users, so the page then
 * asks to sign in again.
 */
import { useState } from "preact/hooks";
import { useApp, useQuery } from "../lib/app-context.js";
import { errorMessage } from "../lib/api.js";
import { download } from "../lib/download.js";
import { bytes, time } from "../lib/format.js";
import type { Backup } from "../lib/types.js";
import { Badge, Button, PageHeader, QueryView } from "../ui/controls.js";
import { Dialog, useConfirm } from "../ui/dialog.js";
import { DataTable } from "../ui/table.js";

interface Report {
  title: string;
  body: Record<string, unknown>;
}

export function BackupsPage() {
  const { api, toast, signOut } = useApp();
  const backups = useQuery<Backup[]>("backups", { load: () => api.get("backups"), pollMs: 30_000 });
  const [report, setReport] = useState<Report | null>(null);
  const [busy, setBusy] = useState<string | null>(null);
  const [confirm, confirmDialog] = useConfirm();
  const run = async (label: string, fn: () => Promise<void>) => {
    setBusy(label);
    try {
      await fn();
    } catch (err) {
      toast(`${label}: ${errorMessage(err)}`, "error");
    } finally {
      setBusy(null);
    }
  };
  return (
    <>
      <PageHeader
        title="Backups"
        actions={
          <Button
            kind="primary"
            perm="BACKUPS_MANAGE"
            busy={busy === "Create backup"}
            onClick={() =>
              run("Create backup", async () => {
                const created = await api.post<Backup>("backups");
                toast(`Backup ${created.id} created (${bytes(created.sizeBytes)})`, "success");
                backups.refresh();
              })
            }
          >
            Create backup
          </Button>
        }
      />
      <QueryView state={backups}>
        {(list) => (
          <DataTable
            label="Backups"
            rows={list}
            rowKey={(b) => b.id}
            empty="No backup yet."
            columns={[
              { title: "Id", render: (b) => <code>{b.id}</code> },
              { title: "Created", render: (b) => time(b.createdAt) },
              { title: "Size", className: "num", render: (b) => bytes(b.sizeBytes) },
              { title: "Store", render: (b) => `${b.profile} · ${b.documentStore} · ${b.mongoDocumentCount} documents` },
              {
                title: "Actions",
                render: (b) => (
                  <div class="actions">
                    <Button
                      perm="BACKUPS_VIEW"
                      onClick={() =>
                        run("Verify", async () =>
                          setReport({ title: `Verification of ${b.id}`, body: await api.post(`backups/${encodeURIComponent(b.id)}/verify`) }),
                        )
                      }
                    >
                      Verify
                    </Button>
                    <Button
                      perm="BACKUPS_MANAGE"
                      onClick={() => run("Download", () => download(api, `backups/${encodeURIComponent(b.id)}/download`, `${b.id}.tar.gz`))}
                    >
                      Download
                    </Button>
                    <Button
                      perm="BACKUPS_RESTORE"
                      onClick={() =>
                        run("Dry run", async () =>
                          setReport({
                            title: `Dry-run restore of ${b.id}`,
                            body: await api.post("restore", { id: b.id, dryRun: true, filesystem: true, datastores: true }),
                          }),
                        )
                      }
                    >
                      Dry-run restore
                    </Button>
                    <Button
                      perm="BACKUPS_RESTORE"
                      kind="danger"
                      onClick={async () => {
                        const ok = await confirm({
                          title: `Restore ${b.id}`,
                          message:
                            "The cluster's data and files are replaced by this backup's. Users are restored too: everyone signs in again afterwards. Run a dry run first to see what changes.",
                          typed: b.id,
                          danger: true,
                          confirmLabel: "Restore",
                        });
                        if (!ok) return;
                        await run("Restore", async () => {
                          const body = await api.post<Record<string, unknown>>("restore", { id: b.id, dryRun: false, filesystem: true, datastores: true });
                          setReport({ title: `Restored ${b.id}`, body });
                          toast("Restore finished; sign in again", "success");
                          window.setTimeout(signOut, 4_000);
                        });
                      }}
                    >
                      Restore
                    </Button>
                  </div>
                ),
              },
            ]}
          />
        )}
      </QueryView>
      <Dialog open={report !== null} title={report?.title ?? ""} onClose={() => setReport(null)} wide>
        {report ? <ReportView body={report.body} /> : null}
      </Dialog>
      {confirmDialog}
    </>
  );
}

/** A verification or restore report: the verdict first, then every field. */
function ReportView({ body }: { body: Record<string, unknown> }) {
  const problems = Object.entries(body).filter(
    ([k, v]) => Array.isArray(v) && v.length > 0 && k !== "mongoCollections" && k !== "redisPrefixes" && k !== "mongoPrefixGroups",
  );
  return (
    <div data-report>
      {"valid" in body ? <p>{body.valid ? <Badge tone="ok">valid</Badge> : <Badge tone="bad">invalid</Badge>}</p> : null}
      {"dryRun" in body ? <p>{body.dryRun ? "Dry run: nothing was changed. This is what a restore would do:" : "Applied:"}</p> : null}
      {problems.length > 0 ? (
        <ul>
          {problems.map(([k, v]) => (
            <li key={k}>
              {k}: {(v as unknown[]).join(", ")}
            </li>
          ))}
        </ul>
      ) : null}
      <pre class="log-tail">{JSON.stringify(body, null, 2)}</pre>
    </div>
  );
}
