/**
 * `cloudctl completion bash|zsh|fish`: completion scripts generated from the command tree, so
 * every command, alias and flag registered on the program completes without a hand-kept list.
 */
import type { Command, Option } from "commander";
import { markLocalOnly } from "../auth-gate.js";
import { CliError } from "../exit-codes.js";
import type { RuntimeFactory } from "../runtime.js";

/** One node of the command tree: its path (space-separated, "" for the root), subcommands and flags. */
interface TreeNode {
  path: string;
  subcommands: { name: string; description: string }[];
  options: readonly Option[];
}

function visibleCommands(command: Command): Command[] {
  return command.commands.filter((c) => c.name() !== "help" && !(c as unknown as { _hidden?: boolean })._hidden);
}

/** Flattens the program into nodes; aliases become extra paths with the same children. */
function flatten(program: Command): TreeNode[] {
  const nodes: TreeNode[] = [];
  const globals = program.options;
  const walk = (command: Command, path: string) => {
    const children = visibleCommands(command);
    nodes.push({
      path,
      subcommands: children.flatMap((c) => [c.name(), ...c.aliases()].map((name) => ({ name, description: c.description() }))),
      options: path === "" ? globals : command.options,
    });
    for (const child of children) {
      for (const name of [child.name(), ...child.aliases()]) walk(child, path === "" ? name : `${path} ${name}`);
    }
  };
  walk(program, "");
  return nodes;
}

function flagWords(options: readonly Option[]): string[] {
  return options.flatMap((o) => [o.long, o.short].filter((f): f is string => Boolean(f)));
}

function quoteSingle(text: string): string {
  return `'${text.replace(/'/g, `'\\''`)}'`;
}

function quoteFish(text: string): string {
  return `'${text.replace(/\\/g, "\\\\").replace(/'/g, "\\'")}'`;
}

/**
 * Bash completion script: the command path is the longest run of known command words on the
 * line (flags and their values are skipped); a word starting with `-` completes the flags of that
 * command and the global flags, any other word its subcommands.
 */
export function bashCompletion(program: Command): string {
  const nodes = flatten(program);
  const globalFlags = flagWords(program.options).join(" ");
  const keys = nodes.filter((n) => n.path !== "").map((n) => n.path);
  const cases = nodes
    .map((n) => {
      const flags = n.path === "" ? "" : flagWords(n.options).join(" ");
      return `    ${quoteSingle(n.path)}) subs_=${quoteSingle(n.subcommands.map((s) => s.name).join(" "))}; flags_=${quoteSingle(flags)} ;;`;
    })
    .join("\n");
  return `# bash completion for cloudctl; load with: source <(cloudctl completion bash)
_cloudctl_known() {
  case "$1" in
${keys.map((k) => `    ${quoteSingle(k)}) return 0 ;;`).join("\n")}
  esac
  return 1
}
_cloudctl() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" cmdpath="" w candidate subs_="" flags_="" i
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="\${COMP_WORDS[i]}"
    [[ "$w" == -* ]] && continue
    if [[ -z "$cmdpath" ]]; then candidate="$w"; else candidate="$cmdpath $w"; fi
    _cloudctl_known "$candidate" && cmdpath="$candidate"
  done
  case "$cmdpath" in
${cases}
  esac
  if [[ "$cur" == -* ]]; then
    COMPREPLY=( $(compgen -W "$flags_ ${globalFlags}" -- "$cur") )
  else
    COMPREPLY=( $(compgen -W "$subs_" -- "$cur") )
  fi
}
complete -F _cloudctl cloudctl
`;
}

/** Native zsh completion script (subcommands with descriptions, then flags). */
export function zshCompletion(program: Command): string {
  const nodes = flatten(program);
  const globalFlags = flagWords(program.options).map(quoteSingle).join(" ");
  const keys = nodes.filter((n) => n.path !== "").map((n) => quoteSingle(n.path));
  const cases = nodes
    .map((n) => {
      const subs = n.subcommands.map((s) => quoteSingle(`${s.name}:${s.description.replace(/:/g, "\\:")}`)).join(" ");
      const flags = flagWords(n.options).map(quoteSingle).join(" ");
      return `    ${quoteSingle(n.path)}) subs=(${subs}); flags=(${flags}) ;;`;
    })
    .join("\n");
  return `#compdef cloudctl
# zsh completion for cloudctl; load with: source <(cloudctl completion zsh)
_cloudctl() {
  local cmdpath="" w candidate
  local -a known subs flags
  known=(${keys.join(" ")})
  for w in \${words[2,CURRENT-1]}; do
    [[ "$w" == -* ]] && continue
    if [[ -z "$cmdpath" ]]; then candidate="$w"; else candidate="$cmdpath $w"; fi
    (( \${known[(Ie)$candidate]} )) && cmdpath="$candidate"
  done
  case "$cmdpath" in
${cases}
  esac
  if [[ "\${words[CURRENT]}" == -* ]]; then
    compadd -- $flags ${globalFlags}
  else
    _describe -t commands 'cloudctl command' subs
  fi
}
if [[ "$funcstack[1]" == "_cloudctl" ]]; then _cloudctl "$@"; else compdef _cloudctl cloudctl; fi
`;
}

/** The `-l`/`-s` switches of one option for fish's `complete`, with `-r` when it takes a value. */
function fishFlags(option: Option): string {
  const long = option.long ? ` -l ${option.long.replace(/^--/, "")}` : "";
  const short = option.short ? ` -s ${option.short.replace(/^-/, "")}` : "";
  return `${long}${short}${option.required || option.optional ? " -r" : ""}`;
}

/** fish completion script. */
export function fishCompletion(program: Command): string {
  const nodes = flatten(program);
  const keys = nodes.filter((n) => n.path !== "").map((n) => quoteFish(n.path));
  const lines: string[] = [
    "# fish completion for cloudctl; load with: cloudctl completion fish | source",
    "function __cloudctl_path",
    "    set -l p ''",
    "    for w in (commandline -opc)[2..-1]",
    "        string match -q -- '-*' $w; and continue",
    '        set -l candidate (string trim -- "$p $w")',
    `        contains -- $candidate ${keys.join(" ")}; and set p $candidate`,
    "    end",
    "    echo $p",
    "end",
    "function __cloudctl_at",
    '    test (__cloudctl_path) = "$argv[1]"',
    "end",
    "complete -c cloudctl -f",
  ];
  for (const option of program.options) {
    lines.push(`complete -c cloudctl${fishFlags(option)} -d ${quoteFish(option.description)}`);
  }
  for (const node of nodes) {
    const condition = `-n ${quoteFish(`__cloudctl_at "${node.path}"`)}`;
    for (const sub of node.subcommands) lines.push(`complete -c cloudctl ${condition} -a ${quoteFish(sub.name)} -d ${quoteFish(sub.description)}`);
    if (node.path === "") continue;
    for (const option of node.options) {
      lines.push(`complete -c cloudctl ${condition}${fishFlags(option)} -d ${quoteFish(option.description)}`);
    }
  }
  return `${lines.join("\n")}\n`;
}

const generators: Record<string, (program: Command) => string> = { bash: bashCompletion, zsh: zshCompletion, fish: fishCompletion };

/** Registers `completion <shell>`. */
export function registerCompletionCommand(program: Command, runtime: RuntimeFactory): void {
  const completion = program
    .command("completion <shell>")
    .description("print a shell completion script: bash, zsh or fish")
    .addHelpText("after", "\nExamples:\n  source <(cloudctl completion bash)\n  source <(cloudctl completion zsh)\n  cloudctl completion fish | source")
    .action((shell: string, _opts, cmd: Command) => {
      const generate = generators[shell];
      if (!generate) throw new CliError(`unsupported shell "${shell}": use bash, zsh or fish`);
      runtime(cmd).out.raw(generate(program));
    });
  markLocalOnly(completion);
}
