/**
 * Everything one cloudctl invocation needs, built from the global flags and the environment:
 * the configuration file, the resolved target (context, controller, token), the output renderer,
 * the prompter and REST clients. Commands receive it from a {@link RuntimeFactory}.
 */
import type { Command } from "commander";
import { loadConfig, resolveTarget, saveConfig, type CliConfig, type Resolved } from "./config-file.js";
import { CancelledError, CliError, ExitCode } from "./exit-codes.js";
import { HttpClient } from "./http-client.js";
import { Prompter } from "./prompt.js";
import { Output } from "./render.js";

/** The global flags every command inherits. */
export interface GlobalOptions {
  json?: boolean;
  controller?: string;
  token?: string;
  context?: string;
  /** False with `--no-color`. */
  color?: boolean;
  ascii?: boolean;
  verbose?: boolean;
}

/** Process-level inputs; tests and the entry point pass the real ones. */
export interface ProcessIo {
  env: NodeJS.ProcessEnv;
  stdoutIsTty: boolean;
  prompter: Prompter;
}

/** Creates the runtime of the command being run. */
export type RuntimeFactory = (command: Command) => Runtime;

/** Per-invocation state shared by the command handlers. */
export class Runtime {
  private cachedConfig: CliConfig | undefined;
  private cachedOutput: Output | undefined;

  constructor(
    readonly globals: GlobalOptions,
    readonly io: ProcessIo,
  ) {}

  /** True with `--json` or `CLOUD_OUTPUT=json`. */
  get json(): boolean {
    return Boolean(this.globals.json) || this.io.env.CLOUD_OUTPUT?.toLowerCase() === "json";
  }

  get config(): CliConfig {
    this.cachedConfig ??= loadConfig();
    return this.cachedConfig;
  }

  /** Persists the (mutated) configuration. */
  saveConfig(): void {
    saveConfig(this.config);
  }

  /** Resolution without checking that the selected context exists (setup and login create it). */
  get target(): Resolved {
    return resolveTarget(this.config, this.globals, this.io.env);
  }

  /** Resolution for commands that use an existing context. */
  get resolved(): Resolved {
    const target = this.target;
    if (!target.contextExists) throw new CliError(`context "${target.contextName}" does not exist (see \`cloudctl context list\`)`);
    return target;
  }

  get out(): Output {
    this.cachedOutput ??= new Output({
      json: this.json,
      color: this.globals.color !== false && !this.json && this.io.stdoutIsTty && this.io.env.NO_COLOR === undefined,
      ascii: Boolean(this.globals.ascii),
      accent: this.config.accent,
    });
    return this.cachedOutput;
  }

  get prompter(): Prompter {
    return this.io.prompter;
  }

  /**
   * Asks `question` unless `yes` (the command's `--yes`). A No, or a stdin that is not a terminal
   * (nobody can answer: a script must say `--yes`), ends the command with exit 6 and nothing done.
   */
  async confirm(question: string, yes: boolean | undefined): Promise<void> {
    if (yes) return;
    if (!this.prompter.interactive) {
      throw new CancelledError(`not confirmed: stdin is not a terminal, so nobody can answer "${question}"; pass --yes to go ahead`);
    }
    if (!(await this.prompter.confirm(question))) throw new CancelledError("cancelled: nothing was changed");
  }

  /** A client for an explicit controller URL (setup, login). */
  clientFor(baseUrl: string, token?: string): HttpClient {
    return new HttpClient({
      baseUrl,
      token,
      verbose: this.globals.verbose ? (line) => process.stderr.write(`${line}\n`) : undefined,
    });
  }

  /**
   * A client for the resolved controller. With `auth` (the default) a token must resolve, else
   * the command fails with exit code 2 and asks the operator to sign in.
   */
  client(options: { auth?: boolean } = {}): HttpClient {
    const target = this.resolved;
    if (!target.controller) {
      throw new CliError("no controller configured: pass --controller, set CLOUD_CONTROLLER, or run `cloudctl setup`");
    }
    if ((options.auth ?? true) && !target.token) {
      const where = target.contextName ? ` (context "${target.contextName}")` : "";
      throw new CliError(`not signed in${where}: run \`cloudctl login\`, or pass --token / set CLOUD_TOKEN`, ExitCode.unauthorized);
    }
    return this.clientFor(target.controller, target.token);
  }
}
