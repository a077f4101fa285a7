/**
 * Runs a range of simulation seeds outside the test runner and prints each failure with its replay
 * command, plus the time taken: for long sweeps and for measuring the cost of a change.
 *
 *   npx tsx test/raft/sim/sweep-seeds.ts [firstSeed=1] [count=100]
 *
 * VERBOSE=1 prints every seed's statistics; TRACE=1 prints the event trace (use with one seed);
 * SABOTAGE=local-reads|send-before-fsync breaks the host on purpose (see HostSabotage).
 */
import { runSimulation } from "./cluster-simulation.js";
import { raftLibrary } from "./raft-library.js";

const failureLinesMax = 8;

const firstSeed = Number(process.argv[2] ?? 1);
const seedCount = Number(process.argv[3] ?? 100);
const trace = process.env.TRACE === "1" ? (line: string) => console.log(line) : undefined;
const sabotage = process.env.SABOTAGE === "local-reads" || process.env.SABOTAGE === "send-before-fsync" ? process.env.SABOTAGE : undefined;
const startedMs = performance.now();
const failuresByKind: Record<string, number> = {};
for (let seed = firstSeed; seed < firstSeed + seedCount; seed++) {
  const seedStartedMs = performance.now();
  const report = runSimulation(seed, raftLibrary, { trace, sabotage });
  const tookMs = (performance.now() - seedStartedMs).toFixed(0);
  if (report.failure !== null) {
    failuresByKind[report.failure.kind] = (failuresByKind[report.failure.kind] ?? 0) + 1;
    const lines = report.failure.message.split("\n").slice(0, failureLinesMax);
    console.log(`seed ${seed} failed (${report.failure.kind}, ${tookMs} ms):\n  ${lines.join("\n  ")}`);
    console.log(`  replay: RAFT_SIM_SEED=${seed} RAFT_SIM_TRACE=1 npx tsx scripts/run-tests.ts test/raft/sim/simulation.test.ts`);
  } else if (process.env.VERBOSE === "1") {
    console.log(`seed ${seed} ok (${tookMs} ms) ${JSON.stringify(report.stats)}`);
  }
}
const totalMs = performance.now() - startedMs;
console.log(`${seedCount} seeds from ${firstSeed} in ${(totalMs / 1000).toFixed(1)} s; failures: ${JSON.stringify(failuresByKind)}`);
