/** `cloudctl setup`, `login` and `logout`: create a context and sign in to its controller. */
import type { Command } from "commander";
import { checkContextName, legacyContextName, normalizeControllerUrl } from "../config-file.js";
import { CliError } from "../exit-codes.js";
import type { HttpClient } from "../http-client.js";
import type { Runtime, RuntimeFactory } from "../runtime.js";

/** Controller URL offered by the interactive setup. */
export const defaultControllerUrl = "http://127.0.0.1:8080";

interface Credentials {
  username?: string;
  password?: string;
}

interface LoginResponse {
  token?: string;
  accessToken?: string;
  expiresAt?: string;
}

async function required(rt: Runtime, value: string | undefined, question: string, secret = false): Promise<string> {
  if (value) return value;
  const answer = await rt.prompter.ask(question, { secret });
  if (answer === null || answer.trim() === "") throw new CliError(`missing ${question.replace(/[:?]\s*$/, "").toLowerCase()}`);
  return secret ? answer : answer.trim();
}

/** Signs in with a username and password; returns the token and its expiry. */
async function signIn(client: HttpClient, username: string, password: string): Promise<{ token: string; expiresAt?: string }> {
  const response = await client.request<LoginResponse>("POST", "/api/v1/auth/login", { body: { username, password }, auth: false });
  const token = response.data?.token ?? response.data?.accessToken;
  if (!token) throw new CliError("login response carried no token");
  return { token, expiresAt: response.data?.expiresAt };
}

/** Registers setup, login and logout. */
export function registerAuthCommands(program: Command, runtime: RuntimeFactory): void {
  program
    .command("setup")
    .description("create a context and sign in (asks for what the flags do not give)")
    .option("-u, --username <name>", "user to sign in as")
    .option("-p, --password <password>", "password (asked for when omitted; a pipe may supply it)")
    .addHelpText(
      "after",
      "\nThe global --controller and --context flags (or CLOUD_CONTROLLER, CLOUD_CONTEXT) name the controller and the context to create;\n" +
        `on a terminal they are asked for, on a pipe they default to ${defaultControllerUrl} and "${legacyContextName}".\n` +
        "From a pipe only the username (without -u) and the password are read, one per line:\n" +
        "  printf '%s\\n' \"$PASSWORD\" | cloudctl setup -c http://127.0.0.1:8080 -u admin",
    )
    .action(async (opts: Credentials, cmd: Command) => {
      const rt = runtime(cmd);
      // Questions with a default are asked on a terminal only: on a pipe the answers are the
      // username (when -u is missing) and the password, one per line, so a piped password can never
      // become the context's name.
      const askDefault = async (question: string) => (rt.prompter.interactive ? rt.prompter.ask(question) : null);
      const controllerAnswer = rt.globals.controller ?? rt.io.env.CLOUD_CONTROLLER ?? (await askDefault(`Controller URL [${defaultControllerUrl}]: `));
      const controller = normalizeControllerUrl(controllerAnswer?.trim() || defaultControllerUrl);
      const nameAnswer = rt.globals.context ?? rt.io.env.CLOUD_CONTEXT ?? (await askDefault(`Context name [${legacyContextName}]: `));
      const name = checkContextName(nameAnswer?.trim() || legacyContextName);
      const username = await required(rt, opts.username, "Username: ");
      const password = await required(rt, opts.password, "Password: ", true);
      const { token, expiresAt } = await signIn(rt.clientFor(controller), username, password);
      rt.config.contexts[name] = { controller, token };
      rt.config.currentContext = name;
      rt.saveConfig();
      if (rt.json) rt.out.jsonValue({ context: name, controller, expiresAt: expiresAt ?? null });
      else rt.out.success(`context ${rt.out.accent(name)} → ${controller}, signed in as ${username}${expiresAt ? ` until ${expiresAt}` : ""}`);
    });

  program
    .command("login")
    .description("sign in and store the token in the context (only the token is stored)")
    .option("-u, --username <name>", "user to sign in as")
    .option("-p, --password <password>", "password (asked for when omitted)")
    .action(async (opts: Credentials, cmd: Command) => {
      const rt = runtime(cmd);
      const target = rt.target;
      if (!target.controller) throw new CliError("no controller to sign in to: run `cloudctl setup`, or pass --controller");
      const controller = normalizeControllerUrl(target.controller);
      const username = await required(rt, opts.username, "Username: ");
      const password = await required(rt, opts.password, "Password: ", true);
      const { token, expiresAt } = await signIn(rt.clientFor(controller), username, password);
      const name = checkContextName(target.contextName ?? legacyContextName);
      const entry = rt.config.contexts[name];
      if (entry) entry.token = token;
      else rt.config.contexts[name] = { controller, token };
      rt.config.currentContext ??= name;
      rt.saveConfig();
      if (rt.json) rt.out.jsonValue({ context: name, controller: rt.config.contexts[name].controller, expiresAt: expiresAt ?? null });
      else rt.out.success(`signed in to ${controller} as ${username} (context ${rt.out.accent(name)}${expiresAt ? `, until ${expiresAt}` : ""})`);
    });

  program
    .command("logout")
    .description("forget the token of the context (the controller URL is kept)")
    .action((_opts, cmd: Command) => {
      const rt = runtime(cmd);
      const name = rt.target.contextName;
      const entry = name ? rt.config.contexts[name] : undefined;
      if (!name || !entry) {
        rt.out.note("no context: nothing to sign out of");
        return;
      }
      delete entry.token;
      rt.saveConfig();
      rt.out.success(`signed out of context ${rt.out.accent(name)}`);
    });
}
