/**
 * Runs simulation seeds [first, last] in this process and prints one JSON object on stdout: the
 * failing reports and totals. simulation.test.ts starts several of these so that batches use more
 * than one core.
 *
 *   node --import tsx test/raft/sim/seed-batch.ts <first> <last>
 */
import { runSimulation, type SimulationReport } from "./cluster-simulation.js";
import { raftLibrary } from "./raft-library.js";

export interface BatchTotals {
  seeds: number;
  ops: number;
  timedOut: number;
  elections: number;
  crashes: number;
  lostWrites: number;
  pauses: number;
  confChanges: number;
  snapshotsInstalled: number;
}

export interface BatchResult {
  readonly failures: SimulationReport[];
  readonly totals: BatchTotals;
}

function runSeedBatch(first: number, last: number): BatchResult {
  const failures: SimulationReport[] = [];
  const totals: BatchTotals = {
    seeds: 0,
    ops: 0,
    timedOut: 0,
    elections: 0,
    crashes: 0,
    lostWrites: 0,
    pauses: 0,
    confChanges: 0,
    snapshotsInstalled: 0,
  };
  for (let seed = first; seed <= last; seed++) {
    const report = runSimulation(seed, raftLibrary);
    if (report.failure !== null) failures.push(report);
    const s = report.stats;
    totals.seeds++;
    totals.ops += s.clients.completed;
    totals.timedOut += s.clients.timedOut;
    totals.elections += s.leaderElections;
    totals.crashes += s.crashes;
    totals.lostWrites += s.lostWrites;
    totals.pauses += s.pauses;
    totals.confChanges += s.confChanges;
    totals.snapshotsInstalled += s.snapshotsInstalled;
  }
  return { failures, totals };
}

const first = Number(process.argv[2]);
const last = Number(process.argv[3]);
if (!Number.isSafeInteger(first) || !Number.isSafeInteger(last) || first > last) {
  console.error("usage: seed-batch.ts <first> <last>");
  process.exit(2);
}
process.stdout.write(JSON.stringify(runSeedBatch(first, last)));
