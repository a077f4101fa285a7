/**
 * The authentication gate: before any context exists, most commands are refused with a pointer to
 * `cloudctl setup`. Allowed regardless are the commands below and commands marked local-only.
 * (Whether a token resolves is checked when a command asks for an authenticated client.)
 */
import type { Command } from "commander";
import { CliError } from "./exit-codes.js";
import type { Runtime } from "./runtime.js";

/** Top-level commands that run before any context exists. */
export const ungatedCommands: ReadonlySet<string> = new Set(["setup", "login", "logout", "version", "help", "completion", "context", "cluster"]);

const localOnly = new WeakSet<Command>();

/** Marks a command as local-only: it never talks to a controller, so the gate lets it through. */
export function markLocalOnly(command: Command): Command {
  localOnly.add(command);
  return command;
}

/** The command directly under the program that `command` belongs to. */
export function topLevelCommand(command: Command): Command {
  let current = command;
  while (current.parent && current.parent.parent) current = current.parent;
  return current;
}

/**
 * Refuses a gated command when no context exists and no controller was given by flag or
 * environment (with an explicit `--controller`/CLOUD_CONTROLLER the operator is clearly targeting
 * a controller, so scripts without a config file keep working).
 */
export function checkGate(command: Command, runtime: Runtime): void {
  if (localOnly.has(command) || ungatedCommands.has(topLevelCommand(command).name())) return;
  if (Object.keys(runtime.config.contexts).length > 0) return;
  if (runtime.globals.controller || runtime.io.env.CLOUD_CONTROLLER) return;
  throw new CliError("no context configured yet: run `cloudctl setup` (or `cloudctl context add <name> --controller <url>`) first");
}
