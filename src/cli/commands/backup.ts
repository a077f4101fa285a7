/**
 * `cloudctl backup create|list|show|verify|delete|download|upload` and `cloudctl restore <id>`
 * (spec document 2, "Command-line client"). Restore parts: both by default; `--filesystem` and
 * `--datastores` pick parts (either alone restores only that part), `--no-files` and `--no-data`
 * leave one out. A real restore asks first (`--yes` skips the question); `--dry-run` never asks and
 * changes nothing. `--foreign` takes a bundle the cluster did not authenticate (another cluster's:
 * the migration path; ADMIN only), and the question says so.
 *
 * `download` streams the bundle to `<file>.partial` while hashing it, checks the size and sha256 the
 * controller records for the backup, and only then renames it to the file (default
 * `backup-<id>.tar.gz`; an existing file is not overwritten). `upload` streams a file as the body
 * and prints the id the controller recorded it under.
 */
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { link, open, stat, unlink } from "node:fs/promises";
import { Readable } from "node:stream";
import type { Command } from "commander";
import { ID_KINDS, idToConfirm, resolveId, withIdPrefix } from "../id-prefix.js";
import { CliError, ExitCode } from "../exit-codes.js";
import { errorFromResponse, listOf, requestTimeoutMs, segment, type HttpClient } from "../http-client.js";
import { formatBytes } from "../render.js";
import type { RuntimeFactory } from "../runtime.js";

interface BackupRecord {
  id: string;
  createdAt?: string;
  sizeBytes?: number;
  /** sha256 of the bundle file. */
  sha256?: string;
  mongoDocumentCount?: number;
  profile?: string;
  documentStore?: string;
  controller?: { nodeId?: string; softwareVersion?: string };
  blobs?: { count?: number };
  clusterId?: string;
  foreign?: boolean;
  manifestCreatedAt?: string;
}

interface ValidationReport {
  id: string;
  valid: boolean;
  [list: string]: unknown;
}

interface RestoreReport {
  dryRun: boolean;
  foreign?: boolean;
  filesystem: { applied: boolean; entryCount: number; rollbackRoot: string | null };
  datastores: { applied: boolean; mongoCollections: string[]; mongoPrefixGroups: string[]; redisPrefixes: string[] };
  /** A dry run's diff; absent from an older controller. */
  diff?: RestoreDiff | null;
}

interface IdList {
  count: number;
  ids: string[];
}

interface RestoreDiff {
  collections: { name: string; added: IdList; replaced: IdList; removed: IdList; unchanged: number }[];
  blobs: { added: IdList; removed: IdList } | null;
}

/** Ids of a list as one line: the ids the controller named, then `… and N more` for the rest. */
function idsText(list: IdList): string {
  const more = list.count - list.ids.length;
  return `${list.ids.join(", ")}${more > 0 ? `${list.ids.length > 0 ? ", " : ""}… and ${more} more` : ""}`;
}

/** A dry run's diff as lines: per collection what would be added, replaced and removed, then the template files. */
export function restoreDiffLines(diff: RestoreDiff): string[] {
  const lines: string[] = [];
  const width = Math.max(0, ...diff.collections.map((c) => c.name.length));
  for (const c of diff.collections) {
    const counts = `${c.added.count} added, ${c.replaced.count} replaced, ${c.removed.count} removed, ${c.unchanged} unchanged`;
    lines.push(`${c.name.padEnd(width)}  ${counts}`);
    for (const [label, list] of [
      ["add", c.added],
      ["replace", c.replaced],
      ["remove", c.removed],
    ] as const)
      if (list.count > 0) lines.push(`  ${label.padEnd(8)}${idsText(list)}`);
  }
  if (diff.blobs) {
    lines.push(`template files (blobs)  ${diff.blobs.added.count} stored, ${diff.blobs.removed.count} set aside`);
    if (diff.blobs.added.count > 0) lines.push(`  store   ${idsText(diff.blobs.added)}`);
    if (diff.blobs.removed.count > 0) lines.push(`  set aside ${idsText(diff.blobs.removed)}`);
  }
  return lines;
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
  const backup = program.command("backup").description("create, list, verify, download and upload backups of the control plane");

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
    .action(async (given: string, _opts, cmd: Command) => {
      const rt = runtime(cmd);
      const { result: response } = await withIdPrefix(rt.client(), ID_KINDS.backup, given, (id) => rt.client().get<BackupRecord>(backupPath(id)));
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
        ["cluster", r.clusterId ?? "-"],
        ["foreign", r.foreign === true ? "yes: not authenticated by this cluster (restore --foreign)" : "no"],
        ["made", r.manifestCreatedAt ?? r.createdAt],
      ]);
    });

  backup
    .command("verify <id>")
    .description("verify a bundle: every part against the manifest's checksums, required collections and prefixes (exit 1 when invalid)")
    .action(async (given: string, _opts, cmd: Command) => {
      const rt = runtime(cmd);
      const { id, result: response } = await withIdPrefix(rt.client(), ID_KINDS.backup, given, (id) =>
        rt.client().post<ValidationReport>(`${backupPath(id)}/verify`),
      );
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
    .action(async (given: string, opts: { yes?: boolean }, cmd: Command) => {
      const rt = runtime(cmd);
      const id = await idToConfirm(rt.client(), ID_KINDS.backup, given, !opts.yes && rt.prompter.interactive);
      await rt.confirm(`Delete backup ${id}? This cannot be undone.`, opts.yes);
      const { result: response } = await withIdPrefix(rt.client(), ID_KINDS.backup, id, (id) => rt.client().delete(backupPath(id)));
      if (rt.json) return rt.out.raw(response.raw);
      rt.out.success(`deleted backup ${rt.out.accent(id)}`);
    });

  backup
    .command("download <id>")
    .description("download a bundle, streamed to disk and checked against the sha256 the controller recorded")
    .option("-o, --out <file>", "where to write it (default backup-<id>.tar.gz; never overwritten)")
    .action(async (given: string, opts: { out?: string }, cmd: Command) => {
      const rt = runtime(cmd);
      const id = await resolveId(rt.client(), ID_KINDS.backup, given);
      const client = rt.client();
      const file = opts.out ?? `backup-${id}.tar.gz`;
      const record = (await client.get<BackupRecord>(backupPath(id))).data;
      const written = await downloadBundle(client, `${backupPath(id)}/download`, file);
      if (typeof record.sizeBytes === "number" && written.sizeBytes !== record.sizeBytes) {
        await unlink(written.partial).catch(() => undefined);
        throw new CliError(`download of backup ${id} is ${written.sizeBytes} bytes, the controller records ${record.sizeBytes}: nothing written`);
      }
      if (typeof record.sha256 === "string" && written.sha256 !== record.sha256) {
        await unlink(written.partial).catch(() => undefined);
        throw new CliError(`download of backup ${id} has sha256 ${written.sha256}, the controller records ${record.sha256}: nothing written`);
      }
      await keepAs(written.partial, file);
      const checked = typeof record.sha256 === "string";
      if (rt.json) return rt.out.raw(JSON.stringify({ id, file, sizeBytes: written.sizeBytes, sha256: written.sha256, sha256Checked: checked }));
      rt.out.success(
        `backup ${rt.out.accent(id)} written to ${file} (${formatBytes(written.sizeBytes)}, sha256 ${checked ? "matches the controller's" : written.sha256})`,
      );
    });

  backup
    .command("upload <file>")
    .description("upload a bundle taken elsewhere (streamed; the controller verifies it) and print its id")
    .action(async (file: string, _opts, cmd: Command) => {
      const rt = runtime(cmd);
      const response = await uploadBundle(rt.client(), "/api/v1/backups/upload", file);
      if (rt.json) return rt.out.raw(response.raw);
      const record = response.record;
      rt.out.line(record.id);
      rt.out.note(`uploaded: ${record.mongoDocumentCount ?? 0} documents, ${record.blobs?.count ?? 0} blobs, ${formatBytes(record.sizeBytes)}`);
      if (record.foreign === true)
        rt.out.note(`this cluster did not make it (or cannot authenticate it): an ADMIN restores it with cloudctl restore ${record.id} --foreign`);
    });

  program
    .command("restore <id>")
    .description("restore a backup: replaces the users, groups, instances, templates and audit log (asks first unless --yes or --dry-run)")
    .option("--dry-run", "report what would change and change nothing")
    .option("--filesystem", "restore the template files (only them, unless --datastores too)")
    .option("--datastores", "restore the database and key-value counters (only them, unless --filesystem too)")
    .option("--no-files", "leave the template files as they are")
    .option("--no-data", "leave the database and key-value counters as they are")
    .option(
      "--foreign",
      "take a bundle this cluster did not make or cannot authenticate (another cluster's: the migration path); ADMIN only; it brings that cluster's users",
    )
    .option("-y, --yes", "do not ask for confirmation")
    .action(async (given: string, opts: RestoreFlags & { yes?: boolean; foreign?: boolean }, cmd: Command) => {
      const rt = runtime(cmd);
      const parts = restoreParts(opts);
      const dryRun = opts.dryRun === true;
      const foreign = opts.foreign === true;
      const id = await idToConfirm(rt.client(), ID_KINDS.backup, given, !dryRun && !opts.yes && rt.prompter.interactive);
      if (!dryRun && !opts.yes) {
        const what = [parts.datastores ? "the database" : "", parts.filesystem ? "the template files" : ""].filter(Boolean).join(" and ");
        const trust = foreign ? " The bundle may be another cluster's: its users and roles replace these, unchecked by this cluster." : "";
        await rt.confirm(`Restore backup ${id}? This replaces ${what}, and everyone must sign in again.${trust}`, false);
      }
      const { result: response } = await withIdPrefix(rt.client(), ID_KINDS.backup, id, (id) =>
        rt.client().post<RestoreReport>("/api/v1/restore", { id, dryRun, ...parts, ...(foreign ? { foreign } : {}) }),
      );
      if (rt.json) return rt.out.raw(response.raw);
      const report = response.data;
      rt.out.fields([
        ["dry run", report.dryRun],
        ["foreign", report.foreign === true ? "yes: not authenticated by this cluster" : "no"],
        ["files applied", report.filesystem.applied],
        ["file entries", report.filesystem.entryCount],
        ["rollback copy", report.filesystem.rollbackRoot ?? "-"],
        ["data applied", report.datastores.applied],
        ["collections", `${report.datastores.mongoCollections.length}: ${report.datastores.mongoCollections.join(", ")}`],
        ["counters raised", report.datastores.redisPrefixes.join(", ") || "-"],
      ]);
      if (report.diff) {
        rt.out.line("");
        rt.out.line("What the restore would change:");
        for (const line of restoreDiffLines(report.diff)) rt.out.line(`  ${line}`);
      }
      if (!dryRun && parts.datastores) rt.out.note("the users were restored: sign in again (cloudctl login)");
    });
}

/**
 * Sends a request whose body may take as long as it takes. A download is aborted when its response
 * headers do not come within the client's request timeout; an upload is not bounded (its answer
 * only comes once the controller has received and verified the whole bundle).
 */
async function fetchStreaming(client: HttpClient, url: string, init: RequestInit & { duplex?: "half" }, headersTimeoutMs: number | null): Promise<Response> {
  const controller = new AbortController();
  const timer =
    headersTimeoutMs === null ? undefined : setTimeout(() => controller.abort(new Error(`no response within ${headersTimeoutMs} ms`)), headersTimeoutMs);
  try {
    return await fetch(url, { ...init, signal: controller.signal });
  } catch (error) {
    const err = error as { message?: string; cause?: { code?: string; message?: string } };
    throw new CliError(`cannot reach ${client.baseUrl}: ${err.cause?.code ?? err.cause?.message ?? err.message ?? String(error)}`, ExitCode.connection);
  } finally {
    clearTimeout(timer);
  }
}

/** Streams a GET body to `<file>.partial`, hashing it as it comes. */
async function downloadBundle(client: HttpClient, path: string, file: string): Promise<{ partial: string; sizeBytes: number; sha256: string }> {
  if (await exists(file)) throw new CliError(`${file} already exists: remove it or choose another --out`);
  const url = client.url(path);
  const headers = { ...client.headers(true), accept: "application/gzip" };
  client.logRequest("GET", url, headers);
  const response = await fetchStreaming(client, url, { headers }, requestTimeoutMs);
  if (!response.ok || !response.body) throw errorFromResponse(response.status, response.statusText, await response.text());
  const partial = `${file}.partial`;
  const handle = await open(partial, "w", 0o600);
  const hash = createHash("sha256");
  let sizeBytes = 0;
  let complete = false;
  try {
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
      hash.update(chunk);
      for (let at = 0; at < chunk.byteLength;) at += (await handle.write(chunk, at)).bytesWritten;
      sizeBytes += chunk.byteLength;
    }
    await handle.sync();
    complete = true;
  } catch (error) {
    throw new CliError(`download broke off after ${sizeBytes} bytes: ${(error as Error).message}`, ExitCode.connection);
  } finally {
    await handle.close();
    if (!complete) await unlink(partial).catch(() => undefined);
  }
  return { partial, sizeBytes, sha256: hash.digest("hex") };
}

/** Gives a checked download its name, refusing to replace a file that appeared meanwhile. */
async function keepAs(partial: string, file: string): Promise<void> {
  try {
    await link(partial, file);
  } catch (error) {
    await unlink(partial).catch(() => undefined);
    if ((error as { code?: string }).code === "EEXIST") throw new CliError(`${file} already exists: remove it or choose another --out`);
    throw error;
  }
  await unlink(partial);
}

/** Streams `file` as the body of a POST; the record the controller answers with. */
async function uploadBundle(client: HttpClient, path: string, file: string): Promise<{ raw: string; record: BackupRecord }> {
  const info = await stat(file).catch((error: { code?: string; message?: string }) => {
    throw new CliError(error.code === "ENOENT" ? `${file} does not exist` : `cannot read ${file}: ${error.message}`);
  });
  if (!info.isFile()) throw new CliError(`${file} is not a file`);
  const url = client.url(path);
  const headers = { ...client.headers(true), "content-type": "application/gzip", "content-length": String(info.size) };
  client.logRequest("POST", url, headers);
  const body = Readable.toWeb(createReadStream(file)) as ReadableStream<Uint8Array>;
  const response = await fetchStreaming(client, url, { method: "POST", headers, body, duplex: "half" }, null);
  const raw = await response.text();
  if (!response.ok) throw errorFromResponse(response.status, response.statusText, raw);
  return { raw, record: JSON.parse(raw) as BackupRecord };
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}
