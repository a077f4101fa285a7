/**
 * The command line of the long-running bins (`cloud-controller`, `cloud-daemon`, `npm start`):
 * `--config <path>`, `--help` and `--version`, parsed strictly before anything starts. Help and the
 * version print and exit 0; anything else on the line (an unknown flag, a stray argument, a
 * `--config` without a path) prints the problem, a suggestion when one is close, and exits 64
 * (sysexits EX_USAGE) before a file is written or a port bound.
 */
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Command, CommanderError } from "commander";

/** Exit status of a command line that cannot be right (sysexits EX_USAGE). */
export const EXIT_USAGE = 64;

/** What a bin's command line describes. */
export interface BinCommandLine {
  /** The bin's name as the user types it. */
  name: string;
  description: string;
  /** Help of `--config <path>`. */
  configHelp: string;
  version: string;
  /** Printed after the options by `--help` (environment, exit statuses). */
  helpAfter: string;
}

/** The parsed line: the config path when one was given, or the status to exit with now. */
export type ParsedCommandLine = { kind: "run"; config: string | undefined } | { kind: "exit"; status: number };

/**
 * Parses `args` (process.argv without the node binary and the script). Output goes to the given
 * writers (standard output for help and version, standard error for problems).
 */
export function parseBinCommandLine(
  line: BinCommandLine,
  args: readonly string[],
  write: { out: (text: string) => void; err: (text: string) => void } = {
    out: (text) => process.stdout.write(text),
    err: (text) => process.stderr.write(text),
  },
): ParsedCommandLine {
  const program = new Command(line.name)
    .description(line.description)
    .option("--config <path>", line.configHelp)
    .version(`${line.name} ${line.version}`, "-V, --version", "print the version and exit")
    .helpOption("-h, --help", "print this help and exit")
    .allowExcessArguments(false)
    .showSuggestionAfterError(true)
    .exitOverride()
    .configureOutput({ writeOut: write.out, writeErr: write.err })
    .addHelpText("after", `\n${line.helpAfter}`);
  try {
    program.parse([...args], { from: "user" });
  } catch (error) {
    if (error instanceof CommanderError) {
      if (error.exitCode === 0) return { kind: "exit", status: 0 };
      write.err(`Run '${line.name} --help' for the accepted arguments.\n`);
      return { kind: "exit", status: EXIT_USAGE };
    }
    throw error;
  }
  return { kind: "run", config: program.opts<{ config?: string }>().config };
}

/**
 * The version of the package this module belongs to: the nearest package.json above it (the
 * source tree or the installed package); "0.0.0" when none can be read.
 */
export function packageVersion(fromUrl: string = import.meta.url): string {
  let dir = dirname(fileURLToPath(fromUrl));
  for (let depth = 0; depth < 6; depth++) {
    const path = join(dir, "package.json");
    if (existsSync(path)) {
      try {
        return (JSON.parse(readFileSync(path, "utf8")) as { version?: string }).version ?? "0.0.0";
      } catch {
        // Only reported by --version and the daemon's hello: a broken package.json stops nothing.
        return "0.0.0";
      }
    }
    dir = dirname(dir);
  }
  return "0.0.0";
}
