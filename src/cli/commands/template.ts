/**
 * `cloudctl template list|create|delete|versions|rollback|vars`, and the file commands of
 * commands/template-files.ts (files, upload, download, cat, edit, import, export).
 */
import type { Command } from "commander";
import { CliError, usageError } from "../exit-codes.js";
import { listOf, segment } from "../http-client.js";
import { collect } from "../options.js";
import { formatBytes, shortHash } from "../render.js";
import type { RuntimeFactory } from "../runtime.js";
import { registerTemplateFileCommands } from "./template-files.js";

interface TemplateRecord {
  name: string;
  description?: string;
  platform?: string;
  hash?: string;
  sizeBytes?: number;
}

/** A version snapshot; the controller lists them newest first. */
export interface TemplateVersion {
  templateName?: string;
  hash: string;
  sizeBytes?: number;
  createdAt?: string;
}

/** A placeholder the controller found in a template's text files. */
interface ScannedVariable {
  name: string;
  defined: boolean;
  builtIn?: boolean;
  files: string[];
}

/** Names and meaning of the placeholders every instance gets (src/wire/template-text.ts). */
const INSTANCE_PLACEHOLDER_HELP = "{{instanceId}}, {{group}}, {{port}}, {{memoryMb}} and {{platform}}";

/** The variables after `--set name=value` and `--unset name`; a `--set` without `=` is a usage error. */
export function nextVariables(current: Readonly<Record<string, string>>, flags: { set: string[]; unset: string[] }): Record<string, string> {
  const next: Record<string, string> = { ...current };
  for (const pair of flags.set) {
    const at = pair.indexOf("=");
    if (at <= 0) throw usageError(`--set ${pair}: expected name=value`);
    next[pair.slice(0, at)] = pair.slice(at + 1);
  }
  for (const name of flags.unset) delete next[name];
  return next;
}

/** The version `rollback` without `--hash` goes back to: the second newest. */
export function previousVersion(versions: TemplateVersion[]): TemplateVersion | undefined {
  return versions.length >= 2 ? versions[1] : undefined;
}

/** Registers the template commands. */
export function registerTemplateCommands(program: Command, runtime: RuntimeFactory): void {
  const template = program.command("template").description("templates: the files an instance starts from, their versions and {{placeholders}}");

  template
    .command("list")
    .alias("ls")
    .description("list templates")
    .action(async (_opts, cmd: Command) => {
      const rt = runtime(cmd);
      const response = await rt.client().get("/api/v1/templates");
      if (rt.json) return rt.out.raw(response.raw);
      rt.out.table(
        ["NAME", "HASH", "SIZE", "DESCRIPTION"],
        listOf<TemplateRecord>(response.data).map((t) => [rt.out.accent(t.name), shortHash(t.hash), formatBytes(t.sizeBytes), t.description ?? ""]),
      );
    });

  template
    .command("create <name>")
    .description("create an empty template (then: template upload, edit or import)")
    .option("--description <text>", "what it holds")
    .option("--platform <platform>", "the platform it is for")
    .action(async (name: string, flags: { description?: string; platform?: string }, cmd: Command) => {
      const rt = runtime(cmd);
      const response = await rt.client().post<TemplateRecord>("/api/v1/templates", { name, ...flags });
      if (rt.json) return rt.out.raw(response.raw);
      rt.out.success(`created template ${rt.out.accent(name)}`);
    });

  template
    .command("delete <name>")
    .alias("rm")
    .description("delete a template with its versions (asks first)")
    .option("-y, --yes", "do not ask for confirmation")
    .action(async (name: string, flags: { yes?: boolean }, cmd: Command) => {
      const rt = runtime(cmd);
      const client = rt.client();
      await rt.confirm(`Delete template "${name}" and every version of it? This cannot be undone.`, flags.yes);
      const response = await client.delete(`/api/v1/templates/${segment(name)}`);
      if (rt.json) return rt.out.raw(response.raw || "{}");
      rt.out.success(`deleted template ${rt.out.accent(name)}`);
    });

  template
    .command("vars <name>")
    .description("the template's {{variables}} and the placeholders its files use; --set and --unset change the variables")
    .option("--set <name=value>", "define a variable (repeatable)", collect, [])
    .option("--unset <name>", "remove a variable (repeatable)", collect, [])
    .addHelpText("after", `\nEvery instance also gets ${INSTANCE_PLACEHOLDER_HELP}, whatever the template defines.`)
    .action(async (name: string, flags: { set: string[]; unset: string[] }, cmd: Command) => {
      const rt = runtime(cmd);
      const client = rt.client();
      const base = `/api/v1/templates/${segment(name)}/variables`;
      const current = (await client.get<{ variables: Record<string, string> }>(base)).data.variables;
      if (flags.set.length > 0 || flags.unset.length > 0) {
        const response = await client.request<{ variables: Record<string, string> }>("PUT", base, { body: { variables: nextVariables(current, flags) } });
        if (rt.json) return rt.out.raw(response.raw);
        return rt.out.success(`${name}: ${Object.keys(response.data.variables).length} variable(s)`);
      }
      const scan = (await client.get<{ variables: ScannedVariable[]; truncated?: boolean }>(`${base}/scan`)).data;
      if (rt.json) return rt.out.jsonValue({ variables: current, placeholders: scan.variables, truncated: scan.truncated ?? false });
      const names = [...new Set([...Object.keys(current), ...scan.variables.map((v) => v.name)])].sort();
      rt.out.table(
        ["NAME", "VALUE", "FILLED BY", "FILES"],
        names.map((n) => {
          const found = scan.variables.find((v) => v.name === n);
          const by = found?.builtIn ? "the daemon (every instance)" : Object.hasOwn(current, n) ? "this template" : "nobody: stays as written";
          return [rt.out.accent(n), current[n] ?? "", by, (found?.files ?? []).join(", ")];
        }),
      );
      if (scan.truncated) rt.out.note("the scan stopped early: the template has more text than it reads");
    });

  template
    .command("versions <name>")
    .description("list the version snapshots of a template (highest number = newest)")
    .action(async (name: string, _opts, cmd: Command) => {
      const rt = runtime(cmd);
      const response = await rt.client().get(`/api/v1/templates/${segment(name)}/versions`);
      if (rt.json) return rt.out.raw(response.raw);
      const versions = listOf<TemplateVersion>(response.data);
      rt.out.table(
        ["#", "HASH", "SIZE", "CREATED"],
        versions.map((v, index) => [versions.length - index, v.hash, formatBytes(v.sizeBytes), v.createdAt ?? ""]),
      );
    });

  template
    .command("rollback <name>")
    .description("restore a version: --hash <hash>, or the previous version when omitted")
    .option("--hash <hash>", "full hash of the version to restore (see `template versions`)")
    .action(async (name: string, opts: { hash?: string }, cmd: Command) => {
      const rt = runtime(cmd);
      const client = rt.client();
      const base = `/api/v1/templates/${segment(name)}`;
      let hash = opts.hash?.trim();
      if (opts.hash !== undefined && !hash) throw new CliError("--hash must not be blank");
      if (!hash) {
        const versions = listOf<TemplateVersion>((await client.get(`${base}/versions`)).data);
        const previous = previousVersion(versions);
        if (!previous) throw new CliError(`template ${name} has no previous version to roll back to`);
        hash = previous.hash;
      }
      const response = await client.post<{ status?: string; hash?: string }>(`${base}/rollback`, { hash });
      if (rt.json) return rt.out.raw(response.raw);
      rt.out.success(`template ${rt.out.accent(name)}: ${response.data?.status ?? "restored"} ${response.data?.hash ?? hash}`);
    });

  registerTemplateFileCommands(template, runtime);
}
