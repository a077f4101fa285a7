/** Sharing a redacted copy by link (crash reports, logs, diagnostics): expiry, public, burn after read. */
import { useState } from "preact/hooks";
import type { ShareResult } from "../lib/types.js";
import { Field } from "../ui/controls.js";
import { Dialog } from "../ui/dialog.js";

export interface ShareOptions {
  expiry: string;
  public: boolean;
  burnAfterRead: boolean;
}

export function ShareDialog({
  open,
  title,
  onClose,
  share,
  describeError,
}: {
  open: boolean;
  title: string;
  onClose(): void;
  share(options: ShareOptions): Promise<ShareResult>;
  describeError(err: unknown): string;
}) {
  const [expiry, setExpiry] = useState("1d");
  const [isPublic, setPublic] = useState(false);
  const [burn, setBurn] = useState(false);
  const [result, setResult] = useState<ShareResult | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const close = () => {
    setResult(null);
    setError(null);
    onClose();
  };
  return (
    <Dialog open={open} title={title} onClose={close}>
      {result ? (
        <>
          <p>Shared. Anyone with this link can read the redacted copy{result.expiresAt ? ` until ${new Date(result.expiresAt).toLocaleString()}` : ""}:</p>
          <p>
            <a href={result.url} target="_blank" rel="noreferrer noopener" data-share-url>
              {result.url}
            </a>
          </p>
          {result.password ? (
            <p>
              Password: <code>{result.password}</code>
            </p>
          ) : null}
          <div class="actions end">
            <button type="button" class="btn btn-primary" onClick={close}>
              Done
            </button>
          </div>
        </>
      ) : (
        <form
          onSubmit={async (e) => {
            e.preventDefault();
            setBusy(true);
            setError(null);
            try {
              setResult(await share({ expiry, public: isPublic, burnAfterRead: burn }));
            } catch (err) {
              setError(describeError(err));
            } finally {
              setBusy(false);
            }
          }}
        >
          <Field label="Expires after">
            <select value={expiry} onChange={(e) => setExpiry(e.currentTarget.value)}>
              <option value="1h">1 hour</option>
              <option value="1d">1 day</option>
              <option value="30d">30 days</option>
              <option value="never">never</option>
            </select>
          </Field>
          <label class="check">
            <input type="checkbox" checked={isPublic} onChange={(e) => setPublic(e.currentTarget.checked)} /> Public (no password)
          </label>
          <label class="check">
            <input type="checkbox" checked={burn} onChange={(e) => setBurn(e.currentTarget.checked)} /> Burn after reading
          </label>
          {error ? <p class="error-box">{error}</p> : null}
          <div class="actions end">
            <button type="submit" class="btn btn-primary" disabled={busy}>
              Share
            </button>
          </div>
        </form>
      )}
    </Dialog>
  );
}
