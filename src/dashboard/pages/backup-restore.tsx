/**
 * Restoring a backup: which parts (files, datastores), a dry run that shows what a restore would do
 * and changes nothing, then the restore itself once the backup's id is typed in. A foreign bundle is
 * sent with `foreign: true` (the controller allows that to an ADMIN only). A restore replaces the
 * users, so the page signs out a few seconds after it.
 */
import { useState } from "preact/hooks";
import { useApp } from "../lib/app-context.js";
import { errorMessage } from "../lib/api.js";
import type { Backup } from "../lib/types.js";
import { Badge, Button } from "../ui/controls.js";
import { Dialog } from "../ui/dialog.js";

/** A verification or restore report: the verdict first, then every field. */
export function ReportView({ body }: { body: Record<string, unknown> }) {
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

export function RestoreDialog({ backup, onClose }: { backup: Backup | null; onClose(): void }) {
  return (
    <Dialog open={backup !== null} title={backup ? `Restore ${backup.id}` : ""} onClose={onClose} wide>
      {backup ? <RestoreForm key={backup.id} backup={backup} /> : null}
    </Dialog>
  );
}

function RestoreForm({ backup }: { backup: Backup }) {
  const { api, toast, signOut } = useApp();
  const [filesystem, setFilesystem] = useState(true);
  const [datastores, setDatastores] = useState(true);
  const [typed, setTyped] = useState("");
  const [report, setReport] = useState<Record<string, unknown> | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState<"dry" | "restore" | null>(null);
  const foreign = backup.foreign === true;
  const send = async (dryRun: boolean) => {
    setBusy(dryRun ? "dry" : "restore");
    setError(null);
    try {
      const body = await api.post<Record<string, unknown>>("restore", { id: backup.id, dryRun, filesystem, datastores, foreign });
      setReport(body);
      if (!dryRun) {
        toast("Restore finished; sign in again", "success");
        window.setTimeout(signOut, 4_000);
      }
    } catch (err) {
      setError(errorMessage(err));
    } finally {
      setBusy(null);
    }
  };
  return (
    <form
      aria-label="Restore"
      onSubmit={(e) => {
        e.preventDefault();
        if (typed === backup.id) void send(false);
      }}
    >
      <p>
        The chosen parts of the cluster's state are replaced by this backup's. Restoring the datastores restores the users too: everyone signs in again
        afterwards. Run a dry run first to see what changes.
      </p>
      {foreign ? (
        <p class="notice">This bundle was not made by this cluster (or changed since): it is restored as foreign, which only an ADMIN may do.</p>
      ) : null}
      <fieldset>
        <legend>Parts</legend>
        <label class="check">
          <input type="checkbox" name="filesystem" checked={filesystem} onChange={(e) => setFilesystem(e.currentTarget.checked)} /> Files (templates and the
          data directory)
        </label>
        <label class="check">
          <input type="checkbox" name="datastores" checked={datastores} onChange={(e) => setDatastores(e.currentTarget.checked)} /> Datastores (the database and
          the key-value store)
        </label>
      </fieldset>
      <div class="actions">
        <Button busy={busy === "dry"} disabled={!filesystem && !datastores} onClick={() => void send(true)}>
          Dry run
        </Button>
      </div>
      {report ? <ReportView body={report} /> : null}
      <label class="field">
        <span class="field-label">
          Type <code>{backup.id}</code> to restore
        </span>
        <input name="confirmation" value={typed} onInput={(e) => setTyped(e.currentTarget.value)} autocomplete="off" />
      </label>
      {error ? <p class="error-box">{error}</p> : null}
      <div class="actions end">
        <Button type="submit" kind="danger" busy={busy === "restore"} disabled={typed !== backup.id || (!filesystem && !datastores)}>
          Restore
        </Button>
      </div>
    </form>
  );
}
