/**
 * `cloudctl share list|show|revoke` (docs/decisions/logs.md, "Sharing"): the shares recorded by
 * `logs --share`, `diagnostics bundle --share` and `crash info --share`, newest first, and their
 * revocation (the paste service deletes the paste). A share without a delete token, or one already
 * revoked, fails with exit 1 (HTTP 409); an unknown id with exit 4.
 */
import type { Command } from "commander";
import { ID_KINDS, withIdPrefix } from "../id-prefix.js";
import { CliError } from "../exit-codes.js";
import { listOf, segment } from "../http-client.js";
import type { RuntimeFactory } from "../runtime.js";

/** A recorded share as the controller answers it. */
interface ShareRecord {
  id: string;
  kind?: string;
  pasteId?: string;
  url?: string;
  expiry?: string;
  expiresAt?: string | null;
  public?: boolean;
  burnAfterRead?: boolean;
  sizeChars?: number;
  createdBy?: string;
  createdAt?: string;
  revokedAt?: string | null;
  revokedBy?: string | null;
  revocable?: boolean;
}

/** One word for where a share stands. */
function stateOf(record: ShareRecord): string {
  if (record.revokedAt) return "revoked";
  return record.revocable ? "active" : "active (no delete token)";
}

function parseLimit(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 500) throw new CliError(`--limit: expected a whole number from 1 to 500, got ${value}`);
  return n;
}

const sharePath = (id: string) => `/api/v1/shares/${segment(id)}`;

/** Registers `share`. */
export function registerShareCommands(program: Command, runtime: RuntimeFactory): void {
  const share = program.command("share").description("list and revoke shared logs, diagnostics and crash reports");

  share
    .command("list")
    .alias("ls")
    .description("list recorded shares, newest first (expired ones are gone)")
    .option("--limit <n>", "at most this many (1 to 500)", parseLimit, 100)
    .action(async (opts: { limit: number }, cmd: Command) => {
      const rt = runtime(cmd);
      const response = await rt.client().get("/api/v1/shares", { limit: opts.limit });
      if (rt.json) return rt.out.raw(response.raw);
      rt.out.table(
        ["ID", "KIND", "CREATED", "BY", "EXPIRES", "STATE", "URL"],
        listOf<ShareRecord>(response.data).map((r) => [
          rt.out.accent(r.id),
          r.kind ?? "",
          r.createdAt ?? "",
          r.createdBy ?? "",
          r.expiresAt ?? "never",
          stateOf(r),
          r.url ?? "",
        ]),
      );
    });

  share
    .command("show <id>")
    .description("show one recorded share")
    .action(async (given: string, _opts, cmd: Command) => {
      const rt = runtime(cmd);
      const { result: response } = await withIdPrefix(rt.client(), ID_KINDS.share, given, (id) => rt.client().get<ShareRecord>(sharePath(id)));
      if (rt.json) return rt.out.raw(response.raw);
      const r = response.data;
      rt.out.fields([
        ["id", r.id],
        ["kind", r.kind],
        ["url", r.url],
        ["paste", r.pasteId],
        ["created", `${r.createdAt ?? ""} by ${r.createdBy ?? ""}`],
        ["expires", r.expiresAt ?? "never"],
        ["public", r.public],
        ["burn after read", r.burnAfterRead],
        ["size", `${r.sizeChars ?? 0} characters`],
        ["state", stateOf(r)],
        ...(r.revokedAt ? ([["revoked", `${r.revokedAt} by ${r.revokedBy ?? ""}`]] as [string, unknown][]) : []),
      ]);
    });

  share
    .command("revoke <id>")
    .description("revoke a share: the paste service deletes the paste")
    .action(async (given: string, _opts, cmd: Command) => {
      const rt = runtime(cmd);
      const { id, result: response } = await withIdPrefix(rt.client(), ID_KINDS.share, given, (id) => rt.client().delete<ShareRecord>(sharePath(id)));
      if (rt.json) return rt.out.raw(response.raw);
      rt.out.success(`revoked share ${rt.out.accent(id)}: the paste is deleted`);
    });
}
