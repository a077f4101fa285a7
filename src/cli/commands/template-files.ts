/**
 * The files of a template from cloudctl (docs/decisions/templates.md, "Routes"): `template files`
 * (a directory, `-R` the whole tree), `upload` (files or directories, streamed as multipart, `--to`
 * a directory, `--extract` unzips a ZIP), `download` (one file), `cat`, `edit` (in $VISUAL or
 * $EDITOR, or `--from <file|->` without an editor), `import` and `export` (tar.gz, streamed).
 * Downloads never replace an existing file unless `--force`; `-o -` writes to standard output.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join, relative, sep } from "node:path";
import type { Command } from "commander";
import { CliError, usageError } from "../exit-codes.js";
import { segment, type HttpClient } from "../http-client.js";
import { formatBytes } from "../render.js";
import type { Runtime, RuntimeFactory } from "../runtime.js";
import { downloadTo, uploadParts, type UploadPart } from "../transfer.js";

/** Files one upload sends at most (the controller bounds the body to 256 MiB). */
export const uploadFilesMax = 10_000;
/** Entries `files -R` lists at most. */
export const listedEntriesMax = 10_000;

interface FileEntry {
  name: string;
  path: string;
  type: "file" | "directory";
  size?: number;
  mode?: number;
  sha256?: string;
}

interface ChangeAnswer {
  oldHash: string;
  newHash: string;
  changed: boolean;
}

const templatePath = (name: string) => `/api/v1/templates/${segment(name)}`;

/** The parts of an upload: each file as given, each directory's files below it (paths relative to it). */
export function uploadPartsOf(localPaths: readonly string[]): UploadPart[] {
  const parts: UploadPart[] = [];
  const add = (localPath: string, name: string) => {
    if (parts.length >= uploadFilesMax) throw new CliError(`more than ${uploadFilesMax} files: upload them in several steps`);
    parts.push({ localPath, name, sizeBytes: statSync(localPath).size });
  };
  for (const given of localPaths) {
    let info;
    try {
      info = statSync(given);
    } catch {
      throw new CliError(`${given} does not exist`);
    }
    if (info.isFile()) add(given, basename(given));
    else if (info.isDirectory()) {
      const walk = (dir: string) => {
        for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
          const full = join(dir, entry.name);
          if (entry.isDirectory()) walk(full);
          else if (entry.isFile()) add(full, relative(given, full).split(sep).join("/"));
        }
      };
      walk(given);
    } else throw new CliError(`${given} is neither a file nor a directory`);
  }
  if (parts.length === 0) throw new CliError("nothing to upload: the directories are empty");
  return parts;
}

async function listTree(client: HttpClient, name: string, path: string, version: string | undefined, recursive: boolean): Promise<FileEntry[]> {
  const out: FileEntry[] = [];
  const queue = [path];
  while (queue.length > 0) {
    const dir = queue.shift()!;
    const listing = (await client.get<{ entries?: FileEntry[] }>(`${templatePath(name)}/files`, { path: dir, version })).data;
    for (const entry of listing.entries ?? []) {
      if (out.length >= listedEntriesMax) return out;
      out.push(entry);
      if (recursive && entry.type === "directory") queue.push(entry.path);
    }
  }
  return out;
}

function printChange(rt: Runtime, raw: string, change: ChangeAnswer, what: string): void {
  if (rt.json) return rt.out.raw(raw);
  rt.out.success(change.changed ? `${what}; template hash ${change.oldHash.slice(0, 8)} → ${change.newHash.slice(0, 8)}` : `${what}; nothing changed`);
}

/** Runs the editor on `file`; false when it failed. A terminal is handed to it. */
function runEditor(env: NodeJS.ProcessEnv, file: string): boolean {
  const editor = env.VISUAL || env.EDITOR || "vi";
  // Through the shell, so an editor with arguments (EDITOR="code --wait") works; the file is "$1".
  const result = spawnSync("sh", ["-c", `${editor} "$1"`, "sh", file], { stdio: "inherit", env });
  return result.status === 0;
}

/** Registers the file commands under `template`. */
export function registerTemplateFileCommands(template: Command, runtime: RuntimeFactory): void {
  template
    .command("files <name> [path]")
    .description("list a directory of a template (the root by default); -R lists the whole tree")
    .option("-R, --recursive", "every directory below as well")
    .option("--version <hash>", "a version's files instead of the current ones")
    .action(async (name: string, path: string | undefined, flags: { recursive?: boolean; version?: string }, cmd: Command) => {
      const rt = runtime(cmd);
      const client = rt.client();
      if (rt.json && !flags.recursive) return rt.out.raw((await client.get(`${templatePath(name)}/files`, { path, version: flags.version })).raw);
      const entries = await listTree(client, name, path ?? "", flags.version, Boolean(flags.recursive));
      if (rt.json) return rt.out.jsonValue(entries);
      rt.out.table(
        ["TYPE", "SIZE", "PATH"],
        entries.map((e) => [
          e.type === "directory" ? "dir" : "file",
          e.type === "directory" ? "" : formatBytes(e.size),
          e.type === "directory" ? `${e.path}/` : e.path,
        ]),
      );
    });

  template
    .command("upload <name> <files...>")
    .description("upload files and directories (a directory's files keep their paths below it), streamed")
    .option("--to <dir>", "the template directory to put them in (default: the root)")
    .option("--extract", "unzip an uploaded .zip in place")
    .action(async (name: string, files: string[], flags: { to?: string; extract?: boolean }, cmd: Command) => {
      const rt = runtime(cmd);
      const parts = uploadPartsOf(files);
      const raw = await uploadParts(
        rt.client(),
        `${templatePath(name)}/files/upload`,
        { path: flags.to, extract: flags.extract ? "true" : undefined },
        "file",
        parts,
      );
      const total = parts.reduce((sum, p) => sum + p.sizeBytes, 0);
      printChange(rt, raw, JSON.parse(raw) as ChangeAnswer, `uploaded ${parts.length} file(s), ${formatBytes(total)}, to ${name}:/${flags.to ?? ""}`);
    });

  template
    .command("download <name> <path>")
    .description("download one file of a template")
    .option("-o, --out <file>", "where to write it (default: its name here; - for standard output)")
    .option("--force", "replace an existing file")
    .option("--version <hash>", "from a version instead of the current files")
    .action(async (name: string, path: string, flags: { out?: string; force?: boolean; version?: string }, cmd: Command) => {
      const rt = runtime(cmd);
      const out = flags.out ?? basename(path);
      const { sizeBytes } = await downloadTo(rt.client(), `${templatePath(name)}/files/download`, { path, version: flags.version }, out, Boolean(flags.force));
      if (out === "-") return;
      if (rt.json) return rt.out.jsonValue({ template: name, path, file: out, sizeBytes });
      rt.out.success(`${name}:/${path} written to ${out} (${formatBytes(sizeBytes)})`);
    });

  template
    .command("cat <name> <path>")
    .description("print a text file of a template")
    .option("--version <hash>", "from a version instead of the current files")
    .action(async (name: string, path: string, flags: { version?: string }, cmd: Command) => {
      const rt = runtime(cmd);
      const response = await rt.client().get<{ content: string }>(`${templatePath(name)}/files/content`, { path, version: flags.version });
      if (rt.json) return rt.out.raw(response.raw);
      process.stdout.write(response.data.content);
    });

  template
    .command("edit <name> <path>")
    .description("edit a text file of a template in $VISUAL or $EDITOR (a new file when it does not exist), or replace it --from a file")
    .option("--from <file>", "take the new content from this file (- for standard input) instead of an editor")
    .action(async (name: string, path: string, flags: { from?: string }, cmd: Command) => {
      const rt = runtime(cmd);
      const client = rt.client();
      let content: string;
      if (flags.from !== undefined) content = readFileSync(flags.from === "-" ? 0 : flags.from, "utf8");
      else {
        const current = await client
          .get<{ content: string }>(`${templatePath(name)}/files/content`, { path })
          .then((r) => r.data.content)
          .catch((error: { status?: number }) => {
            if (error.status === 404) return "";
            throw error;
          });
        const dir = mkdtempSync(join(tmpdir(), "cloudctl-edit-"));
        const file = join(dir, basename(path) || "file");
        try {
          writeFileSync(file, current, { mode: 0o600 });
          if (!runEditor(rt.io.env, file)) throw new CliError("the editor failed: nothing was changed");
          content = readFileSync(file, "utf8");
        } finally {
          rmSync(dir, { recursive: true, force: true });
        }
        if (content === current) {
          rt.out.note("no change: nothing was sent");
          return;
        }
      }
      const response = await client.request<ChangeAnswer>("PUT", `${templatePath(name)}/files/content`, { body: { path, content } });
      printChange(rt, response.raw, response.data, `${name}:/${path} saved`);
    });

  template
    .command("import <file>")
    .description("create a template from a tar.gz (or tar) archive, streamed")
    .requiredOption("--name <name>", "the new template's name")
    .option("--description <text>", "its description")
    .option("--platform <platform>", "its platform")
    .action(async (file: string, flags: { name: string; description?: string; platform?: string }, cmd: Command) => {
      const rt = runtime(cmd);
      const parts = uploadPartsOf([file]);
      if (parts.length !== 1) throw usageError("import takes one archive file");
      const raw = await uploadParts(
        rt.client(),
        "/api/v1/templates/import",
        { name: flags.name, description: flags.description, platform: flags.platform },
        "file",
        parts,
      );
      if (rt.json) return rt.out.raw(raw);
      const created = JSON.parse(raw) as { name: string; hash: string; sizeBytes?: number };
      rt.out.success(`imported template ${rt.out.accent(created.name)} (${created.hash.slice(0, 8)}, ${formatBytes(created.sizeBytes)})`);
    });

  template
    .command("export <name>")
    .description("download a template's files as tar.gz, streamed")
    .option("-o, --out <file>", "where to write it (default <name>-<hash>.tar.gz; - for standard output)")
    .option("--force", "replace an existing file")
    .option("--version <hash>", "a version instead of the current files")
    .action(async (name: string, flags: { out?: string; force?: boolean; version?: string }, cmd: Command) => {
      const rt = runtime(cmd);
      const client = rt.client();
      const hash = flags.version ?? (await client.get<{ hash: string }>(templatePath(name))).data.hash;
      const out = flags.out ?? `${name}-${hash.slice(0, 12)}.tar.gz`;
      const { sizeBytes } = await downloadTo(client, `${templatePath(name)}/export`, { version: flags.version }, out, Boolean(flags.force));
      if (out === "-") return;
      if (rt.json) return rt.out.jsonValue({ template: name, hash, file: out, sizeBytes });
      rt.out.success(`template ${rt.out.accent(name)} (${hash.slice(0, 8)}) written to ${out} (${formatBytes(sizeBytes)})`);
    });
}
