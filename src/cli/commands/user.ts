/**
 * `cloudctl user list|show|create|passwd|roles|delete` over `/api/v1/users` (permission
 * users.manage, ADMIN only by default: another role gets exit 3 from the controller, as the REST API
 * decides). Passwords never go on the command line unless `--password` is given: on a terminal
 * they are asked twice without echo, from a pipe the first line is the password, and `--generate`
 * makes one and prints it once. A password change revokes the user's tokens; when it is the
 * signed-in user's own, cloudctl signs in again with the new one and keeps the new token in the
 * context. `user minecraft|link|unlink` manage Minecraft account links: one's own through
 * `/api/v1/auth/me/minecraft` (permission minecraft.link), another user's with `--user` (users.manage).
 * Decisions: docs/decisions/cli.md ("Users and roles"), docs/decisions/accounts.md.
 */
import { randomBytes } from "node:crypto";
import type { Command } from "commander";
import { CliError, usageError } from "../exit-codes.js";
import { listOf, segment } from "../http-client.js";
import { collect, commaList } from "../options.js";
import { display } from "../render.js";
import type { Runtime, RuntimeFactory } from "../runtime.js";

/** Shortest password the controller accepts (src/auth/user-directory.ts). */
export const passwordLengthMin = 8;
/** Bytes of randomness in a `--generate`d password (base64url: 24 characters). */
const generatedPasswordBytes = 18;

interface UserRecord {
  username: string;
  roles: string[];
  createdAt?: string;
  updatedAt?: string;
}

interface PasswordFlags {
  password?: string;
  generate?: boolean;
}

const userPath = (name: string) => `/api/v1/users/${segment(name)}`;
/** The links of `--user`, or the signed-in user's own. */
const linksPath = (name?: string) => (name === undefined ? "/api/v1/auth/me/minecraft" : `${userPath(name)}/minecraft`);

interface MinecraftLink {
  uuid: string;
  username: string;
  linkedAt?: string;
  linkedBy?: string;
}

/** Roles after `--add`, `--remove` and `--set` (`--set` replaces, then add and remove apply), without duplicates. */
export function nextRoles(current: readonly string[], flags: { add: string[]; remove: string[]; set?: string[] }): string[] {
  const base = flags.set ?? current;
  const removed = new Set(flags.remove.map((r) => r.toUpperCase()));
  const result: string[] = [];
  for (const role of [...base, ...flags.add]) {
    if (removed.has(role.toUpperCase()) || result.some((r) => r.toUpperCase() === role.toUpperCase())) continue;
    result.push(role);
  }
  return result;
}

/** The password to set: `--password`, `--generate`, asked twice on a terminal, or the first line of a pipe. */
async function newPassword(rt: Runtime, flags: PasswordFlags, who: string): Promise<{ password: string; generated: boolean }> {
  if (flags.password !== undefined && flags.generate) throw usageError("--password and --generate are exclusive");
  if (flags.generate) return { password: randomBytes(generatedPasswordBytes).toString("base64url"), generated: true };
  let password = flags.password;
  if (password === undefined) {
    const answer = await rt.prompter.ask(`New password for ${who}: `, { secret: true });
    if (answer === null || answer === "") throw new CliError("no password given (stdin ended): pass it on stdin, use --generate, or --password");
    if (rt.prompter.interactive && (await rt.prompter.ask("Repeat it: ", { secret: true })) !== answer)
      throw new CliError("the passwords differ: nothing was changed");
    password = answer;
  }
  if (password.length < passwordLengthMin) throw new CliError(`a password needs at least ${passwordLengthMin} characters`);
  return { password, generated: false };
}

function addPasswordFlags(command: Command): Command {
  return command
    .option("-p, --password <password>", "the password (visible in the shell's history: prefer stdin or the prompt)")
    .option("--generate", "make a random password and print it once");
}

/** Registers `user`. */
export function registerUserCommands(program: Command, runtime: RuntimeFactory): void {
  const user = program.command("user").alias("users").description("users who sign in, their roles and passwords (users.manage)");

  user
    .command("list")
    .alias("ls")
    .description("list users")
    .action(async (_opts, cmd: Command) => {
      const rt = runtime(cmd);
      const response = await rt.client().get("/api/v1/users");
      if (rt.json) return rt.out.raw(response.raw);
      rt.out.table(
        ["USERNAME", "ROLES", "CREATED", "UPDATED"],
        listOf<UserRecord>(response.data).map((u) => [rt.out.accent(u.username), u.roles.join(", "), display(u.createdAt), display(u.updatedAt)]),
      );
    });

  user
    .command("show <username>")
    .description("show one user")
    .action(async (name: string, _opts, cmd: Command) => {
      const rt = runtime(cmd);
      const response = await rt.client().get<UserRecord>(userPath(name));
      if (rt.json) return rt.out.raw(response.raw);
      const u = response.data;
      rt.out.fields([
        ["Username", u.username],
        ["Roles", u.roles.join(", ")],
        ["Created", u.createdAt],
        ["Updated", u.updatedAt],
      ]);
    });

  addPasswordFlags(user.command("create <username>"))
    .description("create a user (password: asked, read from a pipe, --generate or --password)")
    .option("--role <role>", "a role, repeatable or comma-separated (default VIEWER)", collect, [])
    .action(async (name: string, flags: PasswordFlags & { role: string[] }, cmd: Command) => {
      const rt = runtime(cmd);
      const client = rt.client();
      const roles = flags.role.flatMap(commaList);
      const { password, generated } = await newPassword(rt, flags, name);
      const response = await client.post<UserRecord>("/api/v1/users", { username: name, password, roles: roles.length > 0 ? roles : ["VIEWER"] });
      if (rt.json) return rt.out.raw(response.raw);
      rt.out.success(`created user ${rt.out.accent(name)} with ${response.data.roles.join(", ")}`);
      if (generated) rt.out.line(`password: ${password}`);
    });

  addPasswordFlags(user.command("passwd [username]"))
    .description("set a user's password (default: the signed-in user); the user's tokens stop working")
    .action(async (given: string | undefined, flags: PasswordFlags, cmd: Command) => {
      const rt = runtime(cmd);
      const client = rt.client();
      const me = (await client.get<{ username: string }>("/api/v1/auth/me")).data.username;
      const name = given ?? me;
      const { password, generated } = await newPassword(rt, flags, name);
      const response = await client.patch<UserRecord>(userPath(name), { password });
      if (name === me) await signInAgain(rt, name, password);
      if (rt.json) return rt.out.raw(response.raw);
      rt.out.success(`password of ${rt.out.accent(name)} changed${name === me ? "; signed in again with it" : ": its tokens no longer work"}`);
      if (generated) rt.out.line(`password: ${password}`);
    });

  user
    .command("roles <username>")
    .description("show a user's roles, or change them with --add, --remove or --set")
    .option("--add <role>", "give a role (repeatable or comma-separated)", collect, [])
    .option("--remove <role>", "take a role away (repeatable or comma-separated)", collect, [])
    .option("--set <roles>", "replace the roles by this comma-separated list")
    .action(async (name: string, flags: { add: string[]; remove: string[]; set?: string }, cmd: Command) => {
      const rt = runtime(cmd);
      const client = rt.client();
      const current = (await client.get<UserRecord>(userPath(name))).data;
      const add = flags.add.flatMap(commaList);
      const remove = flags.remove.flatMap(commaList);
      if (add.length === 0 && remove.length === 0 && flags.set === undefined) {
        if (rt.json) return rt.out.jsonValue(current.roles);
        return rt.out.line(current.roles.join(", "));
      }
      const roles = nextRoles(current.roles, { add, remove, set: flags.set === undefined ? undefined : commaList(flags.set) });
      if (roles.length === 0) throw new CliError("a user needs at least one role: nothing was changed");
      const response = await client.patch<UserRecord>(userPath(name), { roles });
      if (rt.json) return rt.out.raw(response.raw);
      rt.out.success(`${rt.out.accent(name)}: ${response.data.roles.join(", ")}`);
    });

  user
    .command("delete <username>")
    .alias("rm")
    .description("delete a user (not yourself, not the last ADMIN; asks first)")
    .option("-y, --yes", "do not ask for confirmation")
    .action(async (name: string, flags: { yes?: boolean }, cmd: Command) => {
      const rt = runtime(cmd);
      const client = rt.client();
      await rt.confirm(`Delete user "${name}"? Their tokens stop working at once.`, flags.yes);
      const response = await client.delete(userPath(name));
      if (rt.json) return rt.out.raw(response.raw || "{}");
      rt.out.success(`deleted user ${rt.out.accent(name)}`);
    });

  registerLinkCommands(user, runtime);
}

/** Registers `user minecraft`, `user link` and `user unlink` on `user`. */
function registerLinkCommands(user: Command, runtime: RuntimeFactory): void {
  user
    .command("minecraft")
    .alias("links")
    .description("list the Minecraft accounts linked to you (or to --user)")
    .option("-u, --user <username>", "another user's links (users.manage)")
    .action(async (flags: { user?: string }, cmd: Command) => {
      const rt = runtime(cmd);
      const response = await rt.client().get(linksPath(flags.user));
      if (rt.json) return rt.out.raw(response.raw);
      rt.out.table(
        ["UUID", "USER", "LINKED", "BY"],
        listOf<MinecraftLink>(response.data).map((l) => [rt.out.accent(l.uuid), l.username, display(l.linkedAt), display(l.linkedBy)]),
      );
    });

  user
    .command("link <uuid>")
    .description("link a Minecraft account to you (minecraft.link) or to --user (users.manage): its in-game commands act with the user's roles")
    .option("-u, --user <username>", "link it to another user")
    .action(async (uuid: string, flags: { user?: string }, cmd: Command) => {
      const rt = runtime(cmd);
      const response = await rt.client().post<MinecraftLink>(linksPath(flags.user), { uuid });
      if (rt.json) return rt.out.raw(response.raw);
      rt.out.success(`Minecraft account ${rt.out.accent(response.data.uuid)} is linked to ${response.data.username}`);
    });

  user
    .command("unlink <uuid>")
    .description("unlink a Minecraft account from you or from --user; its in-game permissions end at once")
    .option("-u, --user <username>", "unlink it from another user")
    .action(async (uuid: string, flags: { user?: string }, cmd: Command) => {
      const rt = runtime(cmd);
      const response = await rt.client().delete(`${linksPath(flags.user)}/${segment(uuid)}`);
      if (rt.json) return rt.out.raw(response.raw || "{}");
      rt.out.success(`Minecraft account ${rt.out.accent(uuid.toLowerCase())} unlinked`);
    });
}

/** After the signed-in user's own password change: a fresh token in the context the command used. */
async function signInAgain(rt: Runtime, username: string, password: string): Promise<void> {
  const target = rt.resolved;
  if (!target.controller) return;
  const response = await rt.clientFor(target.controller).request<{ token?: string; accessToken?: string }>("POST", "/api/v1/auth/login", {
    body: { username, password },
    auth: false,
  });
  const token = response.data?.token ?? response.data?.accessToken;
  const entry = target.contextName ? rt.config.contexts[target.contextName] : undefined;
  if (!token || !entry || rt.globals.token || rt.io.env.CLOUD_TOKEN) {
    rt.out.note("the old token no longer works: sign in again (cloudctl login)");
    return;
  }
  entry.token = token;
  rt.saveConfig();
}
