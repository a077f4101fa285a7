/** `cloudctl crash list|info`. */
import type { Command } from "commander";
import { listOf, segment } from "../http-client.js";
import { ID_KINDS, withIdPrefix } from "../id-prefix.js";
import { sinceToIso } from "../options.js";
import { formatDuration } from "../render.js";
import type { RuntimeFactory } from "../runtime.js";
import { printShare } from "./logs.js";

interface CrashRecord {
  id: string;
  instanceId?: string;
  group?: string;
  nodeId?: string;
  node?: string;
  exitCode?: number;
  classification?: string;
  logTail?: string[];
  uptimeMs?: number;
  /** Why, in one line (records written before reasons were kept have none). */
  reason?: string | null;
  timestamp?: string;
  crashedAt?: string;
}

/** Longest reason in the list's REASON column; `crash info` shows it whole. */
export const reasonColumnChars = 60;

/** A crash's reason for a table cell: cut to {@link reasonColumnChars}; the last log line for older records. */
export function reasonCell(crash: Pick<CrashRecord, "reason" | "logTail">): string {
  const text = crash.reason ?? [...(crash.logTail ?? [])].reverse().find((line) => line.trim() !== "") ?? "";
  return text.length > reasonColumnChars ? `${text.slice(0, reasonColumnChars - 1)}…` : text;
}

/** Share expiries the controller accepts. */
const shareExpiries = ["1h", "1d", "30d", "never"];

/** Registers the crash commands. */
export function registerCrashCommands(program: Command, runtime: RuntimeFactory): void {
  const crash = program.command("crash").description("inspect crash records");

  crash
    .command("list")
    .alias("ls")
    .description("list crashes, newest first (ID: the first 8 characters; any unique beginning works in `crash info`)")
    .option("--group <name>", "only this group")
    .option("--node <id>", "only this node")
    .option("--since <when>", "at or after: a duration (1h, 30m, 7d) or an ISO 8601 date; sent as from", (v) => sinceToIso(v))
    .action(async (opts: { group?: string; node?: string; since?: string }, cmd: Command) => {
      const rt = runtime(cmd);
      const response = await rt.client().get("/api/v1/crashes", { group: opts.group, node: opts.node, from: opts.since });
      if (rt.json) return rt.out.raw(response.raw);
      const o = rt.out;
      o.table(
        ["ID", "TIME", "GROUP", "INSTANCE", "NODE", "EXIT", "CLASS", "UPTIME", "REASON"],
        listOf<CrashRecord>(response.data).map((c) => [
          o.accent(c.id.slice(0, 8)),
          c.crashedAt ?? c.timestamp ?? "",
          c.group ?? "",
          c.instanceId ?? "",
          c.node ?? c.nodeId ?? "",
          c.exitCode ?? "",
          c.classification ?? "",
          formatDuration(c.uptimeMs),
          reasonCell(c),
        ]),
      );
    });

  crash
    .command("info <id>")
    .description("show one crash with its last console lines")
    .option("--share", "upload a redacted copy and print the link")
    .option("--expiry <expiry>", `share expiry: ${shareExpiries.join(", ")}`, "1d")
    .option("--public", "make the shared copy public")
    .option("--burn-after-read", "the shared copy disappears after one read")
    .action(async (given: string, opts: { share?: boolean; expiry: string; public?: boolean; burnAfterRead?: boolean }, cmd: Command) => {
      const rt = runtime(cmd);
      const client = rt.client();
      const path = (id: string) => `/api/v1/crashes/${segment(id)}`;
      if (opts.share) {
        const { result: response } = await withIdPrefix(client, ID_KINDS.crash, given, (id) =>
          client.post<{ id?: string; url?: string; password?: string; expiresAt?: string | null }>(`${path(id)}/share`, {
            expiry: opts.expiry,
            public: Boolean(opts.public),
            burnAfterRead: Boolean(opts.burnAfterRead),
          }),
        );
        return printShare(rt.out, response.raw, response.data);
      }
      const { result: response } = await withIdPrefix(client, ID_KINDS.crash, given, (id) => client.get<CrashRecord>(path(id)));
      if (rt.json) return rt.out.raw(response.raw);
      const c = response.data;
      const o = rt.out;
      o.fields([
        ["ID", c.id],
        ["Time", c.timestamp ?? c.crashedAt],
        ["Group", c.group],
        ["Instance", c.instanceId],
        ["Node", c.nodeId ?? c.node],
        ["Exit code", c.exitCode],
        ["Class", c.classification],
        ["Uptime", formatDuration(c.uptimeMs)],
        ["Reason", c.reason ?? ""],
      ]);
      if (c.logTail && c.logTail.length > 0) {
        o.line();
        o.line(o.accent("Last console lines"));
        for (const line of c.logTail) o.line(`  ${line}`);
      }
    });
}
