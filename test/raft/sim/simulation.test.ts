/**
 * The seeded whole-cluster Raft simulation (see cluster-simulation.ts). CI runs
 * {@link seedCountDefault} seeds in batches, each batch in its own process (seed-batch.ts), at most
 * {@link batchProcessesDefault} at a time. The environment chooses otherwise:
 *
 *   RAFT_SIM_SEEDS=N       run seeds 1..N
 *   RAFT_SIM_PROCESSES=P   run P batch processes at a time
 *   RAFT_SIM_SEED=s        replay exactly seed s in this process (RAFT_SIM_TRACE=1 prints a trace)
 *
 * A failing seed prints the command that replays it.
 */
import { spawn } from "node:child_process";
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { runSimulation, type SimulationFailureKind, type SimulationReport } from "./cluster-simulation.js";
import { raftLibrary } from "./raft-library.js";
import type { BatchResult } from "./seed-batch.js";

const seedCountDefault = 2_000;
const batchProcessesDefault = 2;
/** Seeds per batch process: small enough that batches spread evenly, big enough to pay for startup. */
const seedsPerBatch = 250;
/** Failures described in full per batch; the rest are listed by seed. */
const failuresDescribedMax = 5;
const failureMessageLinesMax = 40;
/** Seeds a deliberately broken host gets to be caught in. */
const sabotageSeedsMax = 60;

const testFile = "test/raft/sim/simulation.test.ts";
const batchScript = fileURLToPath(new URL("./seed-batch.ts", import.meta.url));

function replayCommand(seed: number): string {
  return `RAFT_SIM_SEED=${seed} RAFT_SIM_TRACE=1 npx tsx scripts/run-tests.ts ${testFile}`;
}

function describeFailure(report: SimulationReport): string {
  const failure = report.failure;
  if (failure === null) return `seed ${report.seed}: ok`;
  const lines = failure.message.split("\n");
  const shown = lines.slice(0, failureMessageLinesMax);
  if (lines.length > shown.length) shown.push(`… ${lines.length - shown.length} more lines`);
  return [
    `seed ${report.seed} (${report.scenario.nodeCount} nodes) failed: ${failure.kind}`,
    ...shown.map((line) => `  ${line}`),
    `  replay: ${replayCommand(report.seed)}`,
  ].join("\n");
}

function parseIntegerEnv(name: string): number | undefined {
  const text = process.env[name];
  if (text === undefined || text === "") return undefined;
  const value = Number(text);
  if (!Number.isSafeInteger(value) || value < 0) throw new Error(`${name} must be a non-negative integer, got ${text}`);
  return value;
}

/** Runs seeds [first, last] in a child process (with the same loader flags as this one). */
function runBatchProcess(first: number, last: number): Promise<BatchResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...process.execArgv, batchScript, String(first), String(last)], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    const stdout: Buffer[] = [];
    const stderr: Buffer[] = [];
    child.stdout.on("data", (chunk: Buffer) => stdout.push(chunk));
    child.stderr.on("data", (chunk: Buffer) => stderr.push(chunk));
    child.on("error", reject);
    child.on("close", (code) => {
      if (code !== 0) {
        reject(new Error(`seed batch ${first}..${last} exited with ${code}:\n${Buffer.concat(stderr).toString()}`));
        return;
      }
      resolve(JSON.parse(Buffer.concat(stdout).toString()) as BatchResult);
    });
  });
}

const replaySeed = parseIntegerEnv("RAFT_SIM_SEED");
const seedCount = parseIntegerEnv("RAFT_SIM_SEEDS") ?? seedCountDefault;
const batchProcesses = Math.max(1, parseIntegerEnv("RAFT_SIM_PROCESSES") ?? batchProcessesDefault);

if (replaySeed !== undefined) {
  describe("Raft simulation: replay", () => {
    it(`seed ${replaySeed}`, () => {
      const trace = process.env.RAFT_SIM_TRACE === "1" ? (line: string) => console.log(line) : undefined;
      const report = runSimulation(replaySeed, raftLibrary, { trace });
      console.log(JSON.stringify({ scenario: report.scenario, stats: report.stats }, null, 2));
      if (report.failure !== null) assert.fail(describeFailure(report));
    });
  });
} else {
  describe(`Raft simulation: ${seedCount} seeds`, { concurrency: batchProcesses }, () => {
    for (let first = 1; first <= seedCount; first += seedsPerBatch) {
      const last = Math.min(seedCount, first + seedsPerBatch - 1);
      it(`seeds ${first}..${last} keep safety, converge after healing and stay linearizable`, async (t) => {
        const { failures, totals } = await runBatchProcess(first, last);
        t.diagnostic(JSON.stringify(totals));
        if (failures.length === 0) return;
        const described = failures.slice(0, failuresDescribedMax).map(describeFailure);
        const rest = failures.slice(failuresDescribedMax).map((r) => `${r.seed} (${r.failure?.kind})`);
        if (rest.length > 0) described.push(`also failing: ${rest.join(", ")}`);
        assert.fail(`${failures.length} of ${last - first + 1} seeds failed\n\n${described.join("\n\n")}`);
      });
    }
  });

  describe("Raft simulation: deliberate host bugs are caught", () => {
    const cases: { sabotage: "local-reads" | "send-before-fsync"; kinds: SimulationFailureKind[]; what: string }[] = [
      { sabotage: "local-reads", kinds: ["linearizability"], what: "reads served from local state without ReadIndex" },
      {
        sabotage: "send-before-fsync",
        kinds: ["safety", "linearizability", "exception", "liveness"],
        what: "messages sent before the Ready is durable",
      },
    ];
    for (const { sabotage, kinds, what } of cases) {
      it(`${what} (${sabotage}) fail within ${sabotageSeedsMax} seeds`, () => {
        for (let seed = 1; seed <= sabotageSeedsMax; seed++) {
          const report = runSimulation(seed, raftLibrary, { sabotage });
          if (report.failure !== null && kinds.includes(report.failure.kind)) return;
        }
        assert.fail(`no seed in 1..${sabotageSeedsMax} caught the ${sabotage} host bug`);
      });
    }
  });
}
