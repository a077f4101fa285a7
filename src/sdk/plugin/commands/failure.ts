/**
 * The failing helpers (spec document 3, "Plugin commands"): `fail`, `failIf`, `failUnless` and
 * `require` abort the command; the registry sends the message to the sender in red.
 */

/** Minecraft's formatting code for red, understood by every platform's chat and stripped by consoles. */
export const RED = "\u00a7c";

/** Thrown by the helpers; caught by the registry, which sends `message` in red. */
export class CommandFailure extends Error {
  constructor(message: string) {
    super(message);
    this.name = "CommandFailure";
  }
}

export function fail(message: string): never {
  throw new CommandFailure(message);
}

export function failIf(condition: unknown, message: string): void {
  if (condition) fail(message);
}

export function failUnless(condition: unknown, message: string): asserts condition {
  if (!condition) fail(message);
}

/** The value, unless it is null or undefined: then the command fails with `message`. */
export function require<T>(value: T | null | undefined, message: string): T {
  if (value === null || value === undefined) fail(message);
  return value;
}

/** Removes Minecraft formatting codes (`§` and the next character), for plain-text outputs. */
export function stripFormatting(text: string): string {
  return text.replace(/\u00a7./g, "");
}
