/**
 * The seeded whole-cluster Raft simulation (see cluster-simulation.ts). CI runs
 * {@link seedCountDefault} seeds; the environment chooses otherwise:
 *
 *   RAFT_SIM_SEEDS=N       run seeds 1..N
 *   RAFT_SIM_SEED=s        replay exactly seed s (add RAFT_SIM_TRACE=1 for an event trace)
 *
 * A failing seed prints the command that replays it.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { runSimulation, type SimulationReport } from "./cluster-simulation.js";
import { raftLibrary } from "./raft-library.js";

const seedCountDefault = 2_000;
/** Seeds per `it`, so progress shows and one slow batch is easy to spot. */
const seedsPerBatch = 250;
/** Failures described in full per batch; the rest are listed by seed. */
const failuresDescribedMax = 5;
const failureMessageLinesMax = 40;

const testFile = "test/raft/sim/simulation.test.ts";

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

function parseSeedEnv(name: string): number | undefined {
  const text = process.env[name];
  if (text === undefined || text === "") return undefined;
  const value = Number(text);
  if (!Number.isSafeInteger(value) || value < 0) throw new Error(`${name} must be a non-negative integer, got ${text}`);
  return value;
}

const replaySeed = parseSeedEnv("RAFT_SIM_SEED");
const seedCount = parseSeedEnv("RAFT_SIM_SEEDS") ?? seedCountDefault;

if (replaySeed !== undefined) {
  describe("Raft simulation: replay", () => {
    it(`seed ${replaySeed}`, () => {
      const trace = process.env.RAFT_SIM_TRACE === "1" ? (line: string) => console.log(line) : undefined;
      const report = runSimulation(replaySeed, raftLibrary, trace);
      console.log(JSON.stringify({ scenario: report.scenario, stats: report.stats }, null, 2));
      if (report.failure !== null) assert.fail(describeFailure(report));
    });
  });
} else {
  describe(`Raft simulation: ${seedCount} seeds`, () => {
    for (let first = 1; first <= seedCount; first += seedsPerBatch) {
      const last = Math.min(seedCount, first + seedsPerBatch - 1);
      it(`seeds ${first}..${last} keep safety, converge after healing and stay linearizable`, (t) => {
        const failures: SimulationReport[] = [];
        const totals = { ops: 0, timedOut: 0, elections: 0, crashes: 0, lostWrites: 0, snapshotsInstalled: 0 };
        for (let seed = first; seed <= last; seed++) {
          const report = runSimulation(seed, raftLibrary);
          if (report.failure !== null) failures.push(report);
          totals.ops += report.stats.clients.completed;
          totals.timedOut += report.stats.clients.timedOut;
          totals.elections += report.stats.leaderElections;
          totals.crashes += report.stats.crashes;
          totals.lostWrites += report.stats.lostWrites;
          totals.snapshotsInstalled += report.stats.snapshotsInstalled;
        }
        t.diagnostic(JSON.stringify(totals));
        if (failures.length === 0) return;
        const described = failures.slice(0, failuresDescribedMax).map(describeFailure);
        const rest = failures.slice(failuresDescribedMax).map((r) => `${r.seed} (${r.failure?.kind})`);
        if (rest.length > 0) described.push(`also failing: ${rest.join(", ")}`);
        assert.fail(`${failures.length} of ${last - first + 1} seeds failed\n\n${described.join("\n\n")}`);
      });
    }
  });
}
