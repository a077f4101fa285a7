/**
 * A reader and runner for datadriven scenario files. A file is a sequence of blocks:
 *
 *     # comments and blank lines between blocks
 *     command arg key=value key=(v1,v2)
 *     ----
 *     expected output (ends at the first blank line)
 *
 * The runner executes each command through a handler and compares its output with the expected
 * text. With `RAFT_REWRITE=1` it rewrites the file with the actual outputs instead.
 */
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";

export interface CommandArg {
  readonly key: string;
  readonly values: readonly string[];
  /** A bare word, without `=`. */
  readonly bare: boolean;
}

export interface TestCommand {
  readonly name: string;
  readonly args: readonly CommandArg[];
  /** 1-based line of the command, for error messages. */
  readonly line: number;
  readonly text: string;
}

interface Block {
  /** Lines before the command (comments, blank lines), kept verbatim on rewrite. */
  readonly preamble: string[];
  readonly command: TestCommand;
  readonly expected: string;
}

/** Splits `key=(a,b)` / `key=value` / `word` tokens, keeping parenthesised lists intact. */
function tokenize(text: string): string[] {
  const tokens: string[] = [];
  let current = "";
  let depth = 0;
  for (const ch of text) {
    if (ch === "(") depth++;
    if (ch === ")") depth--;
    if (/\s/.test(ch) && depth === 0) {
      if (current !== "") tokens.push(current);
      current = "";
    } else {
      current += ch;
    }
  }
  if (current !== "") tokens.push(current);
  return tokens;
}

export function parseCommand(text: string, line: number): TestCommand {
  const [name, ...rest] = tokenize(text.trim());
  const args = rest.map((token): CommandArg => {
    const eq = token.indexOf("=");
    if (eq < 0) return { key: token, values: [], bare: true };
    const key = token.slice(0, eq);
    let value = token.slice(eq + 1);
    if (value.startsWith("(") && value.endsWith(")")) {
      value = value.slice(1, -1);
      return { key, values: value === "" ? [] : value.split(",").map((v) => v.trim()), bare: false };
    }
    return { key, values: [value], bare: false };
  });
  return { name, args, line, text: text.trim() };
}

function parseFile(path: string): { blocks: Block[]; trailer: string[] } {
  const lines = readFileSync(path, "utf8").split("\n");
  const blocks: Block[] = [];
  let preamble: string[] = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (line.trim() === "" || line.trimStart().startsWith("#")) {
      preamble.push(line);
      i++;
      continue;
    }
    const command = parseCommand(line, i + 1);
    i++;
    assert.ok(i < lines.length && lines[i] === "----", `${path}:${i + 1}: expected ---- after command`);
    i++;
    const out: string[] = [];
    while (i < lines.length && lines[i] !== "") out.push(lines[i++]);
    blocks.push({ preamble, command, expected: out.join("\n") });
    preamble = [];
  }
  return { blocks, trailer: preamble };
}

export type CommandHandler = (command: TestCommand) => string;

/**
 * Runs every block of the file at `path` through `handle`. In rewrite mode writes the actual
 * outputs back; otherwise asserts each output equals the expected one.
 */
export function runDataDriven(path: string, handle: CommandHandler): void {
  const rewrite = process.env.RAFT_REWRITE === "1";
  const { blocks, trailer } = parseFile(path);
  const written: string[] = [];
  for (const block of blocks) {
    let actual: string;
    try {
      actual = handle(block.command).replace(/\n+$/, "");
    } catch (error) {
      throw new Error(`${path}:${block.command.line}: ${block.command.text}: ${(error as Error).stack ?? String(error)}`, { cause: error });
    }
    assert.ok(!/\n\s*\n/.test(actual), `${path}:${block.command.line}: output must not contain blank lines`);
    if (actual === "") actual = "ok";
    if (rewrite) {
      written.push(...block.preamble, block.command.text, "----", actual);
    } else {
      assert.equal(actual, block.expected, `${path}:${block.command.line}: ${block.command.text}`);
    }
  }
  if (rewrite) {
    while (trailer.length > 0 && trailer[trailer.length - 1] === "") trailer.pop();
    writeFileSync(path, [...written, ...trailer].join("\n") + "\n");
  }
}

/** Helpers for handlers reading arguments. */
export function argValues(command: TestCommand, key: string): readonly string[] | null {
  const arg = command.args.find((a) => a.key === key);
  return arg === undefined ? null : arg.values;
}

export function argString(command: TestCommand, key: string, fallback: string): string {
  const values = argValues(command, key);
  return values === null || values.length === 0 ? fallback : values[0];
}

export function argNumber(command: TestCommand, key: string, fallback: number): number {
  const values = argValues(command, key);
  if (values === null || values.length === 0) return fallback;
  const n = Number(values[0]);
  assert.ok(Number.isFinite(n), `argument ${key} is not a number: ${values[0]}`);
  return n;
}

export function argBool(command: TestCommand, key: string, fallback: boolean): boolean {
  const values = argValues(command, key);
  if (values === null) return fallback;
  return values.length === 0 || values[0] === "true";
}

/** Bare words (arguments without `=`), in order. */
export function positional(command: TestCommand): string[] {
  return command.args.filter((a) => a.bare).map((a) => a.key);
}
