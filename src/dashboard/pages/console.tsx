/**
 * An instance's console: the stream `GET services/{id}/console` with a single-use ticket (the
 * recent lines first, then live ones), kept as scrollback of at most {@link SCROLLBACK_LINES}
 * lines; a lost stream comes back with a new ticket and skips the lines it already has. Commands
 * typed below go to the process's standard input (`POST services/{id}/command`); ↑ and ↓ walk the
 * commands sent.
 */
import { useEffect, useRef, useState } from "preact/hooks";
import { useApp } from "../lib/app-context.js";
import { errorMessage } from "../lib/api.js";
import { openEventSource } from "../lib/browser-live.js";

export const SCROLLBACK_LINES = 5_000;
const RECONNECT_MS = 2_000;

interface Line {
  seq: number;
  text: string;
  stderr: boolean;
}

export function Console({ instanceId }: { instanceId: string }) {
  const { api, can, toast } = useApp();
  const [lines, setLines] = useState<Line[]>([]);
  const [state, setState] = useState<"connecting" | "open" | "closed">("connecting");
  const [command, setCommand] = useState("");
  const history = useRef<string[]>([]);
  const historyAt = useRef(-1);
  const box = useRef<HTMLDivElement>(null);
  const stick = useRef(true);
  const base = `services/${encodeURIComponent(instanceId)}`;

  useEffect(() => {
    let lastSeq = 0;
    let stream: { close(): void } | null = null;
    let timer = 0;
    let stopped = false;
    const connect = async () => {
      setState("connecting");
      try {
        const { ticket } = await api.post<{ ticket: string }>(`${base}/console/ticket`);
        if (stopped) return;
        stream = openEventSource(
          api.url(`${base}/console`, { ticket }),
          {
            open: () => setState("open"),
            message: (data, _event, id) => {
              const entry = JSON.parse(data) as { line: string; stream?: string };
              const seq = Number(id) || 0;
              setLines((old) => {
                const last = old.at(-1)?.seq ?? lastSeq;
                const mine = seq || last + 1;
                if (seq && seq <= last) return old;
                lastSeq = mine;
                const next = [...old, { seq: mine, text: entry.line, stderr: entry.stream === "stderr" }];
                return next.length > SCROLLBACK_LINES ? next.slice(next.length - SCROLLBACK_LINES) : next;
              });
            },
            failed: () => {
              setState("closed");
              if (!stopped) timer = window.setTimeout(connect, RECONNECT_MS);
            },
          },
          ["console"],
        );
      } catch (err) {
        setState("closed");
        if (!stopped) timer = window.setTimeout(connect, RECONNECT_MS * 2);
        if ((err as { status?: number }).status === 403) stopped = true;
      }
    };
    void connect();
    return () => {
      stopped = true;
      window.clearTimeout(timer);
      stream?.close();
    };
  }, [instanceId]);

  useEffect(() => {
    const el = box.current;
    if (el && stick.current) el.scrollTop = el.scrollHeight;
  }, [lines]);

  const send = async (e: Event) => {
    e.preventDefault();
    const text = command.trim();
    if (!text) return;
    try {
      await api.post(`${base}/command`, { command: text });
      history.current = [...history.current.filter((h) => h !== text), text].slice(-100);
      historyAt.current = -1;
      setCommand("");
    } catch (err) {
      toast(`Command: ${errorMessage(err)}`, "error");
    }
  };

  return (
    <div>
      <p class="muted" role="status">
        Console {state === "open" ? "connected" : state === "connecting" ? "connecting…" : "disconnected, reconnecting…"} · {lines.length} lines
      </p>
      <div
        ref={box}
        class="console"
        tabIndex={0}
        role="log"
        aria-label={`Console of ${instanceId}`}
        onScroll={(e) => {
          const el = e.currentTarget;
          stick.current = el.scrollHeight - el.scrollTop - el.clientHeight < 24;
        }}
      >
        {lines.map((l) => (
          <div key={l.seq} class={l.stderr ? "stderr" : undefined}>
            {l.text}
          </div>
        ))}
      </div>
      {can("instances.command") ? (
        <form class="console-input" onSubmit={send}>
          <label class="sr-only" for="console-command">
            Command
          </label>
          <input
            id="console-command"
            name="command"
            autocomplete="off"
            placeholder="Type a command and press Enter"
            value={command}
            onInput={(e) => setCommand(e.currentTarget.value)}
            onKeyDown={(e) => {
              const list = history.current;
              if (e.key === "ArrowUp" && list.length) {
                historyAt.current = historyAt.current < 0 ? list.length - 1 : Math.max(0, historyAt.current - 1);
                setCommand(list[historyAt.current]);
                e.preventDefault();
              } else if (e.key === "ArrowDown" && historyAt.current >= 0) {
                historyAt.current = historyAt.current + 1;
                if (historyAt.current >= list.length) {
                  historyAt.current = -1;
                  setCommand("");
                } else setCommand(list[historyAt.current]);
                e.preventDefault();
              }
            }}
          />
          <button type="submit" class="btn btn-primary">
            Send
          </button>
        </form>
      ) : null}
    </div>
  );
}
