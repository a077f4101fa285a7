// The command registry of spec document 3 ("Plugin commands"): builder validation, argument
// factories and modifiers, auto-generated help pages, default reject messages, the failing helpers
// (red messages), programmatic registration, tab completion and unregistering by primary name.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  Arguments,
  CommandBuilder,
  CommandRegistry,
  NO_PERMISSION_MESSAGE,
  ONLY_CONSOLE_MESSAGE,
  ONLY_PLAYERS_MESSAGE,
  RED,
  consoleSender,
  type CloudCommandSender,
} from "../../src/sdk/index.js";

function sender(kind: "player" | "console", permissions: string[] = []): CloudCommandSender & { messages: string[] } {
  const messages: string[] = [];
  return {
    messages,
    name: () => (kind === "player" ? "Steve" : "CONSOLE"),
    isPlayer: () => kind === "player",
    isConsole: () => kind === "console",
    sendMessage: (text) => void messages.push(text),
    hasPermission: (node) => kind === "console" || permissions.includes(node),
  };
}

describe("plugin command registry", () => {
  it("builder validation throws for a greedy argument that is not last and a required argument after an optional one", () => {
    assert.throws(
      () => CommandBuilder.literal("say").argument(Arguments.string("text").greedy()).argument(Arguments.string("more")).build(),
      /greedy argument text must be the last/,
    );
    assert.throws(
      () => CommandBuilder.literal("tp").argument(Arguments.string("a").optional()).argument(Arguments.string("b")).build(),
      /required argument b follows optional argument a/,
    );
    assert.throws(() => CommandBuilder.literal("bad name"), /command name/);
    assert.throws(() => CommandBuilder.literal("x").then(CommandBuilder.literal("a")).then(CommandBuilder.literal("A")).build(), /used twice/);
    // Optional after optional, and a greedy optional last, are fine.
    CommandBuilder.literal("ok").argument(Arguments.string("a").optional()).argument(Arguments.string("b").optional("x").greedy()).build();
  });

  it("parses typed arguments: integer, longArg, bool words, choices lower-cased, greedy rest, optional defaults, of(parser)", async () => {
    const registry = new CommandRegistry();
    const seen: unknown[] = [];
    registry.register(
      CommandBuilder.literal("set")
        .argument(Arguments.integer("count", { min: 0, max: 10 }))
        .argument(Arguments.longArg("big"))
        .argument(Arguments.bool("flag"))
        .argument(Arguments.choices("mode", "Fast", "SLOW"))
        .argument(Arguments.of("even", (input, context) => (Number(input) % 2 === 0 ? Number(input) : context.sender.name())))
        .argument(Arguments.string("rest").optional("none").greedy())
        .handler((c) => void seen.push([c.get("count"), c.get("big"), c.get("flag"), c.get("mode"), c.get("even"), c.get("rest")]))
        .build(),
    );
    const console = sender("console");
    assert.equal(await registry.dispatch(console, "set 3 9007199254740993 YES fast 4 hello big world"), "executed");
    assert.equal(await registry.dispatch(console, "/SET 0 -1 off Slow 5"), "executed");
    for (const word of ["true", "on", "1"]) await registry.dispatch(console, `set 1 1 ${word} fast 2`);
    for (const word of ["false", "no", "0"]) await registry.dispatch(console, `set 1 1 ${word} fast 2`);
    assert.deepEqual(seen.slice(0, 2), [
      [3, 9007199254740993n, true, "fast", 4, "hello big world"],
      [0, -1n, false, "slow", "CONSOLE", "none"],
    ]);
    assert.deepEqual(
      seen.slice(2).map((values) => (values as unknown[])[2]),
      [true, true, true, false, false, false],
    );
    assert.equal(await registry.dispatch(console, "set 11 1 yes fast 2"), "failed");
    assert.equal(await registry.dispatch(console, "set x 1 yes fast 2"), "failed");
    assert.equal(await registry.dispatch(console, "set 1 1 maybe fast 2"), "failed");
    assert.equal(await registry.dispatch(console, "set 1 1 yes medium 2"), "failed");
    assert.equal(await registry.dispatch(console, "set 1"), "failed");
    assert.deepEqual(console.messages, [
      `${RED}count: 11 is not between 0 and 10`,
      `${RED}count: "x" is not a whole number`,
      `${RED}flag: "maybe" is not true/false (yes/no, on/off, 1/0)`,
      `${RED}mode: "medium" is not one of fast, slow`,
      `${RED}Usage: set <count> <big> <flag> <mode> <even> [rest...]`,
    ]);
    assert.equal(seen.length, 8, "no handler ran for a refused line");
  });

  it("a node without a handler gets a help page of its permitted sub-commands, 8 per page unless set", async () => {
    const registry = new CommandRegistry();
    const root = CommandBuilder.literal("admin").description("network tools");
    for (let i = 1; i <= 10; i++)
      root.then(
        CommandBuilder.literal(`task${i}`)
          .description(`task number ${i}`)
          .argument(Arguments.string("target"))
          .handler(() => {}),
      );
    root.then(
      CommandBuilder.literal("secret")
        .permission("net.secret")
        .handler(() => {}),
    );
    registry.register(root.build());
    const player = sender("player");
    assert.equal(await registry.dispatch(player, "admin"), "help");
    assert.equal(player.messages[0], "Help: admin - network tools (page 1/2)");
    assert.equal(player.messages.length, 9);
    assert.equal(player.messages[1], "  admin task1 <target> - task number 1");
    assert.ok(!player.messages.some((m) => m.includes("secret")), "a sub-command the sender may not use is not listed");
    player.messages.length = 0;
    await registry.dispatch(player, "admin 2");
    assert.deepEqual(player.messages, [
      "Help: admin - network tools (page 2/2)",
      "  admin task9 <target> - task number 9",
      "  admin task10 <target> - task number 10",
    ]);

    const small = new CommandRegistry();
    small.register(
      CommandBuilder.literal("m")
        .helpPageSize(2)
        .then(CommandBuilder.literal("a").handler(() => {}))
        .then(CommandBuilder.literal("b").handler(() => {}))
        .then(CommandBuilder.literal("c").handler(() => {}))
        .build(),
    );
    const console = sender("console");
    await small.dispatch(console, "m 9");
    assert.deepEqual(console.messages, ["Help: m (page 2/2)", "  m c"]);
  });

  it("refuses by requirement with the default messages or the given one, and by permission; fail helpers answer in red", async () => {
    const registry = new CommandRegistry();
    const ran: string[] = [];
    registry.register(
      CommandBuilder.literal("fly")
        .requirePlayer()
        .handler(() => void ran.push("fly"))
        .build(),
    );
    registry.register(
      CommandBuilder.literal("reload")
        .requireConsole()
        .handler(() => void ran.push("reload"))
        .build(),
    );
    registry.register(
      CommandBuilder.literal("home")
        .requirePlayer("Go home yourself.")
        .handler(() => void ran.push("home"))
        .build(),
    );
    registry.register(
      CommandBuilder.literal("ban")
        .permission("net.ban")
        .argument(Arguments.string("who"))
        .handler(() => void ran.push("ban"))
        .build(),
    );
    registry.register(
      CommandBuilder.literal("check")
        .argument(Arguments.integer("n"))
        .handler((c) => {
          c.failIf(c.get<number>("n") === 1, "one is not allowed");
          c.failUnless(c.get<number>("n") < 10, "too big");
          const found = c.require(c.get<number>("n") === 2 ? null : "x", "two has nothing");
          if (c.get<number>("n") === 3) c.fail("three fails");
          c.reply(`ok ${found}`);
        })
        .build(),
    );
    const player = sender("player");
    const console = sender("console");
    await registry.dispatch(console, "fly");
    await registry.dispatch(player, "reload");
    await registry.dispatch(console, "home");
    await registry.dispatch(player, "ban Alex");
    await registry.dispatch(player, "fly");
    for (const n of [1, 10, 2, 3, 4]) await registry.dispatch(player, `check ${n}`);
    assert.deepEqual(console.messages, [`${RED}${ONLY_PLAYERS_MESSAGE}`, `${RED}Go home yourself.`]);
    assert.deepEqual(player.messages, [
      `${RED}${ONLY_CONSOLE_MESSAGE}`,
      `${RED}${NO_PERMISSION_MESSAGE}`,
      `${RED}one is not allowed`,
      `${RED}too big`,
      `${RED}two has nothing`,
      `${RED}three fails`,
      "ok x",
    ]);
    assert.deepEqual(ran, ["fly"]);
    assert.match(ONLY_PLAYERS_MESSAGE, /only players/i);
    assert.match(ONLY_CONSOLE_MESSAGE, /only the console/i);
  });

  it("registers programmatic commands (empty permission = none), completes, and unregisters by primary name only", async () => {
    const errors: unknown[] = [];
    const registry = new CommandRegistry({ onError: (error) => errors.push(error), lookups: { groups: () => ["lobby", "bedwars", "build"] } });
    const calls: string[][] = [];
    registry.registerProgrammatic({
      name: "ping",
      aliases: ["p"],
      permission: "",
      execute: (_s, args) => void calls.push([...args]),
      tabComplete: () => ["pong"],
    });
    registry.registerProgrammatic({ name: "secret", permission: "net.secret", execute: () => void calls.push(["secret"]) });
    registry.registerProgrammatic({
      name: "boom",
      permission: "",
      execute: () => {
        throw new Error("bug");
      },
    });
    registry.register(
      CommandBuilder.literal("send")
        .aliases("move")
        .then(
          CommandBuilder.literal("group")
            .argument(Arguments.group("target"))
            .handler((c) => c.reply(`to ${c.get("target")}`)),
        )
        .build(),
    );
    const player = sender("player");
    assert.equal(await registry.dispatch(player, "p a b"), "executed");
    assert.equal(await registry.dispatch(player, "secret"), "failed");
    assert.equal(await registry.dispatch(player, "boom"), "failed");
    assert.equal(errors.length, 1);
    assert.equal(await registry.dispatch(player, "move group build"), "executed");
    assert.equal(await registry.dispatch(player, "send group nowhere"), "failed");
    assert.equal(await registry.dispatch(player, "nothing here"), "unknown");
    assert.deepEqual(calls, [["a", "b"]]);
    assert.deepEqual(player.messages, [
      `${RED}${NO_PERMISSION_MESSAGE}`,
      `${RED}An internal error occurred while running this command`,
      "to build",
      `${RED}Unknown group nowhere`,
    ]);

    assert.deepEqual(await registry.complete(player, "s"), ["secret", "send"]);
    assert.deepEqual(await registry.complete(player, "send "), ["group"]);
    assert.deepEqual(await registry.complete(player, "send group b"), ["bedwars", "build"]);
    assert.deepEqual(await registry.complete(player, "ping x"), ["pong"]);
    assert.deepEqual(await registry.complete(player, "secret "), []);

    assert.throws(() => registry.registerProgrammatic({ name: "P", permission: "", execute: () => {} }), /already registered/);
    assert.equal(registry.unregister("move"), false, "an alias is not a primary name");
    assert.equal(registry.unregister("send"), true);
    assert.equal(await registry.dispatch(player, "move group build"), "unknown");
    assert.equal(registry.unregister("ping"), true);
    assert.equal(await registry.dispatch(player, "p"), "unknown");
    assert.deepEqual(registry.commandNames(), ["boom", "secret"]);
    const console = consoleSender(() => {});
    assert.ok(console.isConsole() && !console.isPlayer() && console.hasPermission("anything"));
  });
});
