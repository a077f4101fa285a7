/**
 * A template's search (`GET templates/{name}/search`: paths and text lines, case-insensitive, at
 * most 200 hits) with each hit opening the file, and its layers (`GET templates/{name}/inheritance`:
 * base, then base-<platform>, then the template itself, those that exist), the order in which a
 * daemon unpacks them before a group's own template list.
 */
import { useState } from "preact/hooks";
import { useApp, useQuery } from "../lib/app-context.js";
import { errorMessage } from "../lib/api.js";
import { short } from "../lib/format.js";
import { href } from "../lib/router.js";
import type { Template } from "../lib/types.js";
import { Badge, Button, Card, Field, QueryView } from "../ui/controls.js";
import { DataTable } from "../ui/table.js";

/** The route's largest `maxResults`. */
export const TEMPLATE_SEARCH_RESULTS_MAX = 200;

interface SearchHit {
  path: string;
  line?: number;
  preview?: string;
}

interface SearchAnswer {
  query: string;
  results: SearchHit[];
  truncated: boolean;
}

/** The folder of a file path ("" for the top folder). */
const folderOf = (path: string) => (path.includes("/") ? path.slice(0, path.lastIndexOf("/")) : "");

export function TemplateSearch({ template }: { template: Template }) {
  const { api } = useApp();
  const [q, setQ] = useState("");
  const [maxResults, setMaxResults] = useState("50");
  const [answer, setAnswer] = useState<SearchAnswer | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const base = `templates/${encodeURIComponent(template.name)}`;
  return (
    <Card>
      <form
        class="filters"
        role="search"
        aria-label="Search the template"
        onSubmit={async (e) => {
          e.preventDefault();
          if (!q.trim()) return;
          setBusy(true);
          setError(null);
          try {
            setAnswer(await api.get<SearchAnswer>(`${base}/search`, { q: q.trim(), maxResults: Number(maxResults) || 50 }));
          } catch (err) {
            setError(errorMessage(err));
          } finally {
            setBusy(false);
          }
        }}
      >
        <Field label="Text or path">
          <input name="q" type="search" required maxLength={200} value={q} onInput={(e) => setQ(e.currentTarget.value)} />
        </Field>
        <Field label="At most">
          <input
            name="maxResults"
            type="number"
            min="1"
            max={TEMPLATE_SEARCH_RESULTS_MAX}
            value={maxResults}
            onInput={(e) => setMaxResults(e.currentTarget.value)}
          />
        </Field>
        <Button type="submit" kind="primary" busy={busy}>
          Search
        </Button>
      </form>
      {error ? <p class="error-box">{error}</p> : null}
      {answer ? (
        <>
          <p class="muted" data-search-count={answer.results.length}>
            {answer.results.length} {answer.results.length === 1 ? "hit" : "hits"} for <code>{answer.query}</code>
            {answer.truncated ? " (more exist: raise the limit or narrow the search)" : ""}
          </p>
          <DataTable
            label="Search results"
            rows={answer.results}
            rowKey={(hit) => `${hit.path}:${hit.line ?? ""}`}
            empty="Nothing found."
            columns={[
              {
                title: "File",
                render: (hit) => <a href={href(["templates", template.name], { tab: "files", path: folderOf(hit.path), file: hit.path })}>{hit.path}</a>,
              },
              { title: "Line", className: "num", render: (hit) => hit.line ?? <Badge>path</Badge> },
              { title: "Text", render: (hit) => (hit.preview === undefined ? null : <code class="preview">{hit.preview}</code>) },
            ]}
          />
        </>
      ) : null}
    </Card>
  );
}

export function TemplateLayers({ template }: { template: Template }) {
  const { api } = useApp();
  const base = `templates/${encodeURIComponent(template.name)}`;
  const chain = useQuery<{ chain: { name: string; hash: string }[] }>(`${base}/inheritance`, {
    load: () => api.get(`${base}/inheritance`),
    watch: (e) => e.type === "TEMPLATE_UPDATED",
  });
  return (
    <Card title="Layers">
      <p class="muted">
        A daemon unpacks <code>base</code>, then <code>base-&lt;platform&gt;</code>
        {template.platform ? (
          <>
            {" "}
            (here <code>base-{template.platform}</code>)
          </>
        ) : null}
        , then this template, each over the one before: a file in a later layer replaces the same path of an earlier one. Layers that do not exist are skipped.
        A group's templates are unpacked in the order the group lists them.
      </p>
      <QueryView state={chain}>
        {(c) => (
          <ol class="layers" aria-label="Layers in order">
            {c.chain.map((layer) => (
              <li key={layer.name}>
                {layer.name === template.name ? <strong>{layer.name}</strong> : <a href={href(["templates", layer.name])}>{layer.name}</a>}{" "}
                <code class="muted">{short(layer.hash, 12)}</code>
              </li>
            ))}
          </ol>
        )}
      </QueryView>
    </Card>
  );
}
