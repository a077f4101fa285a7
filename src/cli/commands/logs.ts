/**
 * `cloudctl logs [controller | daemon <node-id> | <instance>]` and `cloudctl diagnostics bundle`
 * (alias `diag`) (spec document 2, "Command-line client"). `logs <instance>` is the instance's log
 * from its node (commands/instance-output.ts), the same as `instance logs <instance>`.
 *
 * `logs` prints the newest `--tail` records (200) at `--level` (INFO) and above, optionally of one
 * `--logger` prefix, as HUMAN lines (`--json`: the controller's answer as returned). `--follow`
 * replays them and then prints new records until interrupted (the log stream with a ticket;
 * `--json` is ignored). `--share` uploads the redacted controller log instead (with `--expiry`,
 * `--public`, `--burn-after-read`) and prints the link (and the share's id, which `cloudctl share
 * revoke` takes); it cannot be combined with `--follow`, and a daemon's log has no share route.
 *
 * `diagnostics bundle`: commands/diagnostics.ts.
 */
import type { Command } from "commander";
import { SseParser } from "../console-session.js";
import { CliError, ExitCode, usageError } from "../exit-codes.js";
import { ID_KINDS, withIdPrefix } from "../id-prefix.js";
import { showInstanceLogs } from "./instance-output.js";
import { errorFromResponse, segment, type HttpClient } from "../http-client.js";
import type { Output } from "../render.js";
import type { RuntimeFactory } from "../runtime.js";

/** One record as the logs routes answer it. */
export interface LogRecordView {
  seq: number;
  ts: number;
  level: string;
  logger: string;
  thread: string;
  message: string;
  throwable?: string;
}

const levels = ["TRACE", "DEBUG", "INFO", "WARN", "ERROR"];
const shareExpiries = ["1h", "1d", "30d", "never"];

/** A record as one HUMAN line (the controller's own layout), the throwable on the lines after. */
export function formatLogLine(record: LogRecordView): string {
  const iso = new Date(record.ts).toISOString();
  const lastSegment = record.logger.slice(record.logger.lastIndexOf(".") + 1);
  const line = `${iso.slice(0, 10)} ${iso.slice(11, 23)} [${record.thread}] ${record.level.padEnd(5)} ${lastSegment} - ${record.message}`;
  return record.throwable ? `${line}\n${record.throwable}` : line;
}

function parseTail(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 2000) throw new CliError(`--tail: expected a whole number from 1 to 2000, got ${value}`);
  return n;
}

export function parseLogLines(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 2000) throw new CliError(`--log-lines: expected a whole number from 0 to 2000, got ${value}`);
  return n;
}

function parseLevel(value: string): string {
  const upper = value.toUpperCase();
  if (!levels.includes(upper)) throw new CliError(`--level: expected one of ${levels.join(", ")}, got ${value}`);
  return upper;
}

function parseExpiry(value: string): string {
  if (!shareExpiries.includes(value)) throw new CliError(`--expiry: expected one of ${shareExpiries.join(", ")}, got ${value}`);
  return value;
}

export interface ShareFlags {
  expiry: string;
  public?: boolean;
  burnAfterRead?: boolean;
}

export interface ShareAnswer {
  id?: string;
  url?: string;
  password?: string;
  expiresAt?: string | null;
}

export const shareBody = (opts: ShareFlags) => ({ expiry: opts.expiry, public: Boolean(opts.public), burnAfterRead: Boolean(opts.burnAfterRead) });

/** Prints a share's link, the password a private share needs, and the id that revokes it. */
export function printShare(out: Output, raw: string, answer: ShareAnswer | undefined): void {
  if (out.json) return out.raw(raw);
  out.line(answer?.url ?? raw);
  if (answer?.password) out.line(`password: ${answer.password}`);
  if (answer?.id) out.line(`share: ${answer.id}`);
  out.note(out.colors.dim(answer?.expiresAt ? `expires ${answer.expiresAt}` : "never expires"));
  if (answer?.id) out.note(out.colors.dim(`revoke with: cloudctl share revoke ${answer.id}`));
}

export function addShareFlags(command: Command): Command {
  return command
    .option("--expiry <expiry>", `share expiry: ${shareExpiries.join(", ")}`, parseExpiry, "1d")
    .option("--public", "the shared copy opens with the link alone (otherwise it also needs the printed password)")
    .option("--burn-after-read", "the shared copy disappears after one read");
}

/** Follows a log stream: replays `tail` records, then prints new ones until the stream ends. */
async function follow(client: HttpClient, out: Output, path: string, query: Record<string, string | undefined>): Promise<void> {
  const ticket = (await client.get<{ ticket?: string }>("/api/v1/system/logs/ticket")).data?.ticket;
  if (!ticket) throw new CliError("log ticket response carried no ticket");
  const url = client.url(path, { ...query, ticket });
  const headers = { ...client.headers(true), accept: "text/event-stream" };
  client.logRequest("GET", url, headers);
  let response: Response;
  try {
    response = await fetch(url, { headers });
  } catch (error) {
    throw new CliError(`cannot open the log stream: ${(error as Error).message}`, ExitCode.connection);
  }
  if (!response.ok || !response.body) throw errorFromResponse(response.status, response.statusText, await response.text());
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  const parser = new SseParser();
  for (;;) {
    let chunk: Awaited<ReturnType<typeof reader.read>>;
    try {
      chunk = await reader.read();
    } catch {
      break; // dropped: the stream ended
    }
    if (chunk.done) break;
    for (const frame of parser.push(decoder.decode(chunk.value, { stream: true }))) {
      if (frame.event === "error") {
        const message = (JSON.parse(frame.data) as { message?: string }).message ?? frame.data;
        throw new CliError(`log stream refused: ${message}`, message === "Unauthorized" ? ExitCode.unauthorized : ExitCode.failure);
      }
      if (frame.event === "message") out.line(formatLogLine(JSON.parse(frame.data) as LogRecordView));
    }
  }
  out.note(out.colors.dim("log stream closed"));
}

/** Registers `logs` (`diagnostics` is registered by commands/diagnostics.ts). */
export function registerLogCommands(program: Command, runtime: RuntimeFactory): void {
  const logs = program
    .command("logs")
    .description("print the controller's log, a node daemon's (logs daemon <node-id>), or an instance's (logs <instance>)")
    .argument("[target]", "controller (default), daemon, or an instance id (a unique beginning of one is enough)", "controller")
    .argument("[node-id]", "the node, for logs daemon")
    .option("-f, --follow", "print the buffered records, then new ones until interrupted (--json is ignored)")
    .option("--tail <n>", "the newest n records (1 to 2000)", parseTail, 200)
    .option("--level <level>", `minimum level: ${levels.join(", ")}`, parseLevel, "INFO")
    .option("--logger <prefix>", "only loggers with this name prefix")
    .option("--share", "upload the redacted controller log and print the link (not with --follow)")
    .option("--timestamps", "instance logs: print each line's time first");
  addShareFlags(logs).action(
    async (
      target: string,
      nodeId: string | undefined,
      opts: { follow?: boolean; tail: number; level: string; logger?: string; share?: boolean; timestamps?: boolean } & ShareFlags,
      cmd: Command,
    ) => {
      if (target !== "controller" && target !== "daemon") {
        const notForInstances = ["level", "logger", "share", "expiry", "public", "burnAfterRead"].filter((flag) => cmd.getOptionValueSource(flag) === "cli");
        if (nodeId) throw usageError(`unexpected argument ${nodeId}: cloudctl logs <instance> takes one instance id`);
        if (notForInstances.length > 0)
          throw usageError(`an instance log takes --follow, --tail and --timestamps only (not --${notForInstances.join(", --")})`);
        const rt = runtime(cmd);
        const client = rt.client();
        await withIdPrefix(client, ID_KINDS.instance, target, (id) =>
          showInstanceLogs(rt, client, id, { follow: opts.follow, tail: opts.tail, timestamps: opts.timestamps }),
        );
        return;
      }
      if (target === "daemon" && !nodeId) throw new CliError("logs daemon needs a node id");
      if (target === "controller" && nodeId) throw new CliError(`unexpected argument ${nodeId}`);
      if (opts.share && opts.follow) throw new CliError("--share cannot be combined with --follow");
      if (opts.share && target === "daemon") throw new CliError("--share uploads the controller log; a daemon's log is not shared");
      const rt = runtime(cmd);
      const client = rt.client();
      const filters = { level: opts.level, logger: opts.logger, limit: String(opts.tail) };
      if (opts.share) {
        const response = await client.post<ShareAnswer>("/api/v1/system/logs/share", {
          level: opts.level,
          logger: opts.logger,
          limit: opts.tail,
          ...shareBody(opts),
        });
        return printShare(rt.out, response.raw, response.data);
      }
      const show = async (path: string) => {
        if (opts.follow) return follow(client, rt.out, `${path}/stream`, filters);
        const response = await client.get<{ records?: LogRecordView[] }>(path, filters);
        if (rt.json) return rt.out.raw(response.raw);
        for (const record of response.data?.records ?? []) rt.out.line(formatLogLine(record));
      };
      if (target === "daemon") await withIdPrefix(client, ID_KINDS.node, nodeId!, (id) => show(`/api/v1/nodes/${segment(id)}/logs`));
      else await show("/api/v1/system/logs");
    },
  );
}
