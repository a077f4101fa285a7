/**
 * `cloudctl diagnostics bundle` (alias `diag`): the redacted diagnostics as a tar.gz with the
 * spec's entries manifest.json, readiness.json, overview.json, settings.json, config.json,
 * redis.json (the key-value summary, whatever the key-value store is: the name is the spec's),
 * leases.json and logs.txt (`--log-lines`, 500 by default, fetched at DEBUG; 0 leaves it out),
 * plus what a support case needs next: nodes.json, groups.json, crashes.json (the newest 50) and
 * daemon-logs/<node>.txt (each node's mirrored daemon log, as many records as logs.txt). What the
 * caller may not read (or the controller cannot answer) is an entry `{"error": …}` saying so.
 * Written to `--out` (default `diagnostics-<time>.tar.gz`); an existing file is not overwritten
 * unless `--force`, as `backup download` never does. With `--share` it uploads the bundle instead
 * and prints the link.
 */
import { createWriteStream } from "node:fs";
import { pipeline } from "node:stream/promises";
import { createGzip } from "node:zlib";
import type { Command } from "commander";
import tarStream from "tar-stream";
import { CliError } from "../exit-codes.js";
import { listOf, segment, type HttpClient } from "../http-client.js";
import type { RuntimeFactory } from "../runtime.js";
import { addShareFlags, formatLogLine, parseLogLines, printShare, shareBody, type LogRecordView, type ShareAnswer, type ShareFlags } from "./logs.js";

/** Crash records in crashes.json. */
export const bundleCrashesMax = 50;

interface DiagnosticsView {
  generatedAt?: string;
  readiness?: unknown;
  overview?: unknown;
  settings?: unknown;
  config?: unknown;
  kv?: unknown;
  leases?: unknown;
  logs?: { records?: LogRecordView[]; size?: number; capacity?: number; level?: string };
}

/** Registers `diagnostics bundle`. */
export function registerDiagnosticsCommands(program: Command, runtime: RuntimeFactory): void {
  const diagnostics = program.command("diagnostics").alias("diag").description("redacted support data");
  const bundle = diagnostics
    .command("bundle")
    .description("write the redacted diagnostics, nodes, groups, crashes and daemon logs as a tar.gz (or upload them with --share)")
    .option("-o, --out <file>", "where to write the archive (default diagnostics-<time>.tar.gz; an existing file is kept unless --force)")
    .option("--force", "replace an existing --out file")
    .option("--log-lines <n>", "controller and daemon log records, fetched at DEBUG (0 leaves the logs out)", parseLogLines, 500)
    .option("--share", "upload the redacted bundle and print the link instead of writing a file");
  addShareFlags(bundle).action(async (opts: { out?: string; force?: boolean; logLines: number; share?: boolean } & ShareFlags, cmd: Command) => {
    const rt = runtime(cmd);
    const client = rt.client();
    if (opts.share) {
      const response = await client.post<ShareAnswer>("/api/v1/system/diagnostics/share", { logLines: opts.logLines, logLevel: "DEBUG", ...shareBody(opts) });
      return printShare(rt.out, response.raw, response.data);
    }
    const response = await client.get<DiagnosticsView>("/api/v1/system/diagnostics", { logLines: String(opts.logLines), logLevel: "DEBUG" });
    const out = opts.out ?? `diagnostics-${new Date().toISOString().replace(/[:.]/g, "-")}.tar.gz`;
    const extra = await supportEntries(client, opts.logLines);
    const entries = await writeBundle(out, Boolean(opts.force), response.data, extra, client.url(""), opts.logLines);
    if (rt.json) return rt.out.jsonValue({ file: out, entries });
    rt.out.success(`wrote ${out} (${entries.join(", ")})`);
  });
}

const json = (value: unknown) => `${JSON.stringify(value ?? null, null, 2)}\n`;

/** What the diagnostics route does not carry: nodes, groups, the newest crashes and each node's daemon log. */
async function supportEntries(client: HttpClient, logLines: number): Promise<[string, string][]> {
  const read = (path: string, query?: Record<string, string | number>) =>
    client.get(path, query).then(
      (response) => response.data,
      (error: Error) => ({ error: error.message }),
    );
  const [nodes, groups, crashes] = await Promise.all([read("/api/v1/nodes"), read("/api/v1/groups"), read("/api/v1/crashes", { limit: bundleCrashesMax })]);
  const entries: [string, string][] = [
    ["nodes.json", json(nodes)],
    ["groups.json", json(groups)],
    ["crashes.json", json(crashes)],
  ];
  if (logLines === 0) return entries;
  for (const node of listOf<{ id?: string }>(nodes)) {
    if (typeof node.id !== "string") continue;
    const answer = (await read(`/api/v1/nodes/${segment(node.id)}/logs`, { limit: logLines, level: "DEBUG" })) as { records?: LogRecordView[]; error?: string };
    const text = answer.error !== undefined ? `(not read: ${answer.error})\n` : (answer.records ?? []).map((r) => `${formatLogLine(r)}\n`).join("");
    entries.push([`daemon-logs/${node.id}.txt`, text]);
  }
  return entries;
}

/** Streams the archive to `file` (created anew unless `force`); resolves with its entry names. */
async function writeBundle(
  file: string,
  force: boolean,
  d: DiagnosticsView,
  extra: [string, string][],
  controllerUrl: string,
  logLines: number,
): Promise<string[]> {
  const files: [string, string][] = [
    ["readiness.json", json(d.readiness)],
    ["overview.json", json(d.overview)],
    ["settings.json", json(d.settings)],
    ["config.json", json(d.config)],
    ["redis.json", json(d.kv)],
    ["leases.json", json(d.leases)],
  ];
  if (logLines > 0) files.push(["logs.txt", (d.logs?.records ?? []).map((r) => `${formatLogLine(r)}\n`).join("")]);
  files.push(...extra);
  const manifest = {
    generatedAt: d.generatedAt ?? new Date().toISOString(),
    controller: controllerUrl.replace(/\/+$/, ""),
    logLines,
    logRecords: d.logs?.records?.length ?? 0,
    entries: ["manifest.json", ...files.map(([name]) => name)],
  };
  const target = createWriteStream(file, { mode: 0o600, flags: force ? "w" : "wx" });
  await new Promise<void>((resolve, reject) => {
    target.once("open", () => resolve());
    target.once("error", (error: NodeJS.ErrnoException) =>
      reject(error.code === "EEXIST" ? new CliError(`${file} already exists: remove it, choose another --out, or pass --force`) : error),
    );
  });
  const pack = tarStream.pack();
  const written = pipeline(pack, createGzip(), target);
  const mtime = new Date();
  for (const [name, text] of [["manifest.json", json(manifest)] as [string, string], ...files]) {
    await new Promise<void>((resolve, reject) => pack.entry({ name, mode: 0o600, mtime }, text, (err) => (err ? reject(err) : resolve())));
  }
  pack.finalize();
  await written;
  return manifest.entries;
}
