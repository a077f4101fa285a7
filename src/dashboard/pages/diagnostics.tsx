/**
 * Diagnostics: the redacted support bundle to download (the tar.gz `cloudctl diagnostics bundle`
 * writes, assembled in the page; the JSON as answered where the browser cannot gzip) or share, and
 * the shares made so far (revocable).
 */
import { useState } from "preact/hooks";
import { useApp, useQuery } from "../lib/app-context.js";
import { errorMessage } from "../lib/api.js";
import { saveBlob } from "../lib/download.js";
import { diagnosticsTar, type DiagnosticsView } from "../lib/diagnostics-bundle.js";
import { canGzip, gzip } from "../lib/gzip.js";
import { time } from "../lib/format.js";
import type { ShareResult } from "../lib/types.js";
import { Badge, Button, Can, Card, Field, PageHeader, QueryView } from "../ui/controls.js";
import { DataTable } from "../ui/table.js";
import { ShareDialog } from "./share-dialog.js";

interface ShareRecord {
  id: string;
  kind: string;
  url: string;
  expiresAt: string | null;
  createdBy: string;
  createdAt: string;
  revokedAt: string | null;
  revocable: boolean;
}

export function DiagnosticsPage() {
  const { api, toast } = useApp();
  const [logLines, setLogLines] = useState("500");
  const [busy, setBusy] = useState(false);
  const [sharing, setSharing] = useState(false);
  return (
    <>
      <PageHeader title="Diagnostics" />
      <Card title="Support bundle">
        <p>
          The controller's readiness, overview, settings, configuration, key-value summary, leases and recent log (at DEBUG), with secrets removed by the
          controller: a tar.gz with the entries of <code>cloudctl diagnostics bundle</code>.
        </p>
        <Field label="Log lines" hint="0 leaves the log out">
          <input type="number" min="0" max="2000" value={logLines} onInput={(e) => setLogLines(e.currentTarget.value)} />
        </Field>
        <div class="actions">
          <Button
            kind="primary"
            busy={busy}
            onClick={async () => {
              setBusy(true);
              try {
                const lines = Number(logLines);
                const bundle = await api.get<DiagnosticsView>("system/diagnostics", { logLines: lines, logLevel: "DEBUG" });
                const now = Date.now();
                const stamp = new Date(now).toISOString().replace(/[:.]/g, "-");
                if (canGzip()) {
                  const controller = new URL("../../", api.base).href;
                  saveBlob(await gzip(diagnosticsTar(bundle, controller, lines, now)), `diagnostics-${stamp}.tar.gz`);
                } else {
                  saveBlob(new Blob([JSON.stringify(bundle, null, 2)], { type: "application/json" }), `diagnostics-${stamp}.json`);
                }
              } catch (err) {
                toast(`Diagnostics: ${errorMessage(err)}`, "error");
              } finally {
                setBusy(false);
              }
            }}
          >
            Download
          </Button>
          <Button perm="share.invoke" onClick={() => setSharing(true)}>
            Share
          </Button>
        </div>
      </Card>
      <Can perm="share.invoke">
        <Shares />
      </Can>
      <ShareDialog
        open={sharing}
        title="Share the diagnostics bundle"
        onClose={() => setSharing(false)}
        share={(options) => api.post<ShareResult>("system/diagnostics/share", { ...options, logLines: Number(logLines), logLevel: "DEBUG" })}
        describeError={errorMessage}
      />
    </>
  );
}

function Shares() {
  const { api, toast } = useApp();
  const shares = useQuery<ShareRecord[]>("shares", { load: () => api.get("shares", { limit: 100 }), pollMs: 15_000 });
  return (
    <Card title="Shared links">
      <QueryView state={shares}>
        {(list) => (
          <DataTable
            label="Shared links"
            rows={list}
            rowKey={(s) => s.id}
            empty="Nothing shared yet."
            columns={[
              { title: "What", render: (s) => s.kind },
              {
                title: "Link",
                render: (s) => (
                  <a href={s.url} target="_blank" rel="noreferrer noopener">
                    {s.url}
                  </a>
                ),
              },
              { title: "By", render: (s) => s.createdBy },
              { title: "Created", render: (s) => time(s.createdAt) },
              { title: "Expires", render: (s) => (s.expiresAt ? time(s.expiresAt) : "never") },
              {
                title: "",
                render: (s) =>
                  s.revokedAt ? (
                    <Badge>revoked</Badge>
                  ) : s.revocable ? (
                    <Button
                      kind="danger"
                      onClick={() =>
                        api.delete(`shares/${encodeURIComponent(s.id)}`).then(
                          () => shares.refresh(),
                          (err: unknown) => toast(`Revoke: ${errorMessage(err)}`, "error"),
                        )
                      }
                    >
                      Revoke
                    </Button>
                  ) : null,
              },
            ]}
          />
        )}
      </QueryView>
    </Card>
  );
}
