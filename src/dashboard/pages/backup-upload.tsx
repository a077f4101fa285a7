/**
 * Uploading a backup bundle made elsewhere (`POST /api/v1/backups/upload`, the tar.gz as the body,
 * permission BACKUPS_RESTORE): by drag and drop or a file picker, with the bytes sent so far. The
 * controller verifies the bundle before it records it (422 INVALID_BUNDLE otherwise) and marks one
 * this cluster did not authenticate as foreign.
 */
import { useState } from "preact/hooks";
import { useApp } from "../lib/app-context.js";
import { errorMessage } from "../lib/api.js";
import { bytes } from "../lib/format.js";
import type { Backup } from "../lib/types.js";
import { Card, Meter } from "../ui/controls.js";

export function BackupUpload({ onUploaded }: { onUploaded(record: Backup): void }) {
  const { api } = useApp();
  const [over, setOver] = useState(false);
  const [progress, setProgress] = useState<{ name: string; sent: number; total: number } | null>(null);
  const [error, setError] = useState<string | null>(null);
  const upload = async (file: File | undefined) => {
    if (!file || progress) return;
    setError(null);
    setProgress({ name: file.name, sent: 0, total: file.size });
    try {
      const body = file.type ? file : new Blob([file], { type: "application/gzip" });
      const record = await api.upload<Backup>("backups/upload", body, (sent, total) => setProgress({ name: file.name, sent, total }));
      onUploaded(record);
    } catch (err) {
      setError(`${file.name}: ${errorMessage(err)}`);
    } finally {
      setProgress(null);
    }
  };
  return (
    <Card title="Upload a bundle">
      <div
        class={over ? "dropzone over" : "dropzone"}
        onDragOver={(e) => {
          e.preventDefault();
          setOver(true);
        }}
        onDragLeave={() => setOver(false)}
        onDrop={(e) => {
          e.preventDefault();
          setOver(false);
          void upload(e.dataTransfer?.files[0]);
        }}
      >
        {progress ? (
          <span data-upload-progress>
            Uploading {progress.name}: {bytes(progress.sent)} of {bytes(progress.total)}{" "}
            <Meter used={progress.sent} total={progress.total} label="Upload progress" />
          </span>
        ) : (
          <>
            Drop a backup bundle (.tar.gz) here, or{" "}
            <label class="btn btn-plain">
              choose a file
              <input
                type="file"
                name="bundle"
                accept=".tar.gz,.tgz,application/gzip"
                class="sr-only"
                onChange={(e) => {
                  void upload(e.currentTarget.files?.[0]);
                  e.currentTarget.value = "";
                }}
              />
            </label>
          </>
        )}
      </div>
      <p class="muted">The controller verifies the bundle before it keeps it. A bundle of another cluster is kept as foreign: only an ADMIN restores it.</p>
      {error ? (
        <p class="error-box" role="alert">
          {error}
        </p>
      ) : null}
    </Card>
  );
}
