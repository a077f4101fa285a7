/** Crash records: reason, exit code, uptime, the last console lines, and sharing a redacted copy. */
import { useState } from "preact/hooks";
import { ofTypes, useApp, useQuery } from "../lib/app-context.js";
import { errorMessage } from "../lib/api.js";
import { href, navigate, type Route } from "../lib/router.js";
import { duration, time } from "../lib/format.js";
import type { Crash, ShareResult } from "../lib/types.js";
import { Badge, Button, Field, PageHeader, QueryView } from "../ui/controls.js";
import { ShareDialog } from "./share-dialog.js";

export function CrashesPage({ route }: { route: Route }) {
  const { api } = useApp();
  const group = route.query.get("group") ?? "";
  const crashes = useQuery<Crash[]>(`crashes?group=${group}`, {
    load: () => api.get("crashes", { group }),
    watch: ofTypes("INSTANCE_CRASHED"),
  });
  return (
    <>
      <PageHeader title="Crashes" />
      <form class="filters" role="search" onSubmit={(e) => e.preventDefault()}>
        <Field label="Group">
          <input name="group" value={group} placeholder="any" onChange={(e) => navigate(href(["crashes"], { group: e.currentTarget.value.trim() }), true)} />
        </Field>
      </form>
      <QueryView state={crashes}>{(list) => <CrashList crashes={list} showInstance />}</QueryView>
    </>
  );
}

export function CrashList({ crashes, showInstance }: { crashes: Crash[]; showInstance?: boolean }) {
  const { api } = useApp();
  const [sharing, setSharing] = useState<Crash | null>(null);
  if (crashes.length === 0) return <p class="muted">No crash recorded.</p>;
  return (
    <>
      <ul class="crashes" aria-label="Crash records">
        {crashes.map((c) => (
          <li key={c.id} class="card" data-crash={c.id}>
            <header class="card-head">
              <h3>
                {showInstance ? <a href={href(["instances", c.instanceId])}>{c.instanceId}</a> : null} <Badge tone="bad">{c.classification}</Badge>
              </h3>
              <Button perm="share.invoke" onClick={() => setSharing(c)}>
                Share
              </Button>
            </header>
            <p class="muted">
              {time(c.timestamp)} · exit code {c.exitCode} · after {duration(c.uptimeMs)} · node {c.nodeId} · group {c.group}
            </p>
            <details open={crashes.length <= 3}>
              <summary>Last {c.logTail.length} console lines</summary>
              <pre class="log-tail">{c.logTail.join("\n")}</pre>
            </details>
          </li>
        ))}
      </ul>
      <ShareDialog
        open={sharing !== null}
        title={`Share crash report of ${sharing?.instanceId ?? ""}`}
        onClose={() => setSharing(null)}
        share={(options) => api.post<ShareResult>(`crashes/${encodeURIComponent(sharing!.id)}/share`, options)}
        describeError={errorMessage}
      />
    </>
  );
}
