/**
 * A template's files: a directory listing with breadcrumbs, a text editor for one file, uploads by
 * drag and drop or picker (ZIP archives extracted when asked), new file and folder, rename, delete,
 * extract and download. Every change makes a new version of the template.
 */
import { useEffect, useState } from "preact/hooks";
import { useApp, useQuery } from "../lib/app-context.js";
import { errorMessage } from "../lib/api.js";
import { download, fileForm } from "../lib/download.js";
import { bytes } from "../lib/format.js";
import { href, navigate, type Route } from "../lib/router.js";
import type { FileEntry, Template } from "../lib/types.js";
import { Button, Card, ErrorBox, Loading } from "../ui/controls.js";
import { useConfirm, usePrompt } from "../ui/dialog.js";
import { DataTable } from "../ui/table.js";

const join = (dir: string, name: string) => (dir ? `${dir}/${name}` : name);

/** Why a name typed for a new file, folder or rename target cannot be used, or null. */
export function checkRelativePath(path: string): string | null {
  if (path.startsWith("/")) return "A path inside the template: no leading /";
  if (path.split("/").some((part) => part === ".." || part === "." || part === "")) return "No empty, . or .. parts";
  return null;
}

export function TemplateFiles({ template, route, onChanged }: { template: Template; route: Route; onChanged(): void }) {
  const { api, can, toast } = useApp();
  const base = `templates/${encodeURIComponent(template.name)}`;
  const dir = route.query.get("path") ?? "";
  const file = route.query.get("file");
  const listing = useQuery<{ path: string; entries: FileEntry[] }>(`${base}/files?path=${dir}&hash=${template.hash}`, {
    load: () => api.get(`${base}/files`, { path: dir }),
  });
  const [confirm, confirmDialog] = useConfirm();
  const [ask, promptDialog] = usePrompt();
  const [over, setOver] = useState(false);
  const [extract, setExtract] = useState(true);
  const [busy, setBusy] = useState(false);
  const go = (query: Record<string, string>) => navigate(href(["templates", template.name], { tab: "files", ...query }), true);
  const editable = can("templates.update");

  const changed = (message: string) => {
    toast(message, "success");
    onChanged();
    listing.refresh();
  };
  const run = async (label: string, fn: () => Promise<unknown>) => {
    try {
      await fn();
      changed(`${label}: done`);
    } catch (err) {
      toast(`${label}: ${errorMessage(err)}`, "error");
    }
  };
  const upload = async (files: File[]) => {
    if (files.length === 0) return;
    setBusy(true);
    await run(`Upload of ${files.length} file(s)`, () =>
      api.send("POST", `${base}/files/upload`, fileForm(...files), { path: dir, extract: extract ? "true" : undefined }),
    );
    setBusy(false);
  };

  if (file !== null) return <Editor template={template} path={file} onClose={() => go({ path: dir })} onSaved={() => changed(`${file} saved`)} />;

  const crumbs = dir ? dir.split("/") : [];
  return (
    <Card>
      <nav class="path" aria-label="Folder">
        <a href={href(["templates", template.name], { tab: "files" })}>{template.name}</a>
        {crumbs.map((part, i) => (
          <span key={i}>
            {" / "}
            <a href={href(["templates", template.name], { tab: "files", path: crumbs.slice(0, i + 1).join("/") })}>{part}</a>
          </span>
        ))}
      </nav>
      {editable ? (
        <>
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
              void upload([...(e.dataTransfer?.files ?? [])]);
            }}
          >
            {busy ? "Uploading…" : "Drop files here to upload them into this folder, or "}
            <label class="btn btn-plain">
              choose files
              <input type="file" multiple class="sr-only" onChange={(e) => void upload([...(e.currentTarget.files ?? [])])} />
            </label>
            <label class="check">
              <input type="checkbox" checked={extract} onChange={(e) => setExtract(e.currentTarget.checked)} /> Extract ZIP archives
            </label>
          </div>
          <div class="actions">
            <Button
              onClick={async () => {
                const name = await ask({
                  title: "New file",
                  label: "File name",
                  hint: dir ? `In ${dir}/` : "In the template's top folder",
                  confirmLabel: "Create",
                  check: checkRelativePath,
                });
                if (name) go({ path: dir, file: join(dir, name) });
              }}
            >
              New file
            </Button>
            <Button
              onClick={async () => {
                const name = await ask({
                  title: "New folder",
                  label: "Folder name",
                  hint: dir ? `In ${dir}/` : "In the template's top folder",
                  confirmLabel: "Create",
                  check: checkRelativePath,
                });
                if (name) await run("New folder", () => api.post(`${base}/files/mkdir`, { path: join(dir, name) }));
              }}
            >
              New folder
            </Button>
          </div>
        </>
      ) : null}
      {listing.data === undefined ? (
        listing.error ? (
          <ErrorBox error={listing.error} />
        ) : (
          <Loading />
        )
      ) : (
        <DataTable
          label="Files"
          rows={[...listing.data.entries].sort((a, b) => (a.type === b.type ? a.name.localeCompare(b.name) : a.type === "directory" ? -1 : 1))}
          rowKey={(e) => e.path}
          empty="This folder is empty."
          columns={[
            {
              title: "Name",
              render: (e) =>
                e.type === "directory" ? (
                  <a href={href(["templates", template.name], { tab: "files", path: e.path })}>{e.name}/</a>
                ) : (
                  <a href={href(["templates", template.name], { tab: "files", path: dir, file: e.path })}>{e.name}</a>
                ),
            },
            { title: "Size", className: "num", render: (e) => (e.type === "file" ? bytes(e.size) : "") },
            {
              title: "Actions",
              render: (e) => (
                <div class="actions">
                  {e.type === "file" ? (
                    <Button
                      onClick={() =>
                        download(api, `${base}/files/download`, e.name, { path: e.path }).catch((err: unknown) => toast(errorMessage(err), "error"))
                      }
                    >
                      Download
                    </Button>
                  ) : null}
                  {e.type === "file" && e.name.toLowerCase().endsWith(".zip") ? (
                    <Button
                      perm="templates.update"
                      onClick={() => run("Extract", () => api.post(`${base}/files/extract`, { path: e.path, destination: dir || undefined }))}
                    >
                      Extract
                    </Button>
                  ) : null}
                  <Button
                    perm="templates.update"
                    onClick={async () => {
                      const to = await ask({ title: `Rename ${e.path}`, label: "New path", initial: e.path, confirmLabel: "Rename", check: checkRelativePath });
                      if (to && to !== e.path) await run("Rename", () => api.post(`${base}/files/rename`, { from: e.path, to }));
                    }}
                  >
                    Rename
                  </Button>
                  <Button
                    perm="templates.update"
                    kind="danger"
                    onClick={async () => {
                      if (
                        await confirm({
                          title: `Delete ${e.path}`,
                          message: e.type === "directory" ? "The folder and everything in it are deleted." : "The file is deleted.",
                          danger: true,
                          confirmLabel: "Delete",
                        })
                      )
                        await run("Delete", () => api.delete(`${base}/files`, { path: e.path }));
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
      {confirmDialog}
      {promptDialog}
    </Card>
  );
}

function Editor({ template, path, onClose, onSaved }: { template: Template; path: string; onClose(): void; onSaved(): void }) {
  const { api, can, toast } = useApp();
  const base = `templates/${encodeURIComponent(template.name)}`;
  const [content, setContent] = useState<string | null>(null);
  const [loaded, setLoaded] = useState("");
  const [error, setError] = useState<unknown>(null);
  const [saving, setSaving] = useState(false);
  const [confirm, confirmDialog] = useConfirm();
  useEffect(() => {
    let cancelled = false;
    api.get<{ content: string }>(`${base}/files/content`, { path }).then(
      (r) => !cancelled && (setContent(r.content), setLoaded(r.content)),
      (err: unknown) => {
        if (cancelled) return;
        // A new file: start empty.
        if ((err as { status?: number }).status === 404) {
          setContent("");
          setLoaded("");
        } else setError(err);
      },
    );
    return () => {
      cancelled = true;
    };
  }, [path]);
  const dirty = content !== null && content !== loaded;
  return (
    <Card
      title={<code>{path}</code>}
      actions={
        <>
          <button
            type="button"
            class="btn btn-plain"
            onClick={async () => {
              if (
                !dirty ||
                (await confirm({ title: "Unsaved changes", message: `Close ${path} without saving?`, confirmLabel: "Discard changes", danger: true }))
              )
                onClose();
            }}
          >
            Close
          </button>
          {can("templates.update") ? (
            <button
              type="button"
              class="btn btn-primary"
              disabled={!dirty || saving}
              onClick={async () => {
                setSaving(true);
                try {
                  await api.put(`${base}/files/content`, { path, content });
                  setLoaded(content ?? "");
                  onSaved();
                } catch (err) {
                  toast(`Save: ${errorMessage(err)}`, "error");
                } finally {
                  setSaving(false);
                }
              }}
            >
              Save
            </button>
          ) : null}
        </>
      }
    >
      {error ? <ErrorBox error={error} /> : null}
      {content === null && !error ? <Loading /> : null}
      {content !== null ? (
        <textarea
          aria-label={`Content of ${path}`}
          name="content"
          rows={24}
          spellcheck={false}
          readOnly={!can("templates.update")}
          value={content}
          onInput={(e) => setContent(e.currentTarget.value)}
          onKeyDown={(e) => {
            if ((e.ctrlKey || e.metaKey) && e.key === "s") e.preventDefault();
          }}
        />
      ) : null}
      {confirmDialog}
    </Card>
  );
}
