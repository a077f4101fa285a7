/** `cloudctl template list|versions|rollback`. */
import type { Command } from "commander";
import { CliError } from "../exit-codes.js";
import { listOf, segment } from "../http-client.js";
import { formatBytes, shortHash } from "../render.js";
import type { RuntimeFactory } from "../runtime.js";

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

/** The version `rollback` without `--hash` goes back to: the second newest. */
export function previousVersion(versions: TemplateVersion[]): TemplateVersion | undefined {
  return versions.length >= 2 ? versions[1] : undefined;
}

/** Registers the template commands. */
export function registerTemplateCommands(program: Command, runtime: RuntimeFactory): void {
  const template = program.command("template").description("inspect templates and roll back versions");

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
}
