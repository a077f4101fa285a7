/** `cloudctl instance` (alias `inst`): list, info, start, stop, force-stop, exec, console. */
import type { Command } from "commander";
import { runConsole } from "../console-session.js";
import { listOf, segment } from "../http-client.js";
import { ID_KINDS, withIdPrefix } from "../id-prefix.js";
import { execWithOutput, showInstanceLogs, withExecFlags, withInstanceLogFlags, type ExecFlags, type InstanceLogFlags } from "./instance-output.js";
import { formatDuration } from "../render.js";
import type { Runtime, RuntimeFactory } from "../runtime.js";

/** Fields of an instance record (document 1). */
export interface InstanceRecord {
  id: string;
  group?: string;
  node?: string;
  state?: string;
  port?: number;
  playerCount?: number;
  memoryMb?: number;
  uptimeMs?: number;
  startedAt?: string;
  deploymentRevision?: number;
}

function servicePath(id: string): string {
  return `/api/v1/services/${segment(id)}`;
}

/** The answer of `POST /api/v1/groups/{group}/start`. */
export interface StartResult {
  count?: number;
  reason?: string;
}

/**
 * `POST /api/v1/groups/{group}/start`, shared by `group start` and `instance start`. A start that
 * schedules nothing is not a failure (exit 0); the controller's reason is printed.
 */
export async function startGroup(rt: Runtime, group: string): Promise<void> {
  const response = await rt.client().post<StartResult>(`/api/v1/groups/${segment(group)}/start`);
  if (rt.json) return rt.out.raw(response.raw);
  const { count, reason } = response.data ?? {};
  const name = rt.out.accent(group);
  if (count === undefined) rt.out.success(`start requested for group ${name}`);
  else if (count > 0) rt.out.success(`${count} instance(s) scheduled for group ${name}`);
  else rt.out.line(`nothing scheduled for group ${name}${reason ? `: ${reason}` : ""}`);
}

/** `POST …/stop` or `…/force-stop`: answered 202 with the instance record as the stop begins. */
async function stopInstance(rt: Runtime, given: string, force: boolean): Promise<void> {
  const client = rt.client();
  const { id, result: response } = await withIdPrefix(client, ID_KINDS.instance, given, (id) =>
    client.post<InstanceRecord>(`${servicePath(id)}/${force ? "force-stop" : "stop"}`),
  );
  if (rt.json) return rt.out.raw(response.raw || "{}");
  const state = response.data?.state;
  rt.out.success(`${force ? "force-stop" : "stop"} requested for ${rt.out.accent(id)}${state ? ` (now ${state})` : ""}`);
}

/** Registers the instance commands. */
export function registerInstanceCommands(program: Command, runtime: RuntimeFactory): void {
  const instance = program.command("instance").alias("inst").description("inspect and control instances (server processes)");

  instance
    .command("list")
    .alias("ls")
    .description("list instances")
    .option("--group <name>", "only this group")
    .option("--node <id>", "only this node")
    .option("--state <state>", "only this state, e.g. RUNNING")
    .action(async (opts: { group?: string; node?: string; state?: string }, cmd: Command) => {
      const rt = runtime(cmd);
      const response = await rt.client().get("/api/v1/services", { group: opts.group, node: opts.node, state: opts.state });
      if (rt.json) return rt.out.raw(response.raw);
      const o = rt.out;
      o.table(
        ["ID", "GROUP", "NODE", "STATE", "PORT", "PLAYERS", "UPTIME"],
        listOf<InstanceRecord>(response.data).map((i) => [
          o.accent(i.id),
          i.group ?? "",
          i.node ?? "",
          o.state(i.state ?? ""),
          i.port ?? "",
          i.playerCount ?? 0,
          formatDuration(i.uptimeMs),
        ]),
      );
    });

  instance
    .command("info <id>")
    .description("show one instance")
    .action(async (given: string, _opts, cmd: Command) => {
      const rt = runtime(cmd);
      const client = rt.client();
      const { result: response } = await withIdPrefix(client, ID_KINDS.instance, given, (id) => client.get<InstanceRecord>(servicePath(id)));
      if (rt.json) return rt.out.raw(response.raw);
      const i = response.data;
      const o = rt.out;
      o.fields([
        ["ID", i.id],
        ["Group", i.group],
        ["Node", i.node],
        ["State", o.state(i.state ?? "")],
        ["Port", i.port],
        ["Players", i.playerCount],
        ["Memory", i.memoryMb !== undefined ? `${i.memoryMb} MB` : ""],
        ["Uptime", formatDuration(i.uptimeMs)],
        ["Started", i.startedAt],
        ["Revision", i.deploymentRevision],
      ]);
    });

  instance
    .command("start <group>")
    .description("ask the scheduler to start instances of a group now (same as `group start`)")
    .action(async (group: string, _opts, cmd: Command) => startGroup(runtime(cmd), group));

  instance
    .command("stop <id>")
    .description("stop an instance gracefully: the platform's stop command, then SIGTERM, then SIGKILL (--force kills at once)")
    .option("--force", "kill immediately (same as `instance force-stop`)")
    .action(async (id: string, opts: { force?: boolean }, cmd: Command) => stopInstance(runtime(cmd), id, Boolean(opts.force)));

  instance
    .command("force-stop <id>")
    .description("kill an instance at once (same as `instance stop --force`)")
    .action(async (id: string, _opts, cmd: Command) => stopInstance(runtime(cmd), id, true));

  withExecFlags(instance.command("exec <id> <words...>"))
    .description("send a console command (words joined with single spaces) and show what the server prints")
    .addHelpText("after", "\n--json prints the controller's answer and does not wait for output.")
    .action(async (given: string, words: string[], flags: ExecFlags, cmd: Command) => {
      const rt = runtime(cmd);
      const client = rt.client();
      const command = words.join(" ");
      if (!rt.json) return void (await withIdPrefix(client, ID_KINDS.instance, given, (id) => execWithOutput(rt, client, id, command, flags)));
      const { result: response } = await withIdPrefix(client, ID_KINDS.instance, given, (id) => client.post(`${servicePath(id)}/command`, { command }));
      rt.out.raw(response.raw || "{}");
    });

  withInstanceLogFlags(instance.command("logs <id>"))
    .description("the instance's log from its node: console output and the daemon's [cloud] lines, also after it ended")
    .action(async (given: string, flags: InstanceLogFlags, cmd: Command) => {
      const rt = runtime(cmd);
      const client = rt.client();
      await withIdPrefix(client, ID_KINDS.instance, given, (id) => showInstanceLogs(rt, client, id, flags));
    });

  instance
    .command("console <id>")
    .description("attach to the console: output streams, typed lines are sent as commands, Ctrl-Q detaches")
    .action(async (given: string, _opts, cmd: Command) => {
      const rt = runtime(cmd);
      const client = rt.client();
      await withIdPrefix(client, ID_KINDS.instance, given, (id) => runConsole(client, rt.out, id));
    });

  instance
    .command("delete <id>")
    .alias("rm")
    .description("delete the record of a STOPPED or CRASHED instance (a STATIC group's slot records stay)")
    .action(async (id: string, _opts, cmd: Command) => {
      const rt = runtime(cmd);
      const response = await rt.client().delete(servicePath(id));
      if (rt.json) return rt.out.raw(response.raw || "{}");
      rt.out.success(`deleted instance ${rt.out.accent(id)}`);
    });
}
