import { runSimulation } from "./cluster-simulation.js";
import { raftLibrary } from "./raft-library.js";
const first = Number(process.argv[2] ?? 1);
const count = Number(process.argv[3] ?? 20);
const trace = process.env.TRACE === "1" ? (l: string) => console.log(l) : undefined;
const t0 = performance.now();
const kinds: Record<string, number> = {};
for (let seed = first; seed < first + count; seed++) {
  const s = performance.now();
  const r = runSimulation(seed, raftLibrary, trace);
  const ms = performance.now() - s;
  if (r.failure) {
    kinds[r.failure.kind] = (kinds[r.failure.kind] ?? 0) + 1;
    console.log(`seed ${seed} FAIL ${r.failure.kind} (${ms.toFixed(0)}ms): ${r.failure.message.split("\n").slice(0, 6).join(" | ")}`);
  } else if (process.env.VERBOSE === "1") console.log(`seed ${seed} ok ${ms.toFixed(0)}ms`, JSON.stringify(r.stats));
}
console.log(`total ${(performance.now() - t0).toFixed(0)} ms for ${count} seeds`, kinds);
