/**
 * `cloudctl cluster config ...`: the cluster-shared settings (docs/decisions/cluster-config.md):
 * show the values in force and their source, set or unset keys (a new config version), list the
 * versions, roll back to an earlier one.
 */
import type { Command } from "commander";
import { CliError } from "../exit-codes.js";
import { listOf } from "../http-client.js";
import { display } from "../render.js";
import type { RuntimeFactory } from "../runtime.js";

interface Effective {
  key?: string;
  value?: unknown;
  source?: string;
}

interface ConfigVersion {
  version?: number;
  active?: boolean;
  parentVersion?: number | null;
  createdAt?: string;
  createdBy?: string;
  comment?: string;
}

interface ConfigChange {
  changed?: boolean;
  activeVersion?: number | null;
}

/** `key=value` as the controller takes it: true/false are booleans, integers numbers. */
export function parseSetting(assignment: string): [string, number | boolean] {
  const eq = assignment.indexOf("=");
  if (eq <= 0) throw new CliError(`expected key=value, got: ${assignment}`);
  const key = assignment.slice(0, eq);
  const text = assignment.slice(eq + 1).trim();
  if (text === "true" || text === "false") return [key, text === "true"];
  if (/^-?\d+$/.test(text)) return [key, Number(text)];
  throw new CliError(`${key}: expected true, false or an integer, got: ${text}`);
}

/** Registers `cluster config` under `cluster`. */
export function registerClusterConfigCommands(cluster: Command, runtime: RuntimeFactory): void {
  const config = cluster.command("config").description("cluster-shared settings (one value for every controller)");

  config
    .command("show")
    .description("the values in force on the answering controller and where each comes from")
    .action(async (_opts, cmd: Command) => {
      const rt = runtime(cmd);
      const response = await rt.client().get<{ activeVersion?: number | null }>("/api/v1/cluster/config");
      if (rt.json) return rt.out.raw(response.raw);
      const o = rt.out;
      o.fields([["Active version", response.data?.activeVersion ?? "none"]]);
      o.table(
        ["KEY", "VALUE", "SOURCE"],
        listOf<Effective>(response.data, "effective").map((s) => [o.accent(display(s.key)), display(s.value), display(s.source)]),
      );
    });

  config
    .command("set [assignments...]")
    .description("set keys (key=value) and unset keys (--unset key): a new config version")
    .option("--unset <key>", "remove a key from the cluster config (controller.yml applies again); repeatable", (v: string, all: string[]) => [...all, v], [])
    .option("--comment <text>", "comment kept with the version")
    .action(async (assignments: string[], opts: { unset: string[]; comment?: string }, cmd: Command) => {
      const rt = runtime(cmd);
      const settings: Record<string, number | boolean | null> = Object.fromEntries(assignments.map(parseSetting));
      for (const key of opts.unset) settings[key] = null;
      if (Object.keys(settings).length === 0) throw new CliError("name at least one key=value or --unset key");
      const body: Record<string, unknown> = { settings };
      if (opts.comment !== undefined) body.comment = opts.comment;
      const response = await rt.client().patch<ConfigChange>("/api/v1/cluster/config", body);
      if (rt.json) return rt.out.raw(response.raw);
      if (!response.data?.changed) return rt.out.note(`nothing changed: version ${display(response.data?.activeVersion ?? "none")} stays active`);
      rt.out.success(`config version ${display(response.data.activeVersion)} is active`);
    });

  config
    .command("versions")
    .description("the config version history")
    .action(async (_opts, cmd: Command) => {
      const rt = runtime(cmd);
      const response = await rt.client().get("/api/v1/cluster/config/versions");
      if (rt.json) return rt.out.raw(response.raw);
      const o = rt.out;
      o.table(
        ["VERSION", "ACTIVE", "PARENT", "CREATED", "BY", "COMMENT"],
        listOf<ConfigVersion>(response.data, "versions").map((v) => [
          o.accent(display(v.version)),
          v.active ? "yes" : "",
          display(v.parentVersion ?? "-"),
          display(v.createdAt),
          display(v.createdBy),
          display(v.comment),
        ]),
      );
    });

  config
    .command("rollback <version>")
    .description("make an earlier config version the active one again")
    .action(async (version: string, _opts, cmd: Command) => {
      const rt = runtime(cmd);
      if (!/^\d+$/.test(version) || Number(version) < 1) throw new CliError(`version: expected a positive integer, got: ${version}`);
      const response = await rt.client().post<ConfigChange>("/api/v1/cluster/config/rollback", { version: Number(version) });
      if (rt.json) return rt.out.raw(response.raw);
      rt.out.success(`config version ${display(response.data?.activeVersion)} is active again`);
    });
}
