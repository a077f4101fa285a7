/**
 * The simulated server's console commands (help, stop, say, list, players …, load, tps, metrics,
 * event, crash, oom), registered on the SDK's command registry. What they act on is handed in by
 * server.ts ({@link ConsoleContext}).
 */
import { Arguments, CommandBuilder, fail, type CloudPlugin, type CommandRegistry, type MetricsPayload } from "../../sdk/index.js";
import { loadPercentMax, type TickModel } from "./tick-model.js";

const PLAYER_NAME = /^[A-Za-z0-9_]{1,16}$/;

/** What the console commands act on. */
export interface ConsoleContext {
  log(message: string, level?: string): void;
  /** The players here (or held by this proxy), by name. */
  players: ReadonlyMap<string, { uuid: string }>;
  join(name: string): Promise<void>;
  leave(name: string, how?: string): void;
  /** The `stop` command. */
  stop(): void;
  /** The plugin, or a command failure when no controller is configured. */
  needsPlugin(): CloudPlugin;
  ticks: TickModel;
  reportMetrics(): MetricsPayload;
  maxPlayers: number;
  /** The `help` line's commands. */
  overview(): string[];
}

/** Registers every console command on `commands`. */
export function registerConsoleCommands(commands: CommandRegistry, ctx: ConsoleContext): void {
  const { log, players, needsPlugin, ticks, maxPlayers } = ctx;
  const join = (name: string) => ctx.join(name);
  const leave = (name: string, how?: string) => ctx.leave(name, how);
  const reportMetrics = () => ctx.reportMetrics();
  const playerName = Arguments.of("name", (input) => (PLAYER_NAME.test(input) ? input : fail(`Player names are 1-16 of A-Z a-z 0-9 _, not "${input}"`)));
  const onlineName = Arguments.of(
    "name",
    (input) => (players.has(input) ? input : fail(`${input} is not online`)),
    (prefix) => [...players.keys()].filter((name) => name.startsWith(prefix)),
  );

  commands.register(
    CommandBuilder.literal("help")
      .description("this list")
      .handler(() => log(`Commands: ${ctx.overview().join(", ")}`))
      .build(),
  );
  commands.register(
    CommandBuilder.literal("stop")
      .description("stop the server")
      .handler(() => ctx.stop())
      .build(),
  );
  commands.register(
    CommandBuilder.literal("say")
      .argument(Arguments.string("text").optional("").greedy())
      .handler((c) => log(`[Server] ${c.get<string>("text")}`))
      .build(),
  );
  commands.register(
    CommandBuilder.literal("list")
      .description("players online here")
      .handler(() => log(`There are ${players.size} of a max of ${maxPlayers} players online: ${[...players.keys()].join(", ")}`))
      .build(),
  );
  commands.register(
    CommandBuilder.literal("players")
      .description("simulate players")
      .then(
        CommandBuilder.literal("join")
          .argument(playerName)
          .handler((c) => join(c.get("name"))),
      )
      .then(
        CommandBuilder.literal("leave")
          .argument(playerName)
          .handler((c) => leave(c.get("name"))),
      )
      .then(
        CommandBuilder.literal("kick")
          .argument(onlineName)
          .argument(Arguments.string("reason").optional("Kicked").greedy())
          .handler((c) => leave(c.get("name"), `was kicked: ${c.get<string>("reason")}`)),
      )
      .then(
        CommandBuilder.literal("transfer")
          .description("to the least-loaded instance of a group")
          .argument(onlineName)
          .argument(Arguments.string("group"))
          .handler(async (c) => {
            const name = c.get<string>("name");
            const result = await needsPlugin().client.transferPlayer(players.get(name)!.uuid, c.get("group"));
            if (result.success)
              log(
                `Transfer of ${name} to group ${c.get<string>("group")} queued${result.targetInstanceId ? ` (${result.targetInstanceId})` : ""}${result.transferId ? ` as ${result.transferId}` : ""}`,
              );
            else log(`Transfer of ${name} failed: ${result.failureReason}`, "WARN");
          }),
      )
      .then(
        CommandBuilder.literal("send")
          .description("to one instance")
          .argument(onlineName)
          .argument(Arguments.string("instance"))
          .handler(async (c) => {
            const name = c.get<string>("name");
            const result = await needsPlugin().client.transferPlayerTo(players.get(name)!.uuid, c.get("instance"));
            if (result.success) log(`Transfer of ${name} to ${result.targetInstanceId} queued${result.transferId ? ` as ${result.transferId}` : ""}`);
            else log(`Transfer of ${name} failed: ${result.failureReason}`, "WARN");
          }),
      )
      .build(),
  );
  commands.register(
    CommandBuilder.literal("load")
      .description(`simulated work per tick, 0-${loadPercentMax} %`)
      .argument(Arguments.integer("percent", { min: 0, max: loadPercentMax }))
      .handler((c) => {
        ticks.setLoad(c.get("percent"), Date.now());
        log(`Load set to ${c.get<number>("percent")} % (${ticks.read(Date.now()).msptAvg.toFixed(1)} ms per tick on average so far)`);
      })
      .build(),
  );
  commands.register(
    CommandBuilder.literal("tps")
      .handler(() => {
        const { tps1m, tps5m, tps15m, msptAvg } = ticks.read(Date.now());
        log(`TPS from last 1m, 5m, 15m: ${tps1m.toFixed(2)}, ${tps5m.toFixed(2)}, ${tps15m.toFixed(2)} (MSPT ${msptAvg.toFixed(2)})`);
      })
      .build(),
  );
  commands.register(
    CommandBuilder.literal("metrics")
      .description("report metrics now")
      .handler(() => {
        needsPlugin();
        const metrics = reportMetrics();
        log(`Reported metrics: tps1m=${metrics.tps1m.toFixed(2)} msptAvg=${metrics.msptAvg.toFixed(2)} players=${metrics.playerCount}`);
      })
      .build(),
  );
  commands.register(
    CommandBuilder.literal("event")
      .description("publish a custom event")
      .argument(Arguments.string("type"))
      .argument(Arguments.string("json").optional("{}").greedy())
      .handler((c) => {
        let data: unknown;
        try {
          data = JSON.parse(c.get("json"));
        } catch {
          return c.fail("json: not valid JSON");
        }
        c.failUnless(data !== null && typeof data === "object" && !Array.isArray(data), "json: must be an object");
        try {
          needsPlugin().client.publishEvent(c.get("type"), data as Record<string, unknown>);
        } catch (error) {
          return c.fail((error as Error).message);
        }
        log(`Published event ${c.get<string>("type")}`);
      })
      .build(),
  );
  commands.register(
    CommandBuilder.literal("crash")
      .argument(Arguments.string("code").optional("1"))
      .handler((c) => {
        const code = Number(c.get("code"));
        const exitCode = Number.isInteger(code) && code >= 0 && code <= 255 ? code : 1;
        log(`Simulated crash, exiting with code ${exitCode}`, "ERROR");
        process.exit(exitCode);
      })
      .build(),
  );
  commands.register(
    CommandBuilder.literal("oom")
      .handler(() => {
        // The JVM prints this line; the kernel's OOM killer then ends the process with SIGKILL.
        log('Exception in thread "Server thread" java.lang.OutOfMemoryError: Java heap space', "ERROR");
        process.kill(process.pid, "SIGKILL");
      })
      .build(),
  );
}
