/**
 * `cloudctl backup create|list|show|verify|delete` and `cloudctl restore <id>` (spec document 2,
 * "Command-line client"). Restore parts: both by default; `--filesystem` and `--datastores` pick
 * parts (either alone restores only that part), `--no-files` and `--no-data` leave one out. A real
 * restore asks first (`--yes` skips the question); `--dry-run` never asks and changes nothing.
 */
import type { Command } from "commander";
import { CliError } from "../exit-codes.js";
import { listOf, segment } from "../http-client.js";
import { formatBytes } from "../render.js";
import type { RuntimeFactory } from "../runtime.js";

interface BackupRecord {
  id: string;
  createdAt?: string;
  sizeBytes?: number;
  mongoDocumentCount?: number;
  profile?: string;
  documentStore?: string;
  controller?: { nodeId?: string; softwareVersion?: string };
  blobs?: { count?: number };
}

interface ValidationReport {
  id: string;
  valid: boolean;
  [list: string]: unknown;
}

interface RestoreReport {
  dryRun: boolean;
  filesystem: { applied: boolean; entryCount: number; rollbackRoot: string | null };
  datastores: { applied: boolean; mongoCollections: string[]; mongoPrefixGroups: string[]; redisPrefixes: string[] };
}

/** Restore command flags as commander parses them (`--no-files` / `--no-data` default the negated ones to true). */
export interface RestoreFlags {
  dryRun?: boolean;
  filesystem?: boolean;
  datastores?: boolean;
  files: boolean;
  data: boolean;
}

/** Which parts a restore asks for: see the module comment. */
export function restoreParts(flags: RestoreFlags): { filesystem: boolean; datastores: boolean } {
  const picked = flags.filesystem === true || flags.datastores === true;
  const filesystem = (picked ? flags.filesystem === true : true) && flags.files;
  const datastores = (picked ? flags.datastores === true : true) && flags.data;
  if (!filesystem && !datastores) throw new CliError("nothing to restore: the flags leave out both the files and the data");
  return { filesystem, datastores };
}

const backupPath = (id: string) => `/api/v1/backups/${segment(id)}`;

/** Registers `backup` and `restore`. */
export function registerBackupCommands(program: Command, runtime: RuntimeFactory): void {
  const backup = program.command("backup").description("create, list and verify backups of the control plane");

  backup
    .command("create")
    .description("back up the database, key-value counters and template files into one bundle")
    .action(async (_opts, cmd: Command) => {
      const rt = runtime(cmd);
      const response = await rt.client().post<BackupRecord>("/api/v1/backups");
      if (rt.json) return rt.out.raw(response.raw);
      const record = response.data;
      rt.out.success(
        `backup ${rt.out.accent(record.id)}: ${record.mongoDocumentCount ?? 0} documents, ${record.blobs?.count ?? 0} blobs, ${formatBytes(record.sizeBytes)}`,
      );
    });

  backup
    .command("list")
    .alias("ls")
    .description("list the backups this controller holds, newest first")
    .action(async (_opts, cmd: Command) => {
      const rt = runtime(cmd);
      const response = await rt.client().get("/api/v1/backups");
      if (rt.json) return rt.out.raw(response.raw);
      rt.out.table(
        ["ID", "CREATED", "SIZE", "DOCUMENTS", "STORE"],
        listOf<BackupRecord>(response.data).map((r) => [
          rt.out.accent(r.id),
          r.createdAt ?? "",
          formatBytes(r.sizeBytes),
          r.mongoDocumentCount ?? 0,
          r.documentStore ?? "",
        ]),
      );
    });

  backup
    .command("show <id>")
    .description("show a backup's manifest")
    .action(async (id: string, _opts, cmd: Command) => {
      const rt = runtime(cmd);
      const response = await rt.client().get<BackupRecord>(backupPath(id));
      if (rt.json) return rt.out.raw(response.raw);
      const r = response.data;
      rt.out.fields([
        ["id", r.id],
        ["created", r.createdAt],
        ["size", formatBytes(r.sizeBytes)],
        ["documents", r.mongoDocumentCount],
        ["blobs", r.blobs?.count],
        ["profile", r.profile],
        ["store", r.documentStore],
        ["controller", `${r.controller?.nodeId ?? ""} ${r.controller?.softwareVersion ?? ""}`.trim()],
      ]);
    });

  backup
    .command("verify <id>")
    .description("verify a bundle: every part against the manifest's checksums, required collections and prefixes (exit 1 when invalid)")
    .action(async (id: string, _opts, cmd: Command) => {
      const rt = runtime(cmd);
      const response = await rt.client().post<ValidationReport>(`${backupPath(id)}/verify`);
      const report = response.data;
      if (rt.json) rt.out.raw(response.raw);
      else if (report.valid) rt.out.success(`backup ${rt.out.accent(id)} is valid`);
      else {
        const findings = Object.entries(report).filter(([, value]) => Array.isArray(value) && value.length > 0) as [string, unknown[]][];
        rt.out.fields(findings.map(([name, value]) => [name, value.join(", ")]));
      }
      if (!report.valid) throw new CliError(`backup ${id} is not valid`);
    });

  backup
    .command("delete <id>")
    .alias("rm")
    .description("delete a backup")
    .option("-y, --yes", "do not ask for confirmation")
    .action(async (id: string, opts: { yes?: boolean }, cmd: Command) => {
      const rt = runtime(cmd);
      if (!opts.yes && !(await rt.prompter.confirm(`Delete backup ${id}? This cannot be undone.`))) {
        rt.out.note("cancelled");
        return;
      }
      const response = await rt.client().delete(backupPath(id));
      if (rt.json) return rt.out.raw(response.raw);
      rt.out.success(`deleted backup ${rt.out.accent(id)}`);
    });

  program
    .command("restore <id>")
    .description("restore a backup: replaces the users, groups, instances, templates and audit log (asks first unless --yes or --dry-run)")
    .option("--dry-run", "report what would change and change nothing")
    .option("--filesystem", "restore the template files (only them, unless --datastores too)")
    .option("--datastores", "restore the database and key-value counters (only them, unless --filesystem too)")
    .option("--no-files", "leave the template files as they are")
    .option("--no-data", "leave the database and key-value counters as they are")
    .option("-y, --yes", "do not ask for confirmation")
    .action(async (id: string, opts: RestoreFlags & { yes?: boolean }, cmd: Command) => {
      const rt = runtime(cmd);
      const parts = restoreParts(opts);
      const dryRun = opts.dryRun === true;
      if (!dryRun && !opts.yes) {
        const what = [parts.datastores ? "the database" : "", parts.filesystem ? "the template files" : ""].filter(Boolean).join(" and ");
        if (!(await rt.prompter.confirm(`Restore backup ${id}? This replaces ${what}, and everyone must sign in again.`))) {
          rt.out.note("cancelled");
          return;
        }
      }
      const response = await rt.client().post<RestoreReport>("/api/v1/restore", { id, dryRun, ...parts });
      if (rt.json) return rt.out.raw(response.raw);
      const report = response.data;
      rt.out.fields([
        ["dry run", report.dryRun],
        ["files applied", report.filesystem.applied],
        ["file entries", report.filesystem.entryCount],
        ["rollback copy", report.filesystem.rollbackRoot ?? "-"],
        ["data applied", report.datastores.applied],
        ["collections", report.datastores.mongoCollections.length],
        ["key prefixes", report.datastores.redisPrefixes.join(", ")],
      ]);
      if (!dryRun && parts.datastores) rt.out.note("the users were restored: sign in again (cloudctl login)");
    });
}
