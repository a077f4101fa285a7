/**
 * An instance's output in cloudctl: its log (`cloudctl logs <instance>`, `cloudctl inst logs
 * <instance>`) from the daemon of its node, and the output of a console command (`inst exec`).
 *
 * Logs: the last `--tail` lines (200) of `GET /api/v1/services/{id}/logs`, console lines as printed
 * and the daemon's own `[cloud] …` lines (state changes, how it ended, a start it refused);
 * `--timestamps` puts each line's time first. `--follow` reads `GET …/logs/stream` instead: the
 * same lines, then new ones until the instance ends (exit 0) or Ctrl-C. When the node cannot be
 * asked the controller's console buffer answers, and a note on stderr says so.
 *
 * Exec: the console stream is opened first (new lines only), then the command is posted, and what
 * the server prints is shown until it has been quiet for `--quiet` (a second) after its first
 * line, or `--wait` (5 s) ran out. A server prints nothing to mark the end of a command's output,
 * so this is the best a client can do; `--wait 0` only sends.
 */
import type { Command } from "commander";
import { CliError } from "../exit-codes.js";
import { segment, type HttpClient } from "../http-client.js";
import { parseDurationMs } from "../options.js";
import type { Output } from "../render.js";
import type { Runtime } from "../runtime.js";
import { consoleTicket, openSse } from "../sse-stream.js";

/** One line of an instance log as the routes send it. */
export interface InstanceLogLine {
  line: string;
  stream: string;
  timestampMs: number;
}

interface LogAnswer {
  instanceId: string;
  node: string;
  source: "daemon" | "controller";
  note?: string;
  lines: InstanceLogLine[];
}

/** Flags of the instance log commands. */
export interface InstanceLogFlags {
  follow?: boolean;
  tail: number;
  timestamps?: boolean;
}

/** Default of `exec --wait`: the longest an exec waits for output. */
export const execWaitMsDefault = 5_000;
/** Default of `exec --quiet`: after the first line, this long without one ends the output. */
export const execQuietMsDefault = 1_000;

/** A log line as printed: the daemon's own lines dimmed, the time first with `--timestamps`. */
export function formatInstanceLine(out: Output, line: InstanceLogLine, timestamps: boolean): string {
  const text = line.stream === "cloud" ? out.colors.dim(line.line) : line.line;
  return timestamps ? `${new Date(line.timestampMs).toISOString()} ${text}` : text;
}

/** Prints an instance's log (see the module comment). */
export async function showInstanceLogs(rt: Runtime, client: HttpClient, id: string, flags: InstanceLogFlags): Promise<void> {
  const out = rt.out;
  if (!flags.follow) {
    const response = await client.get<LogAnswer>(`/api/v1/services/${segment(id)}/logs`, { tail: flags.tail });
    if (rt.json) return out.raw(response.raw);
    if (response.data.note) out.note(out.colors.dim(`note: ${response.data.note}`));
    for (const line of response.data.lines) out.line(formatInstanceLine(out, line, Boolean(flags.timestamps)));
    return;
  }
  const ticket = await consoleTicket(client, id);
  const stream = await openSse(client, `/api/v1/services/${segment(id)}/logs/stream`, { ticket, tail: flags.tail }, "log stream");
  try {
    for (let frame = await stream.next(); frame; frame = await stream.next()) {
      if (frame.event === "connected") {
        const connected = JSON.parse(frame.data) as { note?: string };
        if (connected.note && !rt.json) out.note(out.colors.dim(`note: ${connected.note}`));
      } else if (frame.event === "log") {
        if (rt.json) out.line(frame.data);
        else out.line(formatInstanceLine(out, JSON.parse(frame.data) as InstanceLogLine, Boolean(flags.timestamps)));
      } else if (frame.event === "end") {
        if (!rt.json) out.note(out.colors.dim(`instance ${id} ended`));
        return;
      }
    }
  } finally {
    stream.close();
  }
  out.note(out.colors.dim("log stream closed"));
}

/** Adds `--follow`, `--tail` and `--timestamps` to an instance log command. */
export function withInstanceLogFlags(command: Command): Command {
  return command
    .option("-f, --follow", "print the lines, then new ones until the instance ends or Ctrl-C")
    .option("--tail <n>", "the newest n lines (1 to 2000)", parseTailLines, 200)
    .option("--timestamps", "print each line's time first");
}

/** Parses `--tail` of an instance log (commander argParser). */
export function parseTailLines(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 2000) throw new CliError(`--tail: expected a whole number from 1 to 2000, got ${value}`);
  return n;
}

/** Flags of `inst exec`. */
export interface ExecFlags {
  wait: number;
  quiet: number;
}

/** Adds `--wait` and `--quiet` to `inst exec`. */
export function withExecFlags(command: Command): Command {
  return command
    .option("--wait <duration>", "how long to show the server's output at most (e.g. 5s, 500ms; 0 only sends)", parseDurationMs, execWaitMsDefault)
    .option("--quiet <duration>", "after the first line, this long without output ends it", parseDurationMs, execQuietMsDefault);
}

/**
 * Sends `command` and prints what the server prints in answer (see the module comment). Returns
 * the lines printed.
 */
export async function execWithOutput(rt: Runtime, client: HttpClient, id: string, command: string, flags: ExecFlags): Promise<string[]> {
  const path = `/api/v1/services/${segment(id)}`;
  if (flags.wait <= 0) {
    await client.post(`${path}/command`, { command });
    return [];
  }
  const ticket = await consoleTicket(client, id);
  const stream = await openSse(client, `${path}/console`, { ticket, tail: 0 }, "console stream");
  const printed: string[] = [];
  try {
    const connected = await stream.next();
    if (connected === null) throw new CliError("the console stream closed before it started");
    await client.post(`${path}/command`, { command });
    const deadline = Date.now() + flags.wait;
    for (;;) {
      const left = deadline - Date.now();
      if (left <= 0) break;
      const frame = await withTimeout(stream.next(), printed.length > 0 ? Math.min(left, flags.quiet) : left);
      if (frame === "timeout" || frame === null) break;
      if (frame.event !== "console") continue;
      const line = (JSON.parse(frame.data) as { line?: string }).line ?? frame.data;
      printed.push(line);
      rt.out.line(line);
    }
  } finally {
    stream.close();
  }
  if (printed.length === 0) rt.out.note(rt.out.colors.dim(`sent to ${id}; no output within ${flags.wait} ms`));
  return printed;
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T | "timeout"> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([promise, new Promise<"timeout">((resolve) => (timer = setTimeout(() => resolve("timeout"), ms)))]).finally(() => clearTimeout(timer));
}
