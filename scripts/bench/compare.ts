// Two commits side by side on one machine: start-to-running, fleet and the REST write benchmark
// run against a checkout of each (a `git worktree` in a temporary directory, sharing this
// checkout's node_modules), alternating which goes first in each round so both see the same
// background load; prints each figure of both and their ratio (head / base), medians over rounds.
//
//   npx tsx scripts/bench/compare.ts <base> [<head>=HEAD] [--rounds 1] [--benchmarks start,fleet,writes]
//     [--start-args "..."] [--fleet-args "..."] [--writes-args "..."] [--keep]
//
// start and fleet run each checkout's own script (scripts/bench/start-to-running.ts, fleet.ts);
// the write benchmark is this checkout's rest-writes.ts with `--tree <checkout>`: it starts that
// checkout's controller (src/controller/main.ts) and drives it over REST, so it works for commits
// older than the script. The arguments of each benchmark are passed through as given (quote them).
// A figure a checkout's script does not print shows as "-". Both checkouts use this checkout's
// node_modules: when package-lock.json differs the script says so, since the dependencies then
// differ from what the commit was built with. Prints a table and one line `RESULT {...}`.
import { execFileSync, spawn } from "node:child_process";
import { existsSync, mkdtempSync, realpathSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { argNumber, argString, progress } from "./system-bench-support.js";

const ROOT_DIR = join(import.meta.dirname, "..", "..");
/** How long one benchmark run may take before it is stopped and counted as failed. */
const RUN_TIMEOUT_MS = 20 * 60_000;

interface Figure {
  label: string;
  pick(result: any): number | undefined;
  /** Which direction is better, for the verdict column. */
  better: "lower" | "higher";
}

interface Benchmark {
  key: string;
  /** The script; `own` runs the checkout's copy, `this` this checkout's copy with --tree. */
  script: string;
  from: "own" | "this";
  args: string[];
  figures: Figure[];
}

const splitArgs = (text: string) => text.split(/\s+/).filter((part) => part !== "");

const benchmarks: Benchmark[] = [
  {
    key: "start",
    script: "scripts/bench/start-to-running.ts",
    from: "own",
    args: splitArgs(argString("--start-args", "")),
    figures: [
      { label: "start: all RUNNING ms", pick: (r) => r.allRunningMs, better: "lower" },
      { label: "start: controller CPU s", pick: (r) => r.controllerCpuS, better: "lower" },
      { label: "start: daemon CPU s", pick: (r) => r.daemonCpuS, better: "lower" },
      { label: "start: SCHEDULED -> RUNNING p99 ms", pick: (r) => r.scheduledToRunning?.p99Ms, better: "lower" },
    ],
  },
  {
    key: "fleet",
    script: "scripts/bench/fleet.ts",
    from: "own",
    args: splitArgs(argString("--fleet-args", "")),
    figures: [
      { label: "fleet: all RUNNING ms", pick: (r) => r.allRunningMs, better: "lower" },
      { label: "fleet: CPU until all RUNNING s", pick: (r) => r.cpuToRunningS, better: "lower" },
      { label: "fleet: all STOPPED ms", pick: (r) => r.allStoppedMs, better: "lower" },
    ],
  },
  {
    key: "writes",
    script: "scripts/bench/rest-writes.ts",
    from: "this",
    args: splitArgs(argString("--writes-args", "")),
    figures: [
      { label: "writes: per second", pick: (r) => r.writesPerSecond, better: "higher" },
      { label: "writes: p99 ms", pick: (r) => r.latency?.p99Ms, better: "lower" },
      { label: "writes: controller CPU ms per write", pick: (r) => r.controllerCpuMsPerWrite, better: "lower" },
    ],
  },
];

const git = (...args: string[]) => execFileSync("git", args, { cwd: ROOT_DIR, encoding: "utf8" }).trim();

/** A detached worktree of `commit` in a temporary directory, with this checkout's node_modules. */
function checkout(commit: string, parent: string): string {
  const dir = join(parent, commit.slice(0, 12));
  git("worktree", "add", "--detach", "--quiet", dir, commit);
  symlinkSync(realpathSync(join(ROOT_DIR, "node_modules")), join(dir, "node_modules"));
  return dir;
}

/** Runs one benchmark in `tree`; resolves with its RESULT object, or null when it failed. */
function run(benchmark: Benchmark, tree: string): Promise<any | null> {
  const cwd = benchmark.from === "own" ? tree : ROOT_DIR;
  const script = join(cwd, benchmark.script);
  if (!existsSync(script)) {
    progress(`${tree}: no ${benchmark.script}`);
    return Promise.resolve(null);
  }
  const args = [...benchmark.args, ...(benchmark.from === "this" ? ["--tree", tree] : [])];
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ["--import", "tsx", script, ...args], { cwd, stdio: ["ignore", "pipe", "inherit"] });
    let output = "";
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (chunk: string) => (output += chunk));
    const timer = setTimeout(() => child.kill("SIGKILL"), RUN_TIMEOUT_MS);
    child.once("exit", (code) => {
      clearTimeout(timer);
      const line = output.split("\n").find((l) => l.startsWith("RESULT "));
      if (!line) progress(`${benchmark.key} in ${tree} printed no RESULT (exit ${code})`);
      resolve(line ? JSON.parse(line.slice("RESULT ".length)) : null);
    });
  });
}

function median(values: number[]): number | undefined {
  const sorted = values.filter(Number.isFinite).sort((a, b) => a - b);
  if (sorted.length === 0) return undefined;
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

async function main(): Promise<void> {
  const positional = process.argv.slice(2).filter((arg, i, all) => !arg.startsWith("--") && !all[i - 1]?.startsWith("--"));
  if (positional.length === 0) throw new Error("usage: compare.ts <base> [<head>] [--rounds 1] [--benchmarks start,fleet,writes]");
  const [baseRef, headRef = "HEAD"] = positional;
  const base = git("rev-parse", "--verify", `${baseRef}^{commit}`);
  const head = git("rev-parse", "--verify", `${headRef}^{commit}`);
  const rounds = argNumber("--rounds", 1);
  const chosen = argString("--benchmarks", "start,fleet,writes").split(",");
  const selected = benchmarks.filter((b) => chosen.includes(b.key));
  if (git("diff", "--name-only", base, head, "--", "package-lock.json") !== "")
    progress("package-lock.json differs between the commits: both run with this checkout's node_modules");

  const parent = mkdtempSync(join(tmpdir(), "bench-compare-"));
  const trees: string[] = [];
  const results = new Map<string, { base: any[]; head: any[] }>(selected.map((b) => [b.key, { base: [], head: [] }]));
  try {
    const checkouts = { base: checkout(base, parent), head: checkout(head, parent) };
    trees.push(checkouts.base, checkouts.head);
    for (let round = 0; round < rounds; round++) {
      for (const benchmark of selected) {
        // Alternate which commit goes first, so neither always runs on the warmer (or busier) machine.
        const order: ("base" | "head")[] = round % 2 === 0 ? ["base", "head"] : ["head", "base"];
        for (const side of order) {
          progress(`round ${round + 1}/${rounds}: ${benchmark.key} on ${side} (${side === "base" ? base.slice(0, 12) : head.slice(0, 12)})`);
          const result = await run(benchmark, checkouts[side]);
          if (result) results.get(benchmark.key)![side].push(result);
        }
      }
    }
  } finally {
    if (!process.argv.includes("--keep")) {
      for (const tree of trees) {
        try {
          git("worktree", "remove", "--force", tree);
        } catch {
          // removed below with its directory
        }
      }
      rmSync(parent, { recursive: true, force: true });
      git("worktree", "prune");
    } else progress(`checkouts kept in ${parent}`);
  }

  const rows: { figure: string; base?: number; head?: number; ratio?: number; better: string }[] = [];
  for (const benchmark of selected) {
    const { base: baseRuns, head: headRuns } = results.get(benchmark.key)!;
    for (const figure of benchmark.figures) {
      const b = median(baseRuns.map((r) => figure.pick(r) ?? Number.NaN));
      const h = median(headRuns.map((r) => figure.pick(r) ?? Number.NaN));
      rows.push({ figure: figure.label, base: b, head: h, ratio: b !== undefined && h !== undefined && b !== 0 ? h / b : undefined, better: figure.better });
    }
  }
  const fmt = (n: number | undefined, digits = 2) => (n === undefined ? "-" : n.toFixed(digits));
  const width = Math.max(...rows.map((r) => r.figure.length));
  console.log(`base ${base.slice(0, 12)}  head ${head.slice(0, 12)}  (${rounds} round${rounds === 1 ? "" : "s"}, medians)`);
  console.log(`${"figure".padEnd(width)}  ${"base".padStart(10)}  ${"head".padStart(10)}  head/base`);
  for (const row of rows)
    console.log(`${row.figure.padEnd(width)}  ${fmt(row.base).padStart(10)}  ${fmt(row.head).padStart(10)}  ${fmt(row.ratio)} (${row.better} is better)`);
  console.log(`RESULT ${JSON.stringify({ base, head, rounds, rows, runs: Object.fromEntries(results) })}`);
}

await main();
