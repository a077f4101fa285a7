/**
 * The command builder (spec document 3, "Plugin commands"): literal nodes with aliases, a
 * permission, a description, a player or console requirement (with an optional message), typed
 * arguments, a handler and child nodes; help pages of 8 entries unless set. `build()` checks the
 * rules: a greedy argument is last, and no required argument follows an optional one.
 */
import type { ArgumentContext, CommandArgument } from "./arguments.js";
import { fail, failIf, failUnless, require } from "./failure.js";
import type { CloudCommandSender } from "./sender.js";

export const helpPageSizeDefault = 8;
/** Nesting depth of a command tree; deeper is refused at build time. */
export const commandDepthMax = 16;
const LITERAL = /^[A-Za-z0-9_.-]{1,64}$/;

/** What a handler receives: the sender, the parsed arguments and the failing helpers. */
export interface CommandContext {
  readonly sender: CloudCommandSender;
  /** The words typed for the command path, e.g. `players join`. */
  readonly label: string;
  /** A parsed argument (undefined for an optional one not given and without a default). */
  get<T>(name: string): T;
  has(name: string): boolean;
  reply(text: string): void;
  fail(message: string): never;
  failIf(condition: unknown, message: string): void;
  failUnless(condition: unknown, message: string): void;
  require<T>(value: T | null | undefined, message: string): T;
}

export type CommandHandler = (context: CommandContext) => void | Promise<void>;

export interface Requirement {
  kind: "player" | "console";
  message: string | null;
}

/** A built, immutable command node. */
export interface CommandNode {
  readonly name: string;
  readonly aliases: readonly string[];
  readonly permission: string | null;
  readonly description: string;
  readonly requirement: Requirement | null;
  readonly arguments: readonly CommandArgument<unknown>[];
  readonly handler: CommandHandler | null;
  readonly children: readonly CommandNode[];
  readonly helpPageSize: number;
}

export class CommandBuilder {
  private aliasList: string[] = [];
  private permissionNode: string | null = null;
  private descriptionText = "";
  private requirement: Requirement | null = null;
  private args: CommandArgument<unknown>[] = [];
  private handlerFn: CommandHandler | null = null;
  private childBuilders: CommandBuilder[] = [];
  private pageSize = helpPageSizeDefault;

  private constructor(private readonly name: string) {
    if (!LITERAL.test(name)) throw new TypeError(`command name "${name}" must be 1-64 of A-Z a-z 0-9 _ . -`);
  }

  static literal(name: string): CommandBuilder {
    return new CommandBuilder(name);
  }

  aliases(...aliases: string[]): this {
    for (const alias of aliases) if (!LITERAL.test(alias)) throw new TypeError(`alias "${alias}" must be 1-64 of A-Z a-z 0-9 _ . -`);
    this.aliasList.push(...aliases);
    return this;
  }

  /** Needed to run this node and everything under it; empty means none. */
  permission(node: string): this {
    this.permissionNode = node === "" ? null : node;
    return this;
  }

  description(text: string): this {
    this.descriptionText = text;
    return this;
  }

  /** Only players may run it; `message` replaces the default reject message. */
  requirePlayer(message?: string): this {
    this.requirement = { kind: "player", message: message ?? null };
    return this;
  }

  /** Only the console may run it; `message` replaces the default reject message. */
  requireConsole(message?: string): this {
    this.requirement = { kind: "console", message: message ?? null };
    return this;
  }

  argument(argument: CommandArgument<unknown>): this {
    this.args.push(argument);
    return this;
  }

  handler(handler: CommandHandler): this {
    this.handlerFn = handler;
    return this;
  }

  then(child: CommandBuilder): this {
    this.childBuilders.push(child);
    return this;
  }

  helpPageSize(entries: number): this {
    if (!Number.isInteger(entries) || entries < 1 || entries > 100) throw new TypeError("helpPageSize must be an integer from 1 to 100");
    this.pageSize = entries;
    return this;
  }

  /** Checks the rules and freezes the tree. */
  build(): CommandNode {
    return this.buildAt(0, this.name);
  }

  private buildAt(depth: number, path: string): CommandNode {
    if (depth >= commandDepthMax) throw new TypeError(`command ${path}: deeper than ${commandDepthMax} levels`);
    const names = new Set<string>();
    this.args.forEach((argument, index) => {
      if (names.has(argument.name)) throw new TypeError(`command ${path}: argument ${argument.name} declared twice`);
      names.add(argument.name);
      if (argument.isGreedy && index !== this.args.length - 1) throw new TypeError(`command ${path}: greedy argument ${argument.name} must be the last`);
      const previous = this.args[index - 1];
      if (argument.required && previous && !previous.required)
        throw new TypeError(`command ${path}: required argument ${argument.name} follows optional argument ${previous.name}`);
    });
    const children = this.childBuilders.map((child) => child.buildAt(depth + 1, `${path} ${child.name}`));
    const labels = new Set<string>();
    for (const child of children) {
      for (const label of [child.name, ...child.aliases].map((l) => l.toLowerCase())) {
        if (labels.has(label)) throw new TypeError(`command ${path}: sub-command label ${label} used twice`);
        labels.add(label);
      }
    }
    return Object.freeze({
      name: this.name,
      aliases: Object.freeze([...this.aliasList]),
      permission: this.permissionNode,
      description: this.descriptionText,
      requirement: this.requirement,
      arguments: Object.freeze([...this.args]),
      handler: this.handlerFn,
      children: Object.freeze(children),
      helpPageSize: this.pageSize,
    });
  }
}

/** The context handed to a handler. */
export function commandContext(sender: CloudCommandSender, label: string, values: Map<string, unknown>): CommandContext {
  return {
    sender,
    label,
    get: <T>(name: string) => values.get(name) as T,
    has: (name) => values.get(name) !== undefined,
    reply: (text) => sender.sendMessage(text),
    fail,
    failIf,
    failUnless,
    require,
  };
}

export type { ArgumentContext };
