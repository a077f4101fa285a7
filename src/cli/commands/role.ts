/**
 * `cloudctl role list|show|create|update|delete|permissions` over `/api/v1/roles` (permission
 * roles.manage, ADMIN only by default) and the permission catalog (`GET /api/v1/permissions`, any
 * signed-in user). Built-in roles (ADMIN, OPERATOR, VIEWER) cannot be changed or deleted: the
 * controller answers 400 PROTECTED (exit 1).
 */
import type { Command } from "commander";
import { usageError } from "../exit-codes.js";
import { listOf, segment } from "../http-client.js";
import { collect, commaList } from "../options.js";
import type { RuntimeFactory } from "../runtime.js";

interface RoleRecord {
  name: string;
  description?: string;
  permissions: string[];
  builtIn?: boolean;
}

const rolePath = (name: string) => `/api/v1/roles/${segment(name)}`;

/** The permissions after `--permission` (replaces), `--add` and `--remove`, without duplicates. */
export function nextPermissions(current: readonly string[], flags: { permission: string[]; add: string[]; remove: string[] }): string[] {
  const base = flags.permission.length > 0 ? flags.permission : current;
  const removed = new Set(flags.remove);
  return [...new Set([...base, ...flags.add])].filter((p) => !removed.has(p));
}

/** Registers `role`. */
export function registerRoleCommands(program: Command, runtime: RuntimeFactory): void {
  const role = program.command("role").alias("roles").description("roles: named sets of permissions (roles.manage)");

  role
    .command("list")
    .alias("ls")
    .description("list built-in and custom roles")
    .action(async (_opts, cmd: Command) => {
      const rt = runtime(cmd);
      const response = await rt.client().get("/api/v1/roles");
      if (rt.json) return rt.out.raw(response.raw);
      rt.out.table(
        ["NAME", "BUILT-IN", "PERMISSIONS", "DESCRIPTION"],
        listOf<RoleRecord>(response.data).map((r) => [rt.out.accent(r.name), r.builtIn ? "yes" : "", r.permissions.length, r.description ?? ""]),
      );
    });

  role
    .command("show <name>")
    .description("show a role and its permissions")
    .action(async (name: string, _opts, cmd: Command) => {
      const rt = runtime(cmd);
      const response = await rt.client().get<RoleRecord>(rolePath(name));
      if (rt.json) return rt.out.raw(response.raw);
      const r = response.data;
      rt.out.fields([
        ["Name", r.name],
        ["Built-in", r.builtIn ? "yes (cannot be changed)" : "no"],
        ["Description", r.description ?? ""],
        ["Permissions", r.permissions.join(", ")],
      ]);
    });

  role
    .command("create <name>")
    .description("create a custom role")
    .option("--permission <name>", "a permission (repeatable or comma-separated; see `cloudctl role permissions`)", collect, [])
    .option("--description <text>", "what the role is for")
    .action(async (name: string, flags: { permission: string[]; description?: string }, cmd: Command) => {
      const rt = runtime(cmd);
      const permissions = flags.permission.flatMap(commaList);
      if (permissions.length === 0) throw usageError("a role needs at least one --permission");
      const body = { name, permissions, ...(flags.description !== undefined ? { description: flags.description } : {}) };
      const response = await rt.client().post<RoleRecord>("/api/v1/roles", body);
      if (rt.json) return rt.out.raw(response.raw);
      rt.out.success(`created role ${rt.out.accent(name)} (${response.data.permissions.length} permissions)`);
    });

  role
    .command("update <name>")
    .description("change a custom role: --permission replaces the set, --add and --remove change it")
    .option("--permission <name>", "the new set (repeatable or comma-separated)", collect, [])
    .option("--add <name>", "add a permission (repeatable or comma-separated)", collect, [])
    .option("--remove <name>", "remove a permission (repeatable or comma-separated)", collect, [])
    .option("--description <text>", "a new description")
    .action(async (name: string, flags: { permission: string[]; add: string[]; remove: string[]; description?: string }, cmd: Command) => {
      const rt = runtime(cmd);
      const client = rt.client();
      const lists = { permission: flags.permission.flatMap(commaList), add: flags.add.flatMap(commaList), remove: flags.remove.flatMap(commaList) };
      const changesPermissions = lists.permission.length + lists.add.length + lists.remove.length > 0;
      if (!changesPermissions && flags.description === undefined) throw usageError("nothing to change: pass --permission, --add, --remove or --description");
      const body: Record<string, unknown> = {};
      if (changesPermissions) body.permissions = nextPermissions((await client.get<RoleRecord>(rolePath(name))).data.permissions, lists);
      if (flags.description !== undefined) body.description = flags.description;
      const response = await client.patch<RoleRecord>(rolePath(name), body);
      if (rt.json) return rt.out.raw(response.raw);
      rt.out.success(`updated role ${rt.out.accent(name)} (${response.data.permissions.length} permissions)`);
    });

  role
    .command("delete <name>")
    .alias("rm")
    .description("delete a custom role that no user holds (asks first)")
    .option("-y, --yes", "do not ask for confirmation")
    .action(async (name: string, flags: { yes?: boolean }, cmd: Command) => {
      const rt = runtime(cmd);
      const client = rt.client();
      await rt.confirm(`Delete role "${name}"?`, flags.yes);
      const response = await client.delete(rolePath(name));
      if (rt.json) return rt.out.raw(response.raw || "{}");
      rt.out.success(`deleted role ${rt.out.accent(name)}`);
    });

  role
    .command("permissions")
    .description("the permission catalog: every permission a role can name")
    .action(async (_opts, cmd: Command) => {
      const rt = runtime(cmd);
      const response = await rt.client().get("/api/v1/permissions");
      if (rt.json) return rt.out.raw(response.raw);
      rt.out.table(
        ["PERMISSION", "DESCRIPTION"],
        listOf<{ name: string; description?: string }>(response.data).map((p) => [rt.out.accent(p.name), p.description ?? ""]),
      );
    });
}
