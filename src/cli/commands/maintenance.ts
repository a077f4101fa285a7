/** `cloudctl maintenance status|on|off|allow`: the global maintenance switch (docs/decisions/maintenance.md). */
import type { Command } from "commander";
import { collect } from "../options.js";
import { display } from "../render.js";
import type { Runtime, RuntimeFactory } from "../runtime.js";

interface MaintenanceRecord {
  enabled?: boolean;
  message?: string | null;
  allowedPlayers?: string[];
  updatedAt?: string | null;
  updatedBy?: string | null;
}

function show(rt: Runtime, state: MaintenanceRecord | undefined): void {
  const o = rt.out;
  o.fields([
    ["enabled", state?.enabled ? o.state("ON") : "off"],
    ["message", display(state?.message)],
    ["allowed players", state?.allowedPlayers?.length ? state.allowedPlayers.join(", ") : "-"],
    ["updated", `${display(state?.updatedAt)} by ${display(state?.updatedBy)}`],
  ]);
}

/** Registers the maintenance commands. */
export function registerMaintenanceCommands(program: Command, runtime: RuntimeFactory): void {
  const maintenance = program.command("maintenance").description("network-wide maintenance: only allowed players may join");

  const patch = async (cmd: Command, body: Record<string, unknown>) => {
    const rt = runtime(cmd);
    const response = await rt.client().patch<MaintenanceRecord>("/api/v1/maintenance", body);
    if (rt.json) return rt.out.raw(response.raw);
    show(rt, response.data);
  };

  maintenance
    .command("status")
    .description("show the switch, its message and the allowed players")
    .action(async (_opts, cmd: Command) => {
      const rt = runtime(cmd);
      const response = await rt.client().get<MaintenanceRecord>("/api/v1/maintenance");
      if (rt.json) return rt.out.raw(response.raw);
      show(rt, response.data);
    });

  maintenance
    .command("on")
    .description("switch maintenance on (players not allowed are refused with the message)")
    .option("-m, --message <text>", "what refused players are shown")
    .option("--allow <player>", "a player name or UUID admitted anyway (repeatable; replaces the list)", collect)
    .action(async (opts: { message?: string; allow?: string[] }, cmd: Command) => {
      const body: Record<string, unknown> = { enabled: true };
      if (opts.message !== undefined) body.message = opts.message;
      if (opts.allow) body.allowedPlayers = opts.allow;
      await patch(cmd, body);
    });

  maintenance
    .command("off")
    .description("switch maintenance off")
    .action(async (_opts, cmd: Command) => patch(cmd, { enabled: false }));

  maintenance
    .command("allow [players...]")
    .description("replace the players admitted during maintenance (none: empty the list)")
    .action(async (players: string[], _opts, cmd: Command) => patch(cmd, { allowedPlayers: players ?? [] }));
}
