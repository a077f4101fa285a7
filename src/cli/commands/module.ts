/**
 * `cloudctl module list|upload|install|upgrade|delete|search|doctor` (spec document 3, "Client
 * commands for modules and plugins") over the module management routes: a local bundle goes to the
 * upload route (multipart, with its signature sidecar), a registry spec to the registry install
 * route; `upgrade` reinstalls the version the registry catalog advertises (or, with `--bundle`, a
 * local build); `doctor` checks a bundle locally (commands/module-doctor.ts). Reading needs
 * modules.view, changing MODULES_MANAGE. Decisions: docs/decisions/modules.md ("cloudctl").
 */
import type { Command } from "commander";
import semver from "semver";
import { CliError, ExitCode, usageError } from "../exit-codes.js";
import { ApiRequestError, listOf, segment, type HttpClient } from "../http-client.js";
import type { Runtime, RuntimeFactory } from "../runtime.js";
import { registerModuleDoctor } from "./module-doctor.js";
import { checkBundleFile, installSource, sendBundle, signatureFor } from "./module-files.js";

/** The fields of `GET /api/v1/modules` cloudctl shows. */
interface ModuleView {
  id: string;
  version: string;
  state: string;
  health: string | null;
  hasFrontend: boolean;
  platformPluginCount: number;
  signed: boolean;
  signedBy: string | null;
  source: string;
  failure: { cause: string; reason: string } | null;
}

/** `GET /api/v1/modules/platform/registry`. */
export interface Catalog {
  registries: { url: string; reachable: boolean; error: string | null; moduleCount: number }[];
  modules: { id: string; registry: string; description: string; tags: string[]; latest: string; installedVersion: string | null; unsigned: boolean }[];
}

interface Requirement {
  moduleId: string;
  capabilityId: string;
  versionRange: string;
  resolved: boolean;
  provider: { moduleId: string; version: string; deprecated: boolean } | null;
}

const MODULES = "/api/v1/modules";
const PLATFORM = "/api/v1/modules/platform";

/** The catalog entries `query` selects: a case-insensitive substring of the id or of a tag. */
export function searchCatalog(catalog: Catalog, query: string | undefined): Catalog["modules"] {
  const needle = (query ?? "").trim().toLowerCase();
  if (needle === "") return catalog.modules;
  return catalog.modules.filter((m) => m.id.toLowerCase().includes(needle) || m.tags.some((tag) => tag.toLowerCase().includes(needle)));
}

/** What `upgrade` does for one installed module given the catalog's offer: install that version, or nothing and why. */
export function upgradePlan(installed: string, offered: string): { install: boolean; reason: string } {
  if (semver.valid(installed) && semver.valid(offered)) {
    if (semver.eq(installed, offered)) return { install: false, reason: `${installed} is the version the registry offers: nothing to do` };
    if (semver.gt(installed, offered)) return { install: false, reason: `${installed} is newer than the registry's ${offered}: left as it is` };
  }
  return { install: true, reason: `${installed} → ${offered}` };
}

function printModule(rt: Runtime, raw: string, verb: string): ModuleView {
  const view = JSON.parse(raw) as ModuleView;
  if (rt.json) rt.out.raw(raw);
  else
    rt.out.success(
      `${verb} ${rt.out.accent(view.id)} ${view.version}: ${rt.out.state(view.state)}${view.signedBy ? ` (signed by ${view.signedBy})` : view.signed ? "" : " (unsigned)"}`,
    );
  return view;
}

/** `--check-requires`: one line per required capability and whether a provider in range is bound (never fatal). */
async function printRequirements(rt: Runtime, client: HttpClient, moduleId: string): Promise<void> {
  let requirements: Requirement[];
  try {
    requirements = (await client.get<{ requirements: Requirement[] }>(`${PLATFORM}/capabilities`)).data.requirements.filter((r) => r.moduleId === moduleId);
  } catch (error) {
    rt.out.note(`could not read the capabilities: ${(error as Error).message}`);
    return;
  }
  const print = (text: string) => (rt.json ? rt.out.note(text) : rt.out.line(text));
  if (requirements.length === 0) print(`${moduleId} requires no capability`);
  for (const r of requirements)
    print(
      r.provider
        ? `requires ${r.capabilityId} ${r.versionRange}: provided by module ${r.provider.moduleId} (${r.capabilityId} ${r.provider.version}${r.provider.deprecated ? ", deprecated" : ""})`
        : `requires ${r.capabilityId} ${r.versionRange}: no provider in range (the module stays UNRESOLVED until one is installed)`,
    );
}

async function installBundle(rt: Runtime, path: string, signature: string | undefined): Promise<ModuleView> {
  checkBundleFile(path);
  const client = rt.client();
  const raw = await sendBundle(client, `${PLATFORM}/upload`, path, signatureFor(path, signature, rt.out));
  return printModule(rt, raw, "installed");
}

/** Upgrades one installed module to the version the catalog offers, or says why it does nothing. */
async function upgradeFromCatalog(rt: Runtime, client: HttpClient, catalog: Catalog, installed: ModuleView[], id: string, all: boolean): Promise<void> {
  const current = installed.find((m) => m.id === id);
  if (!current) throw new CliError(`module ${id} is not installed (see \`cloudctl module list\`)`, ExitCode.notFound);
  const offer = catalog.modules.find((m) => m.id === id);
  if (!offer) {
    const unreachable = catalog.registries.filter((r) => !r.reachable).map((r) => `${r.url}: ${r.error}`);
    const why = unreachable.length > 0 ? ` (unreachable: ${unreachable.join("; ")})` : "";
    if (all) return rt.out.note(`${id}: not offered by any configured registry${why}: skipped`);
    throw new CliError(`module ${id} is not offered by any configured registry${why}`);
  }
  const plan = upgradePlan(current.version, offer.latest);
  if (!plan.install) return rt.out.note(`${id}: ${plan.reason}`);
  const response = await client.post<ModuleView>(`${PLATFORM}/registry/install`, { module: `${id}@${offer.latest}`, registry: offer.registry });
  if (rt.json) return rt.out.raw(response.raw);
  rt.out.success(`upgraded ${rt.out.accent(id)} ${current.version} → ${response.data.version}: ${rt.out.state(response.data.state)}`);
}

/** Registers `module`. */
export function registerModuleCommands(program: Command, runtime: RuntimeFactory): void {
  const module = program
    .command("module")
    .alias("modules")
    .description("platform modules: signed bundles the controllers run (modules.view; changes need MODULES_MANAGE)");

  module
    .command("list")
    .alias("ls")
    .description("list installed modules with their state on the controller answering")
    .action(async (_opts, cmd: Command) => {
      const rt = runtime(cmd);
      const response = await rt.client().get(MODULES);
      if (rt.json) return rt.out.raw(response.raw);
      rt.out.table(
        ["MODULE", "VERSION", "STATE", "HEALTH", "FRONTEND", "PLUGINS", "SIGNED BY", "SOURCE"],
        listOf<ModuleView>(response.data).map((m) => [
          rt.out.accent(m.id),
          m.version,
          rt.out.state(m.state) + (m.failure ? ` (${m.failure.cause}: ${m.failure.reason})` : ""),
          m.health ?? "",
          m.hasFrontend ? "yes" : "no",
          m.platformPluginCount,
          m.signedBy ?? (m.signed ? "" : "unsigned"),
          m.source,
        ]),
      );
    });

  module
    .command("upload <bundle>")
    .description("install a local bundle (.tgz, .tar.gz, .tar or .zip) with its signature sidecar (<bundle>.sig unless --signature)")
    .option("--signature <file>", "the detached signature (default: <bundle>.sig when it exists)")
    .action(async (path: string, flags: { signature?: string }, cmd: Command) => {
      await installBundle(runtime(cmd), path, flags.signature);
    });

  module
    .command("install <bundle-or-spec>")
    .description("install a local bundle, or id[@version] from a configured registry (@latest or none: the newest)")
    .option("--signature <file>", "a local bundle's detached signature (default: <bundle>.sig when it exists)")
    .option("--registry <url>", "pull from this one of the configured registries (modules.registries)")
    .option("--check-requires", "print one line per required capability and its provider (never fails the install)")
    .action(async (argument: string, flags: { signature?: string; registry?: string; checkRequires?: boolean }, cmd: Command) => {
      const rt = runtime(cmd);
      const source = installSource(argument);
      let view: ModuleView;
      if (source.kind === "bundle") {
        if (flags.registry !== undefined) throw usageError("--registry applies to a registry spec (id or id@version), not to a local bundle");
        view = await installBundle(rt, source.path, flags.signature);
      } else {
        if (flags.signature !== undefined) throw usageError("--signature applies to a local bundle; a registry names its own signatures");
        const response = await rt.client().post(`${PLATFORM}/registry/install`, { module: source.spec, registry: flags.registry ?? null });
        view = printModule(rt, response.raw, response.status === 201 ? "installed" : "upgraded");
      }
      if (flags.checkRequires) await printRequirements(rt, rt.client(), view.id);
    });

  module
    .command("upgrade [id]")
    .description("reinstall the version the registry catalog offers for a module, or for --all; --bundle upgrades from a local build")
    .option("--all", "every installed module a configured registry offers (failures do not stop the rest)")
    .option("--bundle <file>", "upgrade <id> from this local bundle instead of a registry")
    .option("--signature <file>", "the local bundle's signature (default: <bundle>.sig when it exists)")
    .action(async (id: string | undefined, flags: { all?: boolean; bundle?: string; signature?: string }, cmd: Command) => {
      const rt = runtime(cmd);
      if (flags.all && id !== undefined) throw usageError("give a module id or --all, not both");
      if (!flags.all && id === undefined) throw usageError("give a module id, or --all");
      if (flags.signature !== undefined && flags.bundle === undefined) throw usageError("--signature goes with --bundle");
      const client = rt.client();
      if (flags.bundle !== undefined) {
        if (flags.all) throw usageError("--bundle upgrades one module: give its id instead of --all");
        checkBundleFile(flags.bundle);
        const raw = await sendBundle(client, `${PLATFORM}/${segment(id!)}/upgrade`, flags.bundle, signatureFor(flags.bundle, flags.signature, rt.out));
        printModule(rt, raw, "upgraded");
        return;
      }
      const catalog = (await client.get<Catalog>(`${PLATFORM}/registry`)).data;
      if (catalog.registries.length === 0) return rt.out.note("warning: no module registry is configured (modules.registries): nothing to upgrade");
      const installed = listOf<ModuleView>((await client.get(MODULES)).data);
      if (!flags.all) return upgradeFromCatalog(rt, client, catalog, installed, id!, false);
      let failed = 0;
      for (const current of installed) {
        try {
          await upgradeFromCatalog(rt, client, catalog, installed, current.id, true);
        } catch (error) {
          failed++;
          const detail = error instanceof ApiRequestError ? ` (${error.code}, HTTP ${error.status})` : "";
          rt.out.note(`${current.id}: upgrade failed: ${(error as Error).message}${detail}`);
        }
      }
      if (failed > 0) throw new CliError(`${failed} of ${installed.length} module upgrade(s) failed`);
    });

  module
    .command("delete <id>")
    .alias("rm")
    .description("remove a module from every controller (its stored data stays; asks first)")
    .option("-y, --yes", "do not ask for confirmation")
    .action(async (id: string, flags: { yes?: boolean }, cmd: Command) => {
      const rt = runtime(cmd);
      const client = rt.client();
      await rt.confirm(`Remove module "${id}" from every controller? Its routes stop answering.`, flags.yes);
      const response = await client.delete(`${PLATFORM}/${segment(id)}`);
      if (rt.json) return rt.out.raw(response.raw || "{}");
      rt.out.success(`removed module ${rt.out.accent(id)}`);
    });

  module
    .command("search [query]")
    .description("search the configured registries' catalog: a substring of the id or a tag")
    .action(async (query: string | undefined, _opts, cmd: Command) => {
      const rt = runtime(cmd);
      const response = await rt.client().get<Catalog>(`${PLATFORM}/registry`);
      const catalog = response.data;
      const found = searchCatalog(catalog, query);
      if (catalog.registries.length === 0) rt.out.note("warning: no module registry is configured (modules.registries)");
      for (const r of catalog.registries) if (!r.reachable) rt.out.note(`warning: registry ${r.url} is unreachable: ${r.error}`);
      if (rt.json) return query === undefined ? rt.out.raw(response.raw) : rt.out.jsonValue({ registries: catalog.registries, modules: found });
      rt.out.table(
        ["MODULE", "VERSION", "REGISTRY", "INSTALLED", "TAGS"],
        found.map((m) => [rt.out.accent(m.id), m.latest + (m.unsigned ? " (unsigned)" : ""), m.registry, m.installedVersion ?? "", m.tags.join(", ")]),
      );
    });

  registerModuleDoctor(module, runtime);
}
