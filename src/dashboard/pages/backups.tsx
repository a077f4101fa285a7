/**
 * Backups: create, verify (the validation report), download, upload a bundle made elsewhere (with
 * its progress), delete, a dry-run restore with its report, and a restore with its parts chosen and
 * the backup's id typed in. Permissions as the routes': verify BACKUPS_VIEW; create and delete
 * BACKUPS_MANAGE; download, upload and restore BACKUPS_RESTORE (a bundle is the whole database). A
 * bundle this cluster did not authenticate (`foreign`) is restored with `foreign: true`, which the
 * controller allows an ADMIN only. A restore replaces the users, so the page then asks to sign in again.
 */
import { useState } from "preact/hooks";
import { useApp, useQuery } from "../lib/app-context.js";
import { errorMessage } from "../lib/api.js";
import { download } from "../lib/download.js";
import { bytes, time } from "../lib/format.js";
import type { Backup } from "../lib/types.js";
import { Badge, Button, Can, PageHeader, QueryView } from "../ui/controls.js";
import { Dialog, useConfirm } from "../ui/dialog.js";
import { DataTable } from "../ui/table.js";
import { BackupUpload } from "./backup-upload.js";
import { ReportView, RestoreDialog } from "./backup-restore.js";

interface Report {
  title: string;
  body: Record<string, unknown>;
}

export function BackupsPage() {
  const { api, toast } = useApp();
  const backups = useQuery<Backup[]>("backups", { load: () => api.get("backups"), pollMs: 30_000 });
  const [report, setReport] = useState<Report | null>(null);
  const [restoring, setRestoring] = useState<Backup | null>(null);
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
  const path = (b: Backup) => `backups/${encodeURIComponent(b.id)}`;
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
              {
                title: "Id",
                render: (b) => (
                  <>
                    <code>{b.id}</code>{" "}
                    {b.foreign ? (
                      <Badge tone="warn" title="Not authenticated by this cluster: restored only by an ADMIN, as foreign">
                        foreign
                      </Badge>
                    ) : null}
                  </>
                ),
              },
              { title: "Recorded", render: (b) => time(b.createdAt) },
              { title: "Size", className: "num", render: (b) => bytes(b.sizeBytes) },
              { title: "Store", render: (b) => `${b.profile} · ${b.documentStore} · ${b.mongoDocumentCount} documents` },
              {
                title: "Actions",
                render: (b) => (
                  <div class="actions">
                    <Button
                      perm="BACKUPS_VIEW"
                      onClick={() => run("Verify", async () => setReport({ title: `Verification of ${b.id}`, body: await api.post(`${path(b)}/verify`) }))}
                    >
                      Verify
                    </Button>
                    <Button perm="BACKUPS_RESTORE" onClick={() => run("Download", () => download(api, `${path(b)}/download`, `backup-${b.id}.tar.gz`))}>
                      Download
                    </Button>
                    <Button perm="BACKUPS_RESTORE" kind="danger" onClick={() => setRestoring(b)}>
                      Restore
                    </Button>
                    <Button
                      perm="BACKUPS_MANAGE"
                      kind="danger"
                      onClick={async () => {
                        const ok = await confirm({
                          title: `Delete backup ${b.id}`,
                          message: "The bundle is deleted from this controller.",
                          danger: true,
                          confirmLabel: "Delete",
                        });
                        if (ok)
                          await run("Delete", async () => {
                            await api.delete(path(b));
                            toast(`Backup ${b.id} deleted`, "success");
                            backups.refresh();
                          });
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
      <Can perm="BACKUPS_RESTORE">
        <BackupUpload
          onUploaded={(record) => {
            toast(`Backup ${record.id} uploaded${record.foreign ? " (foreign: from another cluster)" : ""}`, "success");
            backups.refresh();
          }}
        />
      </Can>
      <Dialog open={report !== null} title={report?.title ?? ""} onClose={() => setReport(null)} wide>
        {report ? <ReportView body={report.body} /> : null}
      </Dialog>
      <RestoreDialog backup={restoring} onClose={() => setRestoring(null)} />
      {confirmDialog}
    </>
  );
}
