// Placement benchmark: placeInstance alone, 100 nodes, 10,000 existing instances over 1,000 groups.
// Each decision places one instance of a group (round-robin over the groups) and records it in the
// index, as the scheduler host does; every `churnEvery` decisions an instance is removed so the
// cluster stays near 10,000 instances instead of filling up. Seeded: the same run every time.
//
// `--shared memory|redis` goes through the shared placement view as the scheduler does
// (src/scheduler/placement-view.ts): each placement is held in the view and claimed in its node's
// ledger in the key-value store (the in-memory store, or a throwaway redis-server), every
// `--batch` decisions one claim per node (an evaluation claims its whole decision at once), and
// each removed instance's reservation is released from its ledger.
//
//   npx tsx scripts/bench/placement.ts [--decisions 50000] [--seed 1] [--shared memory|redis] [--batch 1]
//
// Prints a summary and one machine-readable JSON line (prefix `BENCH_JSON `).
import { loadavg } from "node:os";
import { performance } from "node:perf_hooks";
import { buildPlacementIndex, placeInstance, type PlacementGroup, type PlacementInstance, type PlacementNode } from "../../src/scheduler/placement.js";
import { runSharedPlacement } from "./placement-shared.js";

const nodesCount = 100;
const groupsCount = 1_000;
const instancesCount = 10_000;
const nodeMemoryMb = 262_144;
const warmupDecisions = 5_000;

function argValue(name: string, fallback: number): number {
  const i = process.argv.indexOf(name);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
}

/** mulberry32: a small seeded generator, so runs are repeatable. */
function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const decisions = argValue("--decisions", 50_000);
const random = seededRandom(argValue("--seed", 1));

const nodes: PlacementNode[] = Array.from({ length: nodesCount }, (_, i) => ({
  id: `node-${String(i).padStart(3, "0")}`,
  // A few non-candidates, as in a real network.
  state: i % 25 === 0 ? "DRAINING" : i % 33 === 0 ? "UNREACHABLE" : "ONLINE",
  cordoned: i % 40 === 7,
  totalMemoryMb: nodeMemoryMb,
  usedMemoryMb: Math.floor(random() * 8192),
}));
const groups: PlacementGroup[] = Array.from({ length: groupsCount }, (_, i) => ({
  name: `group-${i}`,
  memoryMb: [512, 1024, 2048][i % 3],
  portRange: { start: 30000, end: 30999 },
}));

const sharedStore = process.argv.includes("--shared") ? process.argv[process.argv.indexOf("--shared") + 1] : "none";
if (sharedStore === "memory" || sharedStore === "redis") {
  await runSharedPlacement({ store: sharedStore, nodes, groups, instancesCount, decisions, warmupDecisions, batch: argValue("--batch", 1), random });
  process.exit(0);
} else if (sharedStore !== "none") {
  throw new Error(`--shared takes memory or redis, not ${sharedStore}`);
}

// Seed: place the 10,000 instances with the function itself, so the state is a valid one.
const seedStarted = performance.now();
const index = buildPlacementIndex([]);
const live: PlacementInstance[] = [];
function placeOne(group: PlacementGroup): boolean {
  const result = placeInstance({ group }, nodes, index);
  if (!result.ok) return false;
  const instance: PlacementInstance = { group: group.name, node: result.nodeId, port: result.port, memoryMb: group.memoryMb, state: "SCHEDULED" };
  index.add(instance);
  live.push(instance);
  return true;
}
for (let i = 0; i < instancesCount; i++) placeOne(groups[i % groupsCount]);
const seedMs = performance.now() - seedStarted;

// Rebuilding the index from 10,000 instances, as a controller does when it acquires a scope.
const rebuildStarted = performance.now();
buildPlacementIndex(live);
const rebuildMs = performance.now() - rebuildStarted;

function removeRandom(): void {
  const i = Math.floor(random() * live.length);
  const [gone] = live.splice(i, 1, live[live.length - 1]);
  live.pop();
  index.remove(gone);
}

const samplesMs = new Float64Array(decisions);
let failures = 0;
for (let i = 0; i < warmupDecisions; i++) {
  if (!placeOne(groups[Math.floor(random() * groupsCount)])) failures++;
  removeRandom();
}
failures = 0;
const cpuStarted = process.cpuUsage();
const started = performance.now();
for (let i = 0; i < decisions; i++) {
  const group = groups[Math.floor(random() * groupsCount)];
  const t0 = performance.now();
  const result = placeInstance({ group }, nodes, index);
  samplesMs[i] = performance.now() - t0;
  if (result.ok) {
    const instance: PlacementInstance = { group: group.name, node: result.nodeId, port: result.port, memoryMb: group.memoryMb, state: "SCHEDULED" };
    index.add(instance);
    live.push(instance);
  } else {
    failures++;
  }
  removeRandom();
}
const totalMs = performance.now() - started;
const cpu = process.cpuUsage(cpuStarted);
const sorted = Array.from(samplesMs).sort((a, b) => a - b);
const pct = (p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
const decisionMs = sorted.reduce((s, v) => s + v, 0);
const result = {
  nodes: nodesCount,
  groups: groupsCount,
  instances: live.length,
  decisions,
  failures,
  decisionsPerSec: Math.round(decisions / (decisionMs / 1000)),
  loopDecisionsPerSec: Math.round(decisions / (totalMs / 1000)),
  // CPU time of the whole measured loop per decision: the figure a busy machine disturbs least.
  cpuUsPerDecision: Number(((cpu.user + cpu.system) / decisions).toFixed(2)),
  p50Ms: Number(pct(50).toFixed(4)),
  p99Ms: Number(pct(99).toFixed(4)),
  maxMs: Number(sorted[sorted.length - 1].toFixed(4)),
  seedPlacementsMs: Math.round(seedMs),
  indexRebuildMs: Number(rebuildMs.toFixed(2)),
  loadAverage1m: Number(loadavg()[0].toFixed(1)),
  node: process.version,
};
console.log(`placement: ${nodesCount} nodes, ${result.instances} live instances, ${groupsCount} groups`);
console.log(`  decisions/s (placeInstance only): ${result.decisionsPerSec}`);
console.log(`  decisions/s (loop incl. index updates): ${result.loopDecisionsPerSec}`);
console.log(`  CPU per decision (loop): ${result.cpuUsPerDecision} µs`);
console.log(`  per decision: p50 ${result.p50Ms} ms, p99 ${result.p99Ms} ms, max ${result.maxMs} ms; failures ${failures}`);
console.log(`  index rebuild from ${live.length} instances: ${result.indexRebuildMs} ms`);
console.log(`BENCH_JSON ${JSON.stringify(result)}`);
