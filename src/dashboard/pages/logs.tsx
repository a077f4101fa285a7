/**
 * Logs of the controller and of each node's daemon: the recent records with level and logger
 * filters, a live tail (SSE with a ticket), and sharing the controller's log.
 */
import { useEffect, useRef, useState } from "preact/hooks";
import { useApp, useQuery } from "../lib/app-context.js";
import { NODES_KEY, nodesQuery } from "../lib/queries.js";
import { errorMessage } from "../lib/api.js";
import { openEventSource } from "../lib/browser-live.js";
import { href, navigate, type Route } from "../lib/router.js";
import type { LogRecord, Node, ShareResult } from "../lib/types.js";
import { Badge, Button, Field, PageHeader, QueryView } from "../ui/controls.js";
import { ShareDialog } from "./share-dialog.js";

const LEVELS = ["TRACE", "DEBUG", "INFO", "WARN", "ERROR"];
/** Records kept on screen while tailing. */
const TAIL_RECORDS_MAX = 2_000;
const LEVEL_TONES: Record<string, string> = { ERROR: "bad", WARN: "warn", INFO: "info" };

export function LogsPage({ route }: { route: Route }) {
  const { api, can } = useApp();
  const source = route.query.get("source") ?? "controller";
  const level = route.query.get("level") ?? "INFO";
  const logger = route.query.get("logger") ?? "";
  const [follow, setFollow] = useState(false);
  const [sharing, setSharing] = useState(false);
  const [tail, setTail] = useState<LogRecord[]>([]);
  const nodes = useQuery<Node[]>(can("nodes.view") ? NODES_KEY : null, nodesQuery(api));
  const base = source === "controller" ? "system/logs" : `nodes/${encodeURIComponent(source)}/logs`;
  const recent = useQuery<{ records: LogRecord[]; capacity: number }>(`${base}?level=${level}&logger=${logger}`, {
    load: () => api.get(base, { level, logger: logger || undefined, limit: 500 }),
  });
  const set = (key: string, value: string) => navigate(href(["logs"], { source, level, logger, [key]: value }), true);

  useEffect(() => {
    if (!follow) return;
    let stream: { close(): void } | null = null;
    let stopped = false;
    let timer = 0;
    const connect = async () => {
      try {
        const { ticket } = await api.get<{ ticket: string }>("system/logs/ticket");
        if (stopped) return;
        stream = openEventSource(api.url(`${base}/stream`, { ticket, level, logger: logger || undefined, limit: 1 }), {
          message: (data) => {
            const record = JSON.parse(data) as LogRecord;
            setTail((old) => (old.at(-1)?.seq === record.seq ? old : [...old, record].slice(-TAIL_RECORDS_MAX)));
          },
          failed: () => {
            if (!stopped) timer = window.setTimeout(connect, 2_000);
          },
        });
      } catch {
        if (!stopped) timer = window.setTimeout(connect, 4_000);
      }
    };
    setTail([]);
    void connect();
    return () => {
      stopped = true;
      window.clearTimeout(timer);
      stream?.close();
    };
  }, [follow, base, level, logger]);

  return (
    <>
      <PageHeader
        title="Logs"
        actions={
          <>
            <Button kind={follow ? "primary" : "plain"} aria-pressed={follow} onClick={() => setFollow(!follow)}>
              {follow ? "Stop live tail" : "Live tail"}
            </Button>
            {source === "controller" ? (
              <Button perm="share.invoke" onClick={() => setSharing(true)}>
                Share
              </Button>
            ) : null}
          </>
        }
      />
      <form class="filters" role="search" onSubmit={(e) => e.preventDefault()}>
        <Field label="Source">
          <select name="source" value={source} onChange={(e) => set("source", e.currentTarget.value)}>
            <option value="controller">controller</option>
            {(nodes.data ?? []).map((n) => (
              <option key={n.id} value={n.id}>
                daemon on {n.id}
              </option>
            ))}
          </select>
        </Field>
        <Field label="Minimum level">
          <select name="level" value={level} onChange={(e) => set("level", e.currentTarget.value)}>
            {LEVELS.map((l) => (
              <option key={l}>{l}</option>
            ))}
          </select>
        </Field>
        <Field label="Logger starts with">
          <input name="logger" value={logger} onChange={(e) => set("logger", e.currentTarget.value.trim())} placeholder="any" />
        </Field>
      </form>
      <QueryView state={recent}>
        {(r) => <LogTable records={follow ? [...r.records, ...tail.filter((t) => t.seq > (r.records.at(-1)?.seq ?? 0))] : r.records} follow={follow} />}
      </QueryView>
      <ShareDialog
        open={sharing}
        title="Share the controller log"
        onClose={() => setSharing(false)}
        share={(options) => api.post<ShareResult>("system/logs/share", { ...options, level, logger: logger || undefined })}
        describeError={errorMessage}
      />
    </>
  );
}

function LogTable({ records, follow }: { records: LogRecord[]; follow: boolean }) {
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    if (follow && box.current) box.current.scrollTop = box.current.scrollHeight;
  }, [records.length, follow]);
  if (records.length === 0) return <p class="muted">No record matches.</p>;
  return (
    <div class="table-wrap log-box" ref={box} tabIndex={0} aria-label="Log records">
      <table>
        <tbody>
          {records.map((r) => (
            <tr key={r.seq} data-level={r.level}>
              <td class="mono">{new Date(r.ts).toLocaleTimeString()}</td>
              <td>
                <Badge tone={LEVEL_TONES[r.level]}>{r.level}</Badge>
              </td>
              <td class="mono muted">{r.logger}</td>
              <td>
                {r.message}
                {r.throwable ? <pre class="log-tail">{r.throwable}</pre> : null}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
