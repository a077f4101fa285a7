/** Templates: the list, create, import a tar.gz, and a template's own page. */
import { useState } from "preact/hooks";
import { ofTypes, useApp, useQuery } from "../lib/app-context.js";
import { errorMessage } from "../lib/api.js";
import { fileForm } from "../lib/download.js";
import { bytes, short } from "../lib/format.js";
import { href, navigate, type Route } from "../lib/router.js";
import type { Template } from "../lib/types.js";
import { Button, Field, PageHeader, QueryView } from "../ui/controls.js";
import { Dialog } from "../ui/dialog.js";
import { DataTable } from "../ui/table.js";
import { TemplateDetail } from "./template-detail.js";

export function TemplatesPage({ route }: { route: Route }) {
  if (route.parts[1]) return <TemplateDetail name={route.parts[1]} route={route} />;
  return <TemplateList />;
}

function TemplateList() {
  const { api, toast } = useApp();
  const templates = useQuery<Template[]>("templates", { load: () => api.get("templates"), watch: ofTypes("TEMPLATE_UPDATED") });
  const [dialog, setDialog] = useState<"create" | "import" | null>(null);
  const [name, setName] = useState("");
  const [description, setDescription] = useState("");
  const [platform, setPlatform] = useState("");
  const [file, setFile] = useState<File | null>(null);
  const [error, setError] = useState<string | null>(null);
  const close = () => {
    setDialog(null);
    setError(null);
  };
  const submit = async (e: Event) => {
    e.preventDefault();
    setError(null);
    try {
      if (dialog === "create") await api.post("templates", { name, description, platform: platform || undefined });
      else if (file) await api.send("POST", "templates/import", fileForm(file), { name, description, platform: platform || undefined });
      toast(`Template ${name} ${dialog === "create" ? "created" : "imported"}`, "success");
      close();
      navigate(href(["templates", name]));
    } catch (err) {
      setError(errorMessage(err));
    }
  };
  return (
    <>
      <PageHeader
        title="Templates"
        actions={
          <>
            <Button perm="templates.create" onClick={() => setDialog("import")}>
              Import
            </Button>
            <Button perm="templates.create" kind="primary" onClick={() => setDialog("create")}>
              Create template
            </Button>
          </>
        }
      />
      <QueryView state={templates}>
        {(list) => (
          <DataTable
            label="Templates"
            rows={list}
            rowKey={(t) => t.name}
            empty="No template yet."
            columns={[
              { title: "Name", render: (t) => <a href={href(["templates", t.name])}>{t.name}</a> },
              { title: "Platform", render: (t) => t.platform || "any" },
              { title: "Hash", render: (t) => <code>{short(t.hash)}</code> },
              { title: "Size", className: "num", render: (t) => bytes(t.sizeBytes) },
              { title: "Description", render: (t) => t.description },
            ]}
          />
        )}
      </QueryView>
      <Dialog open={dialog !== null} title={dialog === "import" ? "Import a template (tar.gz)" : "Create template"} onClose={close}>
        <form onSubmit={submit}>
          <Field label="Name" hint="lower case letters, digits, _ and -; at most 32">
            <input name="name" required pattern="[a-z0-9_][a-z0-9_\-]{0,31}" value={name} onInput={(e) => setName(e.currentTarget.value)} />
          </Field>
          <Field label="Description">
            <input name="description" value={description} onInput={(e) => setDescription(e.currentTarget.value)} />
          </Field>
          <Field label="Platform" hint="optional">
            <input name="platform" value={platform} onInput={(e) => setPlatform(e.currentTarget.value)} />
          </Field>
          {dialog === "import" ? (
            <Field label="Archive">
              <input type="file" accept=".tar.gz,.tgz,application/gzip" required onChange={(e) => setFile(e.currentTarget.files?.[0] ?? null)} />
            </Field>
          ) : null}
          {error ? <p class="error-box">{error}</p> : null}
          <div class="actions end">
            <button type="submit" class="btn btn-primary">
              {dialog === "import" ? "Import" : "Create"}
            </button>
          </div>
        </form>
      </Dialog>
    </>
  );
}
