/**
 * Typed command arguments and their factories (spec document 3, "Plugin commands"): string,
 * integer, longArg, bool, player, group, instance, choices and of(parser[, completer]); modifiers
 * optional, optional(default), greedy and completer. An argument is immutable: a modifier returns
 * a new one.
 */
import type { CloudPlayer, PlayerManager } from "../players.js";
import { fail } from "./failure.js";
import type { CloudCommandSender } from "./sender.js";

/** What parsers and completers may consult. Lists of groups and instances are supplied by the registry's owner. */
export interface ArgumentContext {
  sender: CloudCommandSender;
  players?: PlayerManager;
  groups?: () => Promise<readonly string[]> | readonly string[];
  instances?: () => Promise<readonly string[]> | readonly string[];
}

export type ArgumentParser<T> = (input: string, context: ArgumentContext) => T | Promise<T>;
export type ArgumentCompleter = (prefix: string, context: ArgumentContext) => readonly string[] | Promise<readonly string[]>;

const noCompletions: ArgumentCompleter = () => [];

export class CommandArgument<T> {
  private constructor(
    readonly name: string,
    readonly parser: ArgumentParser<T>,
    readonly completer: ArgumentCompleter,
    readonly required: boolean,
    readonly isGreedy: boolean,
    readonly defaultValue: T | undefined,
  ) {}

  static of<T>(name: string, parser: ArgumentParser<T>, completer: ArgumentCompleter = noCompletions): CommandArgument<T> {
    if (!/^[A-Za-z][A-Za-z0-9_-]{0,31}$/.test(name)) throw new TypeError(`argument name "${name}" must match [A-Za-z][A-Za-z0-9_-]{0,31}`);
    return new CommandArgument(name, parser, completer, true, false, undefined);
  }

  /** Not required; missing, it is `defaultValue` (undefined without one). */
  optional(defaultValue?: T): CommandArgument<T> {
    return new CommandArgument(this.name, this.parser, this.completer, false, this.isGreedy, defaultValue);
  }

  /** Takes the rest of the line, spaces included; must be the last argument. */
  greedy(): CommandArgument<T> {
    return new CommandArgument(this.name, this.parser, this.completer, this.required, true, this.defaultValue);
  }

  withCompleter(completer: ArgumentCompleter): CommandArgument<T> {
    return new CommandArgument(this.name, this.parser, completer, this.required, this.isGreedy, this.defaultValue);
  }

  /** `<name>` when required, `[name]` when optional, `…` after a greedy one. */
  usage(): string {
    const inner = this.isGreedy ? `${this.name}...` : this.name;
    return this.required ? `<${inner}>` : `[${inner}]`;
  }
}

const startsWith = (values: readonly string[], prefix: string) => values.filter((value) => value.toLowerCase().startsWith(prefix.toLowerCase()));

const TRUE_WORDS = new Set(["true", "yes", "on", "1"]);
const FALSE_WORDS = new Set(["false", "no", "off", "0"]);

/** The factories. */
export const Arguments = {
  string(name: string): CommandArgument<string> {
    return CommandArgument.of(name, (input) => input);
  },

  /** A 32-bit integer, optionally within [min, max]. */
  integer(name: string, range: { min?: number; max?: number } = {}): CommandArgument<number> {
    const min = range.min ?? -2_147_483_648;
    const max = range.max ?? 2_147_483_647;
    return CommandArgument.of(name, (input) => {
      if (!/^[+-]?\d+$/.test(input)) fail(`${name}: "${input}" is not a whole number`);
      const value = Number(input);
      if (value < min || value > max) fail(`${name}: ${input} is not between ${min} and ${max}`);
      return value;
    });
  },

  /** A 64-bit integer (a bigint). */
  longArg(name: string): CommandArgument<bigint> {
    return CommandArgument.of(name, (input) => {
      if (!/^[+-]?\d+$/.test(input)) fail(`${name}: "${input}" is not a whole number`);
      const value = BigInt(input);
      if (value < -(2n ** 63n) || value > 2n ** 63n - 1n) fail(`${name}: ${input} does not fit in 64 bits`);
      return value;
    });
  },

  /** true, yes, on, 1 / false, no, off, 0 (any case). */
  bool(name: string): CommandArgument<boolean> {
    return CommandArgument.of(
      name,
      (input) => {
        const word = input.toLowerCase();
        if (TRUE_WORDS.has(word)) return true;
        if (FALSE_WORDS.has(word)) return false;
        return fail(`${name}: "${input}" is not true/false (yes/no, on/off, 1/0)`);
      },
      (prefix) => startsWith(["true", "false"], prefix),
    );
  },

  /** An online player, by name or UUID. */
  player(name: string): CommandArgument<CloudPlayer> {
    return CommandArgument.of(
      name,
      (input, context) => {
        const player = context.players?.getPlayer(input);
        return player ?? fail(`Player ${input} is not online`);
      },
      (prefix, context) =>
        startsWith(
          (context.players?.onlinePlayers() ?? []).map((player) => player.name()),
          prefix,
        ),
    );
  },

  /** A group's name; checked against the known groups when the registry has a list. */
  group(name: string): CommandArgument<string> {
    return CommandArgument.of(
      name,
      async (input, context) => {
        if (!context.groups) return input;
        return (await context.groups()).includes(input) ? input : fail(`Unknown group ${input}`);
      },
      async (prefix, context) => startsWith((await context.groups?.()) ?? [], prefix),
    );
  },

  /** An instance id; checked against the known instances when the registry has a list. */
  instance(name: string): CommandArgument<string> {
    return CommandArgument.of(
      name,
      async (input, context) => {
        if (!context.instances) return input;
        return (await context.instances()).includes(input) ? input : fail(`Unknown instance ${input}`);
      },
      async (prefix, context) => startsWith((await context.instances?.()) ?? [], prefix),
    );
  },

  /** One of `values`, compared and returned lower-cased. */
  choices(name: string, ...values: string[]): CommandArgument<string> {
    const allowed = values.map((value) => value.toLowerCase());
    if (allowed.length === 0) throw new TypeError("choices needs at least one value");
    return CommandArgument.of(
      name,
      (input) => (allowed.includes(input.toLowerCase()) ? input.toLowerCase() : fail(`${name}: "${input}" is not one of ${allowed.join(", ")}`)),
      (prefix) => startsWith(allowed, prefix),
    );
  },

  of<T>(name: string, parser: ArgumentParser<T>, completer?: ArgumentCompleter): CommandArgument<T> {
    return CommandArgument.of(name, parser, completer);
  },
};
