// Shell completion run in real shells: the script `cloudctl completion <shell>` prints is loaded
// the way an operator loads it, and the shell itself is asked what it offers for a line.
// One list of cases runs against bash (`complete -p`, then the registered function with
// COMP_WORDS/COMP_CWORD), zsh (compinit on a pseudo-terminal, sourced and from fpath, see
// shells/zsh-complete.zsh) and fish (`complete -C`). A shell that is not installed is skipped
// with a message naming it (.ci/run installs all three).
import assert from "node:assert/strict";
import { execFile, spawnSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import type { Command } from "commander";
import { buildProgram } from "../../src/cli/program.js";
import { Prompter } from "../../src/cli/prompt.js";
import { runCli, tempHome } from "./harness.js";

/** Bound on one shell run (the zsh driver gives up after 15 s by itself). */
const shellRunTimeoutMs = 30_000;

/** Names and aliases of the subcommands of `path` in the real command tree. */
function subcommandsOf(path: string[]): string[] {
  let command: Command = buildProgram({ env: {}, stdoutIsTty: false, prompter: new Prompter() });
  for (const word of path) command = command.commands.find((c) => c.name() === word || c.aliases().includes(word)) as Command;
  return command.commands
    .filter((c) => c.name() !== "help")
    .flatMap((c) => [c.name(), ...c.aliases()])
    .sort();
}

/** One completion request: the words typed (the last one is being completed) and what must be offered. */
interface Case {
  words: string[];
  expected: string[];
  why: string;
}

const cases: Case[] = [
  { words: ["cloudctl", "gr"], expected: ["group"], why: "a command by its prefix" },
  { words: ["cloudctl", "group", ""], expected: subcommandsOf(["group"]), why: "every subcommand of group" },
  { words: ["cloudctl", "--json", "inst"], expected: ["inst", "instance"], why: "aliases, after a global flag" },
  { words: ["cloudctl", "--context", "prod", "gr"], expected: ["group"], why: "a flag's value is not a command word" },
  { words: ["cloudctl", "cluster", "join-token", ""], expected: subcommandsOf(["cluster", "join-token"]), why: "three levels deep" },
  { words: ["cloudctl", "group", "create", "--po"], expected: ["--port-end", "--port-start"], why: "a command's own flags" },
  { words: ["cloudctl", "inst", "stop", "--f"], expected: ["--force"], why: "flags under an alias" },
  { words: ["cloudctl", "module", ""], expected: subcommandsOf(["module"]), why: "every module subcommand" },
  { words: ["cloudctl", "module", "install", "--ch"], expected: ["--check-requires"], why: "module install's own flags" },
];

/** Asks a shell for the completions of `words`; the completion script is at `script`. */
type Completer = (words: string[]) => Promise<string[]>;

function run(file: string, args: string[], env: NodeJS.ProcessEnv): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(file, args, { env, timeout: shellRunTimeoutMs, killSignal: "SIGKILL" }, (error, stdout, stderr) => {
      if (error) reject(new Error(`${file} ${args.slice(0, 2).join(" ")}: ${error.message}\n${stderr}`));
      else resolve(stdout);
    });
  });
}

const lines = (text: string) =>
  text
    .split("\n")
    .filter((l) => l !== "")
    .sort();

function installed(shell: string): boolean {
  return spawnSync(shell, ["-c", "exit 0"], { stdio: "ignore" }).status === 0;
}

/** Loads the script, checks `complete -p` registered a function for cloudctl, and calls it. */
const bashProgram = `
source "$1" || exit 8
spec=$(complete -p cloudctl) || { echo "no completion registered for cloudctl" >&2; exit 9; }
fn=\${spec#*-F }; fn=\${fn%% *}
COMP_WORDS=("\${@:2}"); COMP_CWORD=$(( \${#COMP_WORDS[@]} - 1 ))
COMP_LINE="\${COMP_WORDS[*]}"; COMP_POINT=\${#COMP_LINE}
"$fn" cloudctl "\${COMP_WORDS[COMP_CWORD]}" "\${COMP_WORDS[COMP_CWORD-1]}"
printf '%s\\n' "\${COMPREPLY[@]}"
`;

describe("shell completion in real shells", { timeout: 240_000 }, () => {
  const { home, dispose } = tempHome();
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: home,
    XDG_CONFIG_HOME: join(home, ".config"),
    XDG_DATA_HOME: join(home, ".local", "share"),
    TERM: "dumb",
  };
  const scripts: Record<string, string> = {};

  before(async () => {
    for (const shell of ["bash", "zsh", "fish"]) {
      const result = await runCli(["completion", shell], { home });
      assert.equal(result.code, 0, result.stderr);
      scripts[shell] = join(home, `cloudctl.${shell}`);
      writeFileSync(scripts[shell], result.stdout);
    }
    mkdirSync(join(home, "zfunc"));
    writeFileSync(join(home, "zfunc", "_cloudctl"), (await runCli(["completion", "zsh"], { home })).stdout);
  });
  after(dispose);

  const shells: { name: string; binary: string; completer: () => Completer }[] = [
    {
      name: "bash",
      binary: "bash",
      completer: () => (words) => run("bash", ["--norc", "--noprofile", "-c", bashProgram, "bash", scripts.bash, ...words], env).then(lines),
    },
    {
      name: "zsh (sourced after compinit)",
      binary: "zsh",
      completer: () => (words) => run("zsh", ["-f", join(import.meta.dirname, "shells", "zsh-complete.zsh"), scripts.zsh, words.join(" ")], env).then(lines),
    },
    {
      name: "zsh (autoloaded from fpath)",
      binary: "zsh",
      completer: () => (words) =>
        run("zsh", ["-f", join(import.meta.dirname, "shells", "zsh-complete.zsh"), join(home, "zfunc"), words.join(" ")], env).then(lines),
    },
    {
      name: "fish",
      binary: "fish",
      completer: () => (words) =>
        run("fish", ["--no-config", "-c", "source $argv[1]; and complete -C $argv[2]", scripts.fish, words.join(" ")], env).then((out) =>
          lines(out).map((l) => l.split("\t")[0]),
        ),
    },
  ];

  for (const shell of shells) {
    const missing = installed(shell.binary)
      ? false
      : `${shell.binary} is not installed on this machine (.ci/run installs bash, zsh and fish); ${shell.name} completion not checked`;
    test(shell.name, { skip: missing }, async () => {
      const complete = shell.completer();
      for (const c of cases) {
        assert.deepEqual(await complete(c.words), c.expected, `${shell.name}: "${c.words.join(" ")}" (${c.why})`);
      }
    });
  }
});
