/** `cloudctl context list|current|use|add|remove`: manage named controller targets. */
import type { Command } from "commander";
import { checkContextName, normalizeControllerUrl } from "../config-file.js";
import { CliError } from "../exit-codes.js";
import type { RuntimeFactory } from "../runtime.js";

/** Registers the context commands. */
export function registerContextCommands(program: Command, runtime: RuntimeFactory): void {
  const context = program.command("context").description("manage contexts (named controller + token pairs)");

  context
    .command("list")
    .alias("ls")
    .description("list contexts; * marks the current one")
    .action((_opts, cmd: Command) => {
      const rt = runtime(cmd);
      const { config } = rt;
      if (rt.json) {
        const contexts = Object.entries(config.contexts).map(([name, entry]) => ({
          name,
          controller: entry.controller,
          signedIn: Boolean(entry.token),
          current: name === config.currentContext,
        }));
        rt.out.jsonValue({ currentContext: config.currentContext ?? null, contexts });
        return;
      }
      const rows = Object.entries(config.contexts).map(([name, entry]) => [
        name === config.currentContext ? "*" : "",
        name,
        entry.controller,
        entry.token ? "yes" : "no",
      ]);
      rt.out.table(["CURRENT", "NAME", "CONTROLLER", "SIGNED IN"], rows);
    });

  context
    .command("current")
    .description("print the context in effect (--context, CLOUD_CONTEXT, then currentContext)")
    .action((_opts, cmd: Command) => {
      const rt = runtime(cmd);
      const target = rt.resolved;
      if (!target.contextName) throw new CliError("no current context: run `cloudctl context use <name>` or `cloudctl setup`");
      if (rt.json) rt.out.jsonValue({ name: target.contextName, source: target.contextSource, controller: rt.config.contexts[target.contextName]?.controller });
      else rt.out.line(target.contextName);
    });

  context
    .command("use <name>")
    .description("make <name> the current context")
    .action((name: string, _opts, cmd: Command) => {
      const rt = runtime(cmd);
      if (!rt.config.contexts[name]) throw new CliError(`context "${name}" does not exist (see \`cloudctl context list\`)`);
      rt.config.currentContext = name;
      rt.saveConfig();
      rt.out.success(`switched to context ${rt.out.accent(name)}`);
    });

  context
    .command("add <name>")
    .description("add or replace a context")
    .addHelpText("after", "\nUses the global flags: --controller <url> (required) and --token <token> (optional; else run `cloudctl login`).")
    .action((rawName: string, _opts, cmd: Command) => {
      const rt = runtime(cmd);
      const name = checkContextName(rawName);
      // --controller and --token are the global flags (commander gives them to the program even
      // after the subcommand); environment variables are deliberately not used here.
      const opts = rt.globals;
      if (!opts.controller) throw new CliError("context add needs --controller <url>");
      const controller = normalizeControllerUrl(opts.controller);
      rt.config.contexts[name] = opts.token ? { controller, token: opts.token } : { controller };
      rt.config.currentContext ??= name;
      rt.saveConfig();
      rt.out.success(`context ${rt.out.accent(name)} → ${controller}${rt.config.currentContext === name ? " (current)" : ""}`);
    });

  context
    .command("remove <name>")
    .aliases(["rm", "delete"])
    .description("remove a context (--force to remove the current one)")
    .option("--force", "allow removing the current context")
    .action((name: string, opts: { force?: boolean }, cmd: Command) => {
      const rt = runtime(cmd);
      const { config } = rt;
      if (!config.contexts[name]) throw new CliError(`context "${name}" does not exist`);
      if (config.currentContext === name && !opts.force) {
        throw new CliError(`context "${name}" is the current context; pass --force to remove it`);
      }
      delete config.contexts[name];
      if (config.currentContext === name) config.currentContext = undefined;
      rt.saveConfig();
      rt.out.success(`removed context ${name}`);
    });
}
