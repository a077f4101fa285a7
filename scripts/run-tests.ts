// Runs every test file under test/ (or those named on the command line) with node:test and tsx,
// each file in its own process, TEST_CONCURRENCY files at once (default 3). Heavy files — those
// that start real processes or servers (test/e2e/, controller processes, PostgreSQL, Redis,
// simulated game servers) — take at most TEST_HEAVY_CONCURRENCY of those slots (default 2); a
// free slot takes the longest heavy file while fewer run, else the longest light one, so no slot
// idles while files wait, the long end-to-end files overlap the many short unit files instead of
// queueing with them, and the short files fill the end. A file's output is printed in one piece when it ends (in full
// when it failed or with TEST_VERBOSE=1, else one line), so concurrent files never interleave.
// Every file has a time bound (TEST_FILE_TIMEOUT_MS, default 20 minutes): a file still running
// then is killed with its process group and counted as failed. Durations are kept in the system's
// temporary directory and order the next run's files (longest first); without them, end-to-end
// files and larger files go first. The end prints the slowest files and the totals.
import { spawn, type ChildProcess } from "node:child_process";
import { readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import { join, relative } from "node:path";
import { performance } from "node:perf_hooks";

const root = join(import.meta.dirname, "..");
const durationsPath = join(tmpdir(), "cloud-test-durations.json");
const concurrency = positiveInt(process.env.TEST_CONCURRENCY, 3);
const heavyConcurrency = Math.min(concurrency, positiveInt(process.env.TEST_HEAVY_CONCURRENCY, 2));
const fileTimeoutMs = positiveInt(process.env.TEST_FILE_TIMEOUT_MS, 20 * 60_000);
const verbose = process.env.TEST_VERBOSE === "1";
/** Slowest files listed at the end. */
const slowestListed = 15;
/** What a heavy file imports: helpers that start controller processes, databases or game servers. */
const HEAVY_IMPORT = /from "(?:\.\.\/)+(?:support\/(?:controller|postgres-server|redis-server|instance-processes|privatebin-server)|e2e\/cluster-harness)\.js"/;

function positiveInt(text: string | undefined, fallback: number): number {
  const value = Number(text);
  return Number.isInteger(value) && value > 0 ? value : fallback;
}

function collect(dir: string, out: string[]): string[] {
  for (const name of readdirSync(dir).sort()) {
    const full = join(dir, name);
    if (statSync(full).isDirectory()) collect(full, out);
    else if (name.endsWith(".test.ts")) out.push(relative(root, full));
  }
  return out;
}

function isHeavy(file: string): boolean {
  return file.startsWith("test/e2e/") || file.startsWith("test/chaos/") || HEAVY_IMPORT.test(readFileSync(join(root, file), "utf8"));
}

/** CPU seconds of the finished child processes (and their waited-for descendants): cutime + cstime of /proc/self/stat. */
function childrenCpuSeconds(): number | null {
  try {
    const stat = readFileSync("/proc/self/stat", "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[13]) + Number(fields[14])) / 100;
  } catch {
    return null;
  }
}

function readDurations(): Record<string, number> {
  try {
    return JSON.parse(readFileSync(durationsPath, "utf8")) as Record<string, number>;
  } catch {
    return {};
  }
}

interface Outcome {
  file: string;
  lane: "heavy" | "light";
  ms: number;
  ok: boolean;
  timedOut: boolean;
  pass: number;
  fail: number;
  output: string;
}

const running = new Set<ChildProcess>();

/** Runs one file in its own process group; resolves when it exited (or was killed at its bound). */
function runFile(file: string, lane: Outcome["lane"]): Promise<Outcome> {
  const startedMs = performance.now();
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ["--import", "tsx", "--test-reporter=spec", file], {
      cwd: root,
      detached: true,
      env: { ...process.env, FORCE_COLOR: process.env.FORCE_COLOR ?? "0" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    running.add(child);
    let output = "";
    child.stdout!.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));
    child.stderr!.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup(child);
    }, fileTimeoutMs);
    child.once("close", (code, signal) => {
      clearTimeout(timer);
      running.delete(child);
      const count = (name: string) => Number(new RegExp(`^ℹ ${name} (\\d+)$`, "m").exec(output)?.[1] ?? 0);
      if (timedOut) output += `\n✖ ${file} was still running after ${fileTimeoutMs} ms: killed\n`;
      resolve({
        file,
        lane,
        ms: performance.now() - startedMs,
        ok: code === 0 && !timedOut,
        timedOut,
        pass: count("pass"),
        fail: count("fail"),
        output: signal ? `${output}\n(ended by ${signal})\n` : output,
      });
    });
  });
}

function killGroup(child: ChildProcess): void {
  try {
    if (child.pid !== undefined) process.kill(-child.pid, "SIGKILL");
  } catch {
    child.kill("SIGKILL");
  }
}

/** Runs every file, `concurrency` at once and at most `heavyConcurrency` heavy ones, reporting each as it ends. */
async function runAll(heavy: string[], light: string[], report: (outcome: Outcome) => void): Promise<Outcome[]> {
  const outcomes: Outcome[] = [];
  let heavyRunning = 0;
  const next = (): { file: string; lane: Outcome["lane"] } | undefined => {
    if (heavy.length > 0 && heavyRunning < heavyConcurrency) return { file: heavy.shift()!, lane: "heavy" };
    if (light.length > 0) return { file: light.shift()!, lane: "light" };
    return undefined;
  };
  const slot = async (): Promise<void> => {
    for (let job = next(); job !== undefined; job = next()) {
      if (job.lane === "heavy") heavyRunning += 1;
      const outcome = await runFile(job.file, job.lane);
      if (job.lane === "heavy") heavyRunning -= 1;
      outcomes.push(outcome);
      report(outcome);
    }
  };
  // A slot that finds only heavy files left while the heavy cap is reached ends: the slots running
  // heavy files take the rest.
  await Promise.all(Array.from({ length: concurrency }, slot));
  return outcomes;
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const files = args.length > 0 ? args : collect(join(root, "test"), []);
  if (files.length === 0) {
    console.error("no test files found");
    process.exit(1);
  }
  const known = readDurations();
  // Longest first: the last files to start are short, so the lanes end close together.
  const expectedMs = (file: string) => known[file] ?? (file.startsWith("test/e2e/") ? 1e9 : 0) + statSync(join(root, file)).size;
  const byLongest = (a: string, b: string) => expectedMs(b) - expectedMs(a);
  const heavy = files.filter(isHeavy).sort(byLongest);
  const light = files.filter((file) => !heavy.includes(file)).sort(byLongest);
  console.log(
    `${files.length} test files, ${concurrency} at once: ${light.length} light, ${heavy.length} heavy (at most ${heavyConcurrency} at once); ${availableParallelism()} CPUs`,
  );

  const startedMs = performance.now();
  let done = 0;
  const report = (o: Outcome) => {
    done += 1;
    const line = `${o.ok ? "✔" : "✖"} [${done}/${files.length}] ${o.file} (${o.lane}, ${(o.ms / 1000).toFixed(1)} s, ${o.pass} passed${o.fail ? `, ${o.fail} failed` : ""}${o.timedOut ? ", timed out" : ""})`;
    process.stdout.write(!o.ok || verbose ? `${line}\n${o.output.trimEnd()}\n\n` : `${line}\n`);
  };
  const stop = () => {
    for (const child of running) killGroup(child);
    process.exit(130);
  };
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
  const outcomes = await runAll(heavy, light, report);

  writeFileSync(durationsPath, JSON.stringify({ ...known, ...Object.fromEntries(outcomes.map((o) => [o.file, Math.round(o.ms)])) }, null, 1));
  const failed = outcomes.filter((o) => !o.ok);
  const totals = outcomes.reduce((sum, o) => ({ pass: sum.pass + o.pass, fail: sum.fail + o.fail }), { pass: 0, fail: 0 });
  console.log(`\nslowest files:`);
  for (const o of [...outcomes].sort((a, b) => b.ms - a.ms).slice(0, slowestListed))
    console.log(`  ${(o.ms / 1000).toFixed(1).padStart(7)} s  ${o.file} (${o.lane})`);
  const wallS = (performance.now() - startedMs) / 1000;
  const cpuS = childrenCpuSeconds();
  // How busy the test processes kept the machine: more files at once help only while this is low.
  const cpuLine =
    cpuS === null
      ? ""
      : `; test processes used ${cpuS.toFixed(0)} CPU s (${((cpuS / (wallS * availableParallelism())) * 100).toFixed(0)} % of ${availableParallelism()} CPUs)`;
  console.log(
    `\n${outcomes.length} files in ${wallS.toFixed(1)} s: ${totals.pass} tests passed, ${totals.fail} failed; ${failed.length} files failed${cpuLine}`,
  );
  for (const o of failed) console.log(`  ✖ ${o.file}${o.timedOut ? " (timed out)" : ""}`);
  process.exit(failed.length > 0 ? 1 : 0);
}

await main();
