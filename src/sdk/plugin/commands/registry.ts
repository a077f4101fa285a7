/**
 * The command registry (spec document 3, "Plugin commands"): builder trees and programmatic
 * commands, dispatch of a command line with permission and sender checks, typed argument parsing,
 * auto-generated help for nodes without a handler, tab completion, and unregistering by primary
 * name. Failures (`fail` and friends, a bad argument, a missing permission) reach the sender in red.
 */
import type { ArgumentContext } from "./arguments.js";
import { commandContext, type CommandNode } from "./builder.js";
import { CommandFailure, RED } from "./failure.js";
import type { CloudCommandSender } from "./sender.js";

/** Default reject messages of the sender requirements (spec document 3). */
export const ONLY_PLAYERS_MESSAGE = "Only players can use this command.";
export const ONLY_CONSOLE_MESSAGE = "Only the console can use this command.";
export const NO_PERMISSION_MESSAGE = "You do not have permission to use this command.";
/** Commands one registry holds at most. */
export const commandsMax = 1_024;
/** Longest command line dispatched; a longer one is refused. */
export const commandLineCharsMax = 4_096;

/** A command registered without the builder: a name, a permission ("" = none), execute and an optional completer. */
export interface ProgrammaticCommand {
  name: string;
  aliases?: readonly string[];
  permission: string;
  description?: string;
  execute(sender: CloudCommandSender, args: readonly string[]): void | Promise<void>;
  tabComplete?(sender: CloudCommandSender, args: readonly string[]): readonly string[] | Promise<readonly string[]>;
}

type Registered = { kind: "tree"; node: CommandNode } | { kind: "programmatic"; command: ProgrammaticCommand };

/** What dispatch did. */
export type DispatchOutcome = "executed" | "failed" | "help" | "unknown";

export interface CommandRegistryOptions {
  /** Lookups the player, group and instance arguments use. */
  lookups?: Omit<ArgumentContext, "sender">;
  /** Where an error a handler throws (other than the failing helpers) is reported. */
  onError?: (error: unknown, line: string) => void;
}

const primaryOf = (entry: Registered) => (entry.kind === "tree" ? entry.node.name : entry.command.name);
const labelsOf = (entry: Registered) =>
  entry.kind === "tree" ? [entry.node.name, ...entry.node.aliases] : [entry.command.name, ...(entry.command.aliases ?? [])];
const words = (line: string) =>
  line
    .trim()
    .split(/\s+/)
    .filter((word) => word !== "");

export class CommandRegistry {
  private readonly entries = new Map<string, Registered>();
  private readonly labels = new Map<string, Registered>();

  constructor(private readonly options: CommandRegistryOptions = {}) {}

  /** Registers a built tree; a name or alias already taken throws. */
  register(node: CommandNode): void {
    this.add({ kind: "tree", node });
  }

  registerProgrammatic(command: ProgrammaticCommand): void {
    if (!/^[A-Za-z0-9_.-]{1,64}$/.test(command.name)) throw new TypeError(`command name "${command.name}" must be 1-64 of A-Z a-z 0-9 _ . -`);
    this.add({ kind: "programmatic", command });
  }

  /** Removes the command whose primary name is `name` (aliases do not count); false when there is none. */
  unregister(name: string): boolean {
    const entry = this.entries.get(name.toLowerCase());
    if (!entry) return false;
    this.entries.delete(name.toLowerCase());
    for (const label of labelsOf(entry)) if (this.labels.get(label.toLowerCase()) === entry) this.labels.delete(label.toLowerCase());
    return true;
  }

  /** Primary names, sorted. */
  commandNames(): string[] {
    return [...this.entries.values()].map(primaryOf).sort();
  }

  /** One line per command the sender may use: usage and description. */
  overview(sender: CloudCommandSender): string[] {
    return [...this.entries.values()]
      .filter((entry) => (entry.kind === "tree" ? this.permitted(sender, entry.node) : this.permittedNode(sender, entry.command.permission)))
      .map((entry) =>
        entry.kind === "tree"
          ? entryLine(entry.node.name, entry.node)
          : `${entry.command.name}${entry.command.description ? ` - ${entry.command.description}` : ""}`,
      )
      .sort();
  }

  /** Runs a command line (without a leading slash). "unknown" when no command has its first word. */
  async dispatch(sender: CloudCommandSender, line: string): Promise<DispatchOutcome> {
    if (line.length > commandLineCharsMax) {
      sender.sendMessage(`${RED}Command line longer than ${commandLineCharsMax} characters`);
      return "failed";
    }
    const [first, ...rest] = words(line.replace(/^\//, ""));
    const entry = first === undefined ? undefined : this.labels.get(first.toLowerCase());
    if (!entry || first === undefined) return "unknown";
    try {
      if (entry.kind === "programmatic") {
        if (!this.permittedNode(sender, entry.command.permission)) throw new CommandFailure(NO_PERMISSION_MESSAGE);
        await entry.command.execute(sender, rest);
        return "executed";
      }
      return await this.walk(sender, entry.node, entry.node.name, rest, line);
    } catch (error) {
      if (error instanceof CommandFailure) {
        sender.sendMessage(`${RED}${error.message}`);
        return "failed";
      }
      this.options.onError?.(error, line);
      sender.sendMessage(`${RED}An internal error occurred while running this command`);
      return "failed";
    }
  }

  /** Suggestions for the last word of `line`. */
  async complete(sender: CloudCommandSender, line: string): Promise<string[]> {
    const trailingSpace = /\s$/.test(line);
    const parts = words(line.replace(/^\//, ""));
    if (trailingSpace) parts.push("");
    if (parts.length <= 1) {
      const prefix = (parts[0] ?? "").toLowerCase();
      return [...this.entries.values()]
        .map(primaryOf)
        .filter((name) => name.toLowerCase().startsWith(prefix))
        .sort();
    }
    const entry = this.labels.get(parts[0].toLowerCase());
    if (!entry) return [];
    if (entry.kind === "programmatic") {
      if (!this.permittedNode(sender, entry.command.permission)) return [];
      return [...((await entry.command.tabComplete?.(sender, parts.slice(1))) ?? [])];
    }
    let node = entry.node;
    let index = 1;
    while (index < parts.length - 1) {
      const child = findChild(node, parts[index]);
      if (!child) break;
      node = child;
      index += 1;
    }
    if (!this.permitted(sender, node)) return [];
    const prefix = parts[parts.length - 1];
    const argumentIndex = parts.length - 1 - index;
    const out: string[] = [];
    if (argumentIndex === 0)
      for (const child of node.children) if (this.permitted(sender, child) && child.name.toLowerCase().startsWith(prefix.toLowerCase())) out.push(child.name);
    const argument = node.arguments[Math.min(argumentIndex, node.arguments.length - 1)];
    if (argument && (argumentIndex < node.arguments.length || argument.isGreedy)) out.push(...(await argument.completer(prefix, this.argumentContext(sender))));
    return out;
  }

  private add(entry: Registered): void {
    if (this.entries.size >= commandsMax) throw new Error(`a registry holds at most ${commandsMax} commands`);
    const labels = labelsOf(entry).map((label) => label.toLowerCase());
    for (const label of labels) if (this.labels.has(label)) throw new Error(`command label ${label} is already registered`);
    this.entries.set(primaryOf(entry).toLowerCase(), entry);
    for (const label of labels) this.labels.set(label, entry);
  }

  private async walk(sender: CloudCommandSender, node: CommandNode, label: string, args: string[], line: string): Promise<DispatchOutcome> {
    this.check(sender, node);
    const child = args.length > 0 ? findChild(node, args[0]) : undefined;
    if (child) return await this.walk(sender, child, `${label} ${child.name}`, args.slice(1), line);
    if (node.handler === null) {
      this.sendHelp(sender, node, label, args);
      return "help";
    }
    const values = await this.parseArguments(sender, node, label, args);
    await node.handler(commandContext(sender, label, values));
    return "executed";
  }

  private check(sender: CloudCommandSender, node: CommandNode): void {
    if (!this.permittedNode(sender, node.permission)) throw new CommandFailure(NO_PERMISSION_MESSAGE);
    if (node.requirement?.kind === "player" && !sender.isPlayer()) throw new CommandFailure(node.requirement.message ?? ONLY_PLAYERS_MESSAGE);
    if (node.requirement?.kind === "console" && !sender.isConsole()) throw new CommandFailure(node.requirement.message ?? ONLY_CONSOLE_MESSAGE);
  }

  private async parseArguments(sender: CloudCommandSender, node: CommandNode, label: string, args: string[]): Promise<Map<string, unknown>> {
    const values = new Map<string, unknown>();
    const usage = () => `Usage: ${label}${node.arguments.map((argument) => ` ${argument.usage()}`).join("")}`;
    const context = this.argumentContext(sender);
    let index = 0;
    for (const argument of node.arguments) {
      if (index >= args.length) {
        if (argument.required) throw new CommandFailure(usage());
        values.set(argument.name, argument.defaultValue);
        continue;
      }
      const input = argument.isGreedy ? args.slice(index).join(" ") : args[index];
      index = argument.isGreedy ? args.length : index + 1;
      values.set(argument.name, await argument.parser(input, context));
    }
    if (index < args.length) throw new CommandFailure(usage());
    return values;
  }

  /** The auto-generated help of a node without a handler: its sub-commands, a page at a time. */
  private sendHelp(sender: CloudCommandSender, node: CommandNode, label: string, args: string[]): void {
    const lines = node.children.filter((child) => this.permitted(sender, child)).map((child) => entryLine(`${label} ${child.name}`, child));
    const pages = Math.max(1, Math.ceil(lines.length / node.helpPageSize));
    const requested = args.length === 1 && /^\d+$/.test(args[0]) ? Number(args[0]) : 1;
    if (args.length > 0 && requested === 1 && args[0] !== "1") sender.sendMessage(`${RED}Unknown sub-command ${args[0]}`);
    const page = Math.min(Math.max(1, requested), pages);
    sender.sendMessage(`Help: ${label}${node.description ? ` - ${node.description}` : ""} (page ${page}/${pages})`);
    for (const text of lines.slice((page - 1) * node.helpPageSize, page * node.helpPageSize)) sender.sendMessage(`  ${text}`);
  }

  private permitted(sender: CloudCommandSender, node: CommandNode): boolean {
    return this.permittedNode(sender, node.permission);
  }

  private permittedNode(sender: CloudCommandSender, permission: string | null): boolean {
    return permission === null || permission === "" || sender.hasPermission(permission);
  }

  private argumentContext(sender: CloudCommandSender): ArgumentContext {
    return { sender, ...this.options.lookups };
  }
}

function findChild(node: CommandNode, word: string): CommandNode | undefined {
  const wanted = word.toLowerCase();
  return node.children.find((child) => child.name.toLowerCase() === wanted || child.aliases.some((alias) => alias.toLowerCase() === wanted));
}

function entryLine(label: string, node: CommandNode): string {
  const usage = node.arguments.map((argument) => ` ${argument.usage()}`).join("");
  const more = node.children.length > 0 && node.handler === null ? " ..." : "";
  return `${label}${usage}${more}${node.description ? ` - ${node.description}` : ""}`;
}
