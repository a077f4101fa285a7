/** `cloudctl group list|info|create|update|delete|maintenance|start|resume`. */
import { InvalidArgumentError, type Command } from "commander";
import { CliError } from "../exit-codes.js";
import { listOf, segment, type HttpClient } from "../http-client.js";
import { collect, parseCount } from "../options.js";
import { display, formatDuration, groupStatus } from "../render.js";
import type { Runtime, RuntimeFactory } from "../runtime.js";
import { reasonCell } from "./crash.js";
import { startGroup, type InstanceRecord } from "./instance.js";

/** Fields of the list form of a group. */
export interface GroupListItem {
  name: string;
  platform?: string;
  platformVersion?: string;
  scalingMode?: string;
  minInstances?: number;
  maxInstances?: number;
  maxPlayers?: number;
  runningInstances?: number;
  totalPlayers?: number;
  maintenance?: boolean;
  static?: boolean;
}

/** Client defaults of `group create` (spec document 1, group record). */
export const groupCreateDefaults = {
  jarFile: "server.jar",
  scalingMode: "DYNAMIC",
  minInstances: 1,
  maxInstances: 10,
  memoryMb: 1024,
  routing: "LOWEST_PLAYERS",
  portStart: 30000,
  portEnd: 30100,
} as const;

/** Refresh period of `group list --watch`. */
export const watchIntervalMs = 2_000;

const sortKeys = ["name", "players", "instances"] as const;
type SortKey = (typeof sortKeys)[number];

/** Applies `--filter` (case-insensitive substring of the name) and `--sort` (players and instances descending). */
export function filterAndSortGroups(groups: GroupListItem[], filter: string | undefined, sort: SortKey): GroupListItem[] {
  const needle = filter?.toLowerCase();
  const kept = needle ? groups.filter((g) => g.name.toLowerCase().includes(needle)) : [...groups];
  const byName = (a: GroupListItem, b: GroupListItem) => a.name.localeCompare(b.name);
  if (sort === "players") return kept.sort((a, b) => (b.totalPlayers ?? 0) - (a.totalPlayers ?? 0) || byName(a, b));
  if (sort === "instances") return kept.sort((a, b) => (b.runningInstances ?? 0) - (a.runningInstances ?? 0) || byName(a, b));
  return kept.sort(byName);
}

function renderGroups(rt: Runtime, groups: GroupListItem[]): void {
  const o = rt.out;
  o.table(
    ["NAME", "STATUS", "PLATFORM", "MODE", "INSTANCES", "PLAYERS"],
    groups.map((g) => [
      o.accent(g.name),
      o.state(groupStatus(g)),
      [g.platform, g.platformVersion].filter(Boolean).join(" "),
      g.scalingMode ?? "",
      `${g.runningInstances ?? 0} (${g.minInstances ?? "?"}-${g.maxInstances ?? "?"})`,
      g.maxPlayers ? `${g.totalPlayers ?? 0}/${g.maxPlayers}` : (g.totalPlayers ?? 0),
    ]),
  );
}

async function watchGroups(rt: Runtime, client: HttpClient, filter: string | undefined, sort: SortKey): Promise<never> {
  const clear = process.stdout.isTTY ? "\x1b[2J\x1b[H" : "";
  process.on("SIGINT", () => process.exit(0));
  while (true) {
    try {
      const response = await client.get("/api/v1/groups");
      process.stdout.write(clear);
      rt.out.line(rt.out.colors.dim(`every ${watchIntervalMs / 1000}s · ${new Date().toISOString()} · Ctrl-C to stop`));
      renderGroups(rt, filterAndSortGroups(listOf<GroupListItem>(response.data), filter, sort));
      if (!clear) rt.out.line();
    } catch (error) {
      rt.out.note(`error: ${(error as Error).message}`);
    }
    await new Promise((resolve) => setTimeout(resolve, watchIntervalMs));
  }
}

function groupPath(name: string): string {
  return `/api/v1/groups/${segment(name)}`;
}

interface CreateFlags {
  name: string;
  platform: string;
  platformVersion?: string;
  template: string[];
  scalingMode: string;
  min: number;
  max: number;
  memory: number;
  routing: string;
  portStart: number;
  portEnd: number;
}

interface UpdateFlags extends LoadFlags {
  min?: number;
  max?: number;
  memory?: number;
  routing?: string;
  scalingMode?: string;
  /** false with `--no-load-scaling`. */
  loadScaling?: boolean;
}

/** The flags of a group's `loadScaling` (create and update). */
interface LoadFlags {
  minTps?: number;
  maxMspt?: number;
  loadSustain?: number;
  loadCooldown?: number;
}

/** Parses a number above 0 (commander argParser): TPS and MSPT thresholds may have decimals. */
export function parsePositiveNumber(value: string): number {
  const parsed = Number(value.trim());
  if (value.trim() === "" || !Number.isFinite(parsed) || parsed <= 0) throw new InvalidArgumentError("expected a number above 0");
  return parsed;
}

/**
 * The `loadScaling` body of the load flags, or undefined when none is given. The thresholds are
 * sent as a whole (the controller replaces them on PATCH), so a duration alone is refused here.
 */
export function loadScalingBody(flags: LoadFlags): Record<string, number> | undefined {
  const body: Record<string, number> = {};
  if (flags.minTps !== undefined) body.minTps = flags.minTps;
  if (flags.maxMspt !== undefined) body.maxMsptAvg = flags.maxMspt;
  if (flags.loadSustain !== undefined) body.sustainSeconds = flags.loadSustain;
  if (flags.loadCooldown !== undefined) body.cooldownSeconds = flags.loadCooldown;
  if (Object.keys(body).length === 0) return undefined;
  if (body.minTps === undefined && body.maxMsptAvg === undefined) {
    throw new CliError("--load-sustain and --load-cooldown need --min-tps or --max-mspt (the load thresholds are set as a whole)");
  }
  return body;
}

/** A group record's `loadScaling` as one line. */
export function loadScalingText(load: unknown): string {
  if (!load || typeof load !== "object") return "off (player fill only)";
  const { minTps, maxMsptAvg, sustainSeconds, cooldownSeconds } = load as Record<string, unknown>;
  const when = [minTps !== undefined ? `mean TPS below ${display(minTps)}` : "", maxMsptAvg !== undefined ? `mean MSPT above ${display(maxMsptAvg)}` : ""]
    .filter(Boolean)
    .join(" or ");
  return `+1 instance when ${when} for ${display(sustainSeconds)} s (cooldown ${display(cooldownSeconds)} s)`;
}

/** Adds the load-scaling flags to `group create` or `group update`. */
function withLoadFlags(command: Command): Command {
  return command
    .option("--min-tps <tps>", "DYNAMIC: one more instance while the mean 1-minute TPS is below <tps>", parsePositiveNumber)
    .option("--max-mspt <ms>", "DYNAMIC: one more instance while the mean milliseconds per tick are above <ms>", parsePositiveNumber)
    .option("--load-sustain <seconds>", "how long the load must stay past a threshold (default 30)", parseCount)
    .option("--load-cooldown <seconds>", "time between two starts on load (default 120)", parseCount);
}

/** `maintenance on|off`: on, true and 1 enable (any case); anything else disables. */
export function maintenanceValue(word: string): boolean {
  return ["on", "true", "1"].includes(word.trim().toLowerCase());
}

/** The `schedulingIssue` of a group record as one line, or "" when there is none. */
export function issueText(issue: unknown): string {
  if (!issue || typeof issue !== "object") return "";
  const { code, message } = issue as { code?: unknown; message?: unknown };
  return [code, message].filter((part) => typeof part === "string" && part !== "").join(": ");
}

/** Registers the group commands. */
export function registerGroupCommands(program: Command, runtime: RuntimeFactory): void {
  const group = program.command("group").description("manage groups (the scheduling unit)");

  group
    .command("list")
    .alias("ls")
    .description("list groups with their derived status (UP, DOWN, DRAIN)")
    .option("--filter <substr>", "only names containing <substr> (case-insensitive)")
    .option("--sort <key>", "name (default), players or instances (the last two descending)", "name")
    .option("--watch", `refresh every ${watchIntervalMs / 1000} s until Ctrl-C`)
    .addHelpText("after", "\n--filter, --sort and --watch are ignored with --json.")
    .action(async (opts: { filter?: string; sort: string; watch?: boolean }, cmd: Command) => {
      const rt = runtime(cmd);
      const sort = opts.sort.toLowerCase() as SortKey;
      if (!sortKeys.includes(sort)) throw new CliError(`--sort must be one of ${sortKeys.join(", ")}`);
      const client = rt.client();
      if (opts.watch && !rt.json) await watchGroups(rt, client, opts.filter, sort);
      const response = await client.get("/api/v1/groups");
      if (rt.json) return rt.out.raw(response.raw);
      renderGroups(rt, filterAndSortGroups(listOf<GroupListItem>(response.data), opts.filter, sort));
    });

  group
    .command("info <name>")
    .description("show a group and its instances")
    .action(async (name: string, _opts, cmd: Command) => {
      const rt = runtime(cmd);
      const client = rt.client();
      const response = await client.get<Record<string, unknown>>(groupPath(name));
      if (rt.json) return rt.out.raw(response.raw);
      const g = response.data ?? {};
      const [instances, crashes] = await Promise.all([
        client.get("/api/v1/services", { group: name }),
        // A role without crashes.view still sees the group; the line then says so.
        client.get("/api/v1/crashes", { group: name, limit: 1 }).catch(() => null),
      ]);
      const lastCrash = crashes ? listOf<{ timestamp?: string; instanceId?: string; reason?: string | null; logTail?: string[] }>(crashes.data)[0] : undefined;
      const o = rt.out;
      const portRange = g.portRange as { start?: number; end?: number } | undefined;
      o.fields([
        ["Name", g.name],
        ["Status", o.state(groupStatus(g as unknown as GroupListItem))],
        ["Platform", [g.platform, g.platformVersion].filter(Boolean).join(" ")],
        ["Scaling", `${display(g.scalingMode)} ${display(g.minInstances)}-${display(g.maxInstances)}`],
        ["Load", `${loadScalingText(g.loadScaling)}${g.loadScaling && g.scalingMode !== "DYNAMIC" ? " (inactive: DYNAMIC groups only)" : ""}`],
        ["Running", g.runningInstances ?? 0],
        ["Players", g.totalPlayers ?? 0],
        ["Memory", g.memoryMb !== undefined ? `${display(g.memoryMb)} MB` : ""],
        ["Routing", g.routing],
        ["Ports", portRange ? `${display(portRange.start)}-${display(portRange.end)}` : ""],
        ["Templates", g.templates],
        ["Maintenance", g.maintenance ? "on" : "off"],
        ["Paused", g.paused ? "yes: crash loop (`cloudctl group resume` ends it)" : "no"],
        ["Issue", issueText(g.schedulingIssue)],
        [
          "Last crash",
          lastCrash ? `${display(lastCrash.timestamp)} ${display(lastCrash.instanceId)}: ${reasonCell(lastCrash)}` : crashes ? "none kept" : "(not readable)",
        ],
        ...(Array.isArray(g.stoppedInstances) && g.stoppedInstances.length > 0
          ? [["Stopped", `${g.stoppedInstances.join(", ")} (by an operator; \`cloudctl group start\` starts them)`] as [string, unknown]]
          : []),
      ]);
      o.line();
      o.table(
        ["INSTANCE", "NODE", "STATE", "PORT", "PLAYERS", "UPTIME"],
        listOf<InstanceRecord>(instances.data).map((i) => [
          i.id,
          i.node ?? "",
          o.state(i.state ?? ""),
          i.port ?? "",
          i.playerCount ?? 0,
          formatDuration(i.uptimeMs),
        ]),
      );
    });

  withLoadFlags(group.command("create"))
    .description("create a group")
    .requiredOption("--name <name>", "group name")
    .requiredOption("--platform <platform>", "platform, e.g. paper")
    .option("--platform-version <version>", "platform version")
    .option("--template <name>", "template layer, in order (repeatable)", collect, [])
    .option("--scaling-mode <mode>", "STATIC, DYNAMIC or MANUAL (not validated here)", groupCreateDefaults.scalingMode)
    .option("--min <n>", "minimum instances", parseCount, groupCreateDefaults.minInstances)
    .option("--max <n>", "maximum instances", parseCount, groupCreateDefaults.maxInstances)
    .option("--memory <mb>", "memory per instance in MB", parseCount, groupCreateDefaults.memoryMb)
    .option("--routing <strategy>", "player routing strategy", groupCreateDefaults.routing)
    .option("--port-start <port>", "first port of the range", parseCount, groupCreateDefaults.portStart)
    .option("--port-end <port>", "last port of the range", parseCount, groupCreateDefaults.portEnd)
    .action(async (opts: CreateFlags & LoadFlags, cmd: Command) => {
      const rt = runtime(cmd);
      const loadScaling = loadScalingBody(opts);
      const body: Record<string, unknown> = {
        name: opts.name,
        platform: opts.platform,
        platformVersion: opts.platformVersion,
        jarFile: groupCreateDefaults.jarFile,
        templates: opts.template,
        scalingMode: opts.scalingMode,
        minInstances: opts.min,
        maxInstances: opts.max,
        memoryMb: opts.memory,
        routing: opts.routing,
        portRange: { start: opts.portStart, end: opts.portEnd },
        ...(loadScaling ? { loadScaling } : {}),
      };
      const response = await rt.client().post("/api/v1/groups", body);
      if (rt.json) return rt.out.raw(response.raw);
      rt.out.success(`created group ${rt.out.accent(opts.name)}`);
    });

  withLoadFlags(group.command("update <name>"))
    .description("change a group; only the flags given are sent (the load flags replace the load thresholds as a whole)")
    .option("--min <n>", "minimum instances", parseCount)
    .option("--max <n>", "maximum instances", parseCount)
    .option("--memory <mb>", "memory per instance in MB", parseCount)
    .option("--routing <strategy>", "player routing strategy")
    .option("--scaling-mode <mode>", "STATIC, DYNAMIC or MANUAL")
    .option("--no-load-scaling", "remove the load thresholds (scale on player fill only)")
    .action(async (name: string, opts: UpdateFlags, cmd: Command) => {
      const rt = runtime(cmd);
      const body: Record<string, unknown> = {};
      if (opts.min !== undefined) body.minInstances = opts.min;
      if (opts.max !== undefined) body.maxInstances = opts.max;
      if (opts.memory !== undefined) body.memoryMb = opts.memory;
      if (opts.routing !== undefined) body.routing = opts.routing;
      if (opts.scalingMode !== undefined) body.scalingMode = opts.scalingMode;
      const loadScaling = loadScalingBody(opts);
      if (loadScaling && opts.loadScaling === false) throw new CliError("--no-load-scaling cannot be combined with the load thresholds");
      if (loadScaling) body.loadScaling = loadScaling;
      if (opts.loadScaling === false) body.loadScaling = null;
      if (Object.keys(body).length === 0) {
        throw new CliError(
          "nothing to update: pass at least one of --min, --max, --memory, --routing, --scaling-mode, --min-tps, --max-mspt, --no-load-scaling",
        );
      }
      const response = await rt.client().patch(groupPath(name), body);
      if (rt.json) return rt.out.raw(response.raw);
      rt.out.success(`updated group ${rt.out.accent(name)}`);
    });

  group
    .command("delete <name>")
    .alias("rm")
    .description("delete a group and stop all its instances (irreversible; asks first)")
    .option("-y, --yes", "do not ask for confirmation")
    .action(async (name: string, opts: { yes?: boolean }, cmd: Command) => {
      const rt = runtime(cmd);
      const client = rt.client();
      await rt.confirm(`Delete group "${name}" and stop every running instance? This cannot be undone.`, opts.yes);
      const response = await client.delete(groupPath(name));
      if (rt.json) return rt.out.raw(response.raw || "{}");
      rt.out.success(`deleted group ${rt.out.accent(name)}`);
    });

  group
    .command("maintenance <name> <state>")
    .description("maintenance on|off (on, true and 1 enable; anything else disables)")
    .action(async (name: string, state: string, _opts, cmd: Command) => {
      const rt = runtime(cmd);
      const enabled = maintenanceValue(state);
      const response = await rt.client().patch(groupPath(name), { maintenance: enabled });
      if (rt.json) return rt.out.raw(response.raw);
      rt.out.success(`maintenance ${enabled ? "on" : "off"} for group ${rt.out.accent(name)}`);
    });

  group
    .command("start <name>")
    .description("ask the scheduler to start instances now, as many as the scaling mode allows")
    .action(async (name: string, _opts, cmd: Command) => startGroup(runtime(cmd), name));

  group
    .command("resume <name>")
    .description("resume a group paused after a crash loop (a group that is not paused is left as it is)")
    .action(async (name: string, _opts, cmd: Command) => {
      const rt = runtime(cmd);
      const client = rt.client();
      const response = await client.post<{ paused?: boolean }>(`${groupPath(name)}/resume`);
      if (rt.json) return rt.out.raw(response.raw);
      if (response.data?.paused) throw new CliError(`group ${name} is still paused`);
      rt.out.success(`group ${rt.out.accent(name)} is not paused: the scheduler starts its instances again`);
      // A resume does not remove what made the group crash: say what that was, so a new pause is no surprise.
      const crashes = await client.get("/api/v1/crashes", { group: name, limit: 1 }).catch(() => null);
      const last = crashes ? listOf<{ timestamp?: string; instanceId?: string; reason?: string | null; logTail?: string[] }>(crashes.data)[0] : undefined;
      if (last) {
        rt.out.note(`the last crash (${display(last.timestamp)}, ${display(last.instanceId)}): ${reasonCell(last)}`);
        rt.out.note(`if its cause remains, the group pauses again after the next crashes: \`cloudctl logs ${display(last.instanceId)}\` shows why it ended`);
      }
    });
}
