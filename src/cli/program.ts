/**
 * Builds the cloudctl command tree (commander) and runs one invocation: global flags, the
 * authentication gate, every command group, and the mapping of failures to exit codes.
 */
import { Command, CommanderError, Help } from "commander";
import { checkGate } from "./auth-gate.js";
import { registerAuthCommands } from "./commands/auth.js";
import { registerBackupCommands } from "./commands/backup.js";
import { registerClusterCommands } from "./commands/cluster.js";
import { registerCompletionCommand } from "./commands/completion.js";
import { registerContextCommands } from "./commands/context.js";
import { registerCrashCommands } from "./commands/crash.js";
import { registerDeployCommands } from "./commands/deploy.js";
import { registerDiagnosticsCommands } from "./commands/diagnostics.js";
import { registerEventCommands } from "./commands/events.js";
import { registerGroupCommands } from "./commands/group.js";
import { registerInstanceCommands } from "./commands/instance.js";
import { registerLogCommands } from "./commands/logs.js";
import { registerMaintenanceCommands } from "./commands/maintenance.js";
import { registerModuleCommands } from "./commands/module.js";
import { registerNodeCommands } from "./commands/node.js";
import { registerPluginCommands } from "./commands/plugin.js";
import { registerRoleCommands } from "./commands/role.js";
import { registerUserCommands } from "./commands/user.js";
import { registerShareCommands } from "./commands/share.js";
import { registerStatusCommands, versionLine } from "./commands/status.js";
import { registerTemplateCommands } from "./commands/template.js";
import { CliError, ExitCode, exitCodesHelp } from "./exit-codes.js";
import { ApiRequestError } from "./http-client.js";
import { Prompter } from "./prompt.js";
import { Runtime, type GlobalOptions, type ProcessIo } from "./runtime.js";

const environmentHelp = `Environment:
  CLOUD_CONTROLLER  controller URL (after --controller, before the context)
  CLOUD_TOKEN       access token (after --token, before the context)
  CLOUD_CONTEXT     context name (after --context, before currentContext)
  CLOUD_OUTPUT=json same as --json
  NO_COLOR          disable colours

Configuration: ~/.cloudctl/config.yml (contexts, currentContext, accent)`;

/** Builds the program; `io` supplies the environment, terminal facts and stdin. */
export function buildProgram(io: ProcessIo): Command {
  const program = new Command("cloudctl")
    .description("command-line client of the game-server control plane")
    .option("-j, --json", "print the controller's JSON as returned (implies --no-color)")
    .option("-c, --controller <url>", "controller URL (overrides CLOUD_CONTROLLER and the context)")
    .option("-t, --token <token>", "access token (overrides CLOUD_TOKEN and the context)")
    .option("--context <name>", "context to use (overrides CLOUD_CONTEXT and currentContext)")
    .option("--no-color", "disable colours (automatic when stdout is not a terminal)")
    .option("--ascii", "ASCII table borders and symbols only")
    .option("-v, --verbose", "print request and response lines to stderr (tokens redacted)")
    .helpCommand(true)
    // A repeatable flag starts from an empty list: "(default: [])" says nothing, so help leaves it out.
    .configureHelp({ optionDescription: (option) => new Help().optionDescription(option).replace(" (default: [])", "") })
    .showSuggestionAfterError(true)
    .exitOverride()
    .configureOutput({
      writeOut: (text) => process.stdout.write(text),
      writeErr: (text) => process.stderr.write(text),
    })
    .version(versionLine(), "-V, --version", "print the cloudctl version and exit")
    .addHelpText("after", `\n${exitCodesHelp}\n\n${environmentHelp}`);

  const runtimes = new WeakMap<Command, Runtime>();
  const runtime = (command: Command): Runtime => {
    let rt = runtimes.get(command);
    if (!rt) {
      rt = new Runtime(command.optsWithGlobals<GlobalOptions>(), io);
      runtimes.set(command, rt);
    }
    return rt;
  };

  program.hook("preAction", (_root, actionCommand) => checkGate(actionCommand, runtime(actionCommand)));

  registerAuthCommands(program, runtime);
  registerStatusCommands(program, runtime);
  registerContextCommands(program, runtime);
  registerGroupCommands(program, runtime);
  registerInstanceCommands(program, runtime);
  registerCrashCommands(program, runtime);
  registerTemplateCommands(program, runtime);
  registerBackupCommands(program, runtime);
  registerEventCommands(program, runtime);
  registerLogCommands(program, runtime);
  registerDiagnosticsCommands(program, runtime);
  registerShareCommands(program, runtime);
  registerNodeCommands(program, runtime);
  registerMaintenanceCommands(program, runtime);
  registerDeployCommands(program, runtime);
  registerClusterCommands(program, runtime);
  registerPluginCommands(program, runtime);
  registerModuleCommands(program, runtime);
  registerUserCommands(program, runtime);
  registerRoleCommands(program, runtime);
  registerCompletionCommand(program, runtime);
  return program;
}

/** Runs cloudctl with `argv` (as in process.argv) and returns the exit code. */
export async function runCli(argv: string[], io?: Partial<ProcessIo>): Promise<number> {
  const fullIo: ProcessIo = {
    env: io?.env ?? process.env,
    stdoutIsTty: io?.stdoutIsTty ?? Boolean(process.stdout.isTTY),
    prompter: io?.prompter ?? new Prompter(),
  };
  const program = buildProgram(fullIo);
  const verbose = argv.includes("-v") || argv.includes("--verbose");
  try {
    await program.parseAsync(argv);
    return ExitCode.ok;
  } catch (error) {
    // Help and --version exit 0; every other commander error is a command line that cannot be right.
    if (error instanceof CommanderError) return error.exitCode === 0 ? ExitCode.ok : ExitCode.usage;
    if (error instanceof CliError) {
      const detail = error instanceof ApiRequestError ? ` (${error.code}, HTTP ${error.status})` : "";
      process.stderr.write(`error: ${error.message}${detail}\n`);
      return error.exitCode;
    }
    process.stderr.write(`error: ${(error as Error)?.message ?? String(error)}\n`);
    if (verbose && error instanceof Error && error.stack) process.stderr.write(`${error.stack}\n`);
    return ExitCode.failure;
  } finally {
    fullIo.prompter.close();
  }
}
