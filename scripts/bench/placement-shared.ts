// The shared mode of scripts/bench/placement.ts: the same nodes, groups and seeded decisions, placed
// on a PlacementView over a key-value store as the scheduler does. Each decision: placeInstance on
// the view's index, the placement held in the view; every `batch` decisions one claim of the held
// placements (one compare-and-set per node ledger touched); each decision also ends one random live
// instance, whose reservation is released from its ledger. Prints the same figures as the pure mode
// plus the claim and release latencies, and one `BENCH_JSON` line.
import { loadavg } from "node:os";
import { performance } from "node:perf_hooks";
import type { Reservation } from "../../src/scheduler/placement-ledger.js";
import { placeInstance, type PlacementGroup, type PlacementNode } from "../../src/scheduler/placement.js";
import { PlacementView } from "../../src/scheduler/placement-view.js";
import { MemoryKvStore } from "../../src/store/memory/memory-kv-store.js";
import type { KvStore } from "../../src/store/ports.js";
import { openRedisKvStore } from "../../src/store/redis/redis-kv-store.js";
import { startRedisServer, type RedisServer } from "../../test/support/redis-server.js";

export interface SharedPlacementRun {
  store: "memory" | "redis";
  nodes: readonly PlacementNode[];
  groups: readonly PlacementGroup[];
  instancesCount: number;
  decisions: number;
  warmupDecisions: number;
  batch: number;
  random: () => number;
}

const pct = (sorted: Float64Array | number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;

export async function runSharedPlacement(run: SharedPlacementRun): Promise<void> {
  let redis: RedisServer | null = null;
  let kv: KvStore;
  if (run.store === "redis") {
    redis = await startRedisServer();
    kv = await openRedisKvStore({ uri: redis.uri });
  } else {
    kv = new MemoryKvStore();
  }
  try {
    const view = new PlacementView(kv);
    const capacity = new Map(run.nodes.map((n) => [n.id, n.totalMemoryMb]));
    const capacityMb = (nodeId: string) => capacity.get(nodeId) ?? 0;
    const live: Reservation[] = [];
    let pending: Reservation[] = [];
    let sequence = 0;
    const claimMs: number[] = [];
    const releaseMs: number[] = [];
    let failures = 0;
    let refused = 0;
    const flush = async (measure: boolean) => {
      if (pending.length === 0) return;
      const t0 = performance.now();
      const refusals = await view.claim(pending, capacityMb);
      if (measure) claimMs.push(performance.now() - t0);
      refused += refusals.size;
      for (const r of pending) if (!refusals.has(r.instanceId)) live.push(r);
      pending = [];
    };
    const placeOne = (group: PlacementGroup): number => {
      const t0 = performance.now();
      const result = placeInstance({ group }, run.nodes, view.index);
      const elapsed = performance.now() - t0;
      if (!result.ok) {
        failures++;
        return elapsed;
      }
      const r: Reservation = {
        instanceId: `i-${++sequence}`,
        group: group.name,
        node: result.nodeId,
        port: result.port,
        memoryMb: group.memoryMb,
        claimedAtMs: 0,
      };
      view.hold(r);
      pending.push(r);
      return elapsed;
    };
    const removeRandom = async (measure: boolean) => {
      const i = Math.floor(run.random() * live.length);
      const gone = live[i];
      live[i] = live[live.length - 1];
      live.pop();
      const t0 = performance.now();
      await view.release(gone.instanceId, gone.node);
      if (measure) releaseMs.push(performance.now() - t0);
    };

    const seedStarted = performance.now();
    for (let i = 0; i < run.instancesCount; i++) {
      placeOne(run.groups[i % run.groups.length]);
      if (pending.length >= 100) await flush(false);
    }
    await flush(false);
    const seedMs = performance.now() - seedStarted;
    for (let i = 0; i < run.warmupDecisions; i++) {
      placeOne(run.groups[Math.floor(run.random() * run.groups.length)]);
      if (pending.length >= run.batch) await flush(false);
      await removeRandom(false);
    }
    failures = 0;
    refused = 0;
    const samplesMs = new Float64Array(run.decisions);
    const cpuStarted = process.cpuUsage();
    const started = performance.now();
    for (let i = 0; i < run.decisions; i++) {
      samplesMs[i] = placeOne(run.groups[Math.floor(run.random() * run.groups.length)]);
      if (pending.length >= run.batch) await flush(true);
      await removeRandom(true);
    }
    await flush(true);
    const totalMs = performance.now() - started;
    const cpu = process.cpuUsage(cpuStarted);
    const sorted = Array.from(samplesMs).sort((a, b) => a - b);
    const decisionMs = sorted.reduce((sum, v) => sum + v, 0);
    claimMs.sort((a, b) => a - b);
    releaseMs.sort((a, b) => a - b);
    const result = {
      shared: run.store,
      batch: run.batch,
      nodes: run.nodes.length,
      groups: run.groups.length,
      instances: live.length,
      decisions: run.decisions,
      failures,
      refusedClaims: refused,
      decisionsPerSec: Math.round(run.decisions / (decisionMs / 1000)),
      loopDecisionsPerSec: Math.round(run.decisions / (totalMs / 1000)),
      cpuUsPerDecision: Number(((cpu.user + cpu.system) / run.decisions).toFixed(2)),
      p50Ms: Number(pct(sorted, 50).toFixed(4)),
      p99Ms: Number(pct(sorted, 99).toFixed(4)),
      claimP50Ms: Number(pct(claimMs, 50).toFixed(4)),
      claimP99Ms: Number(pct(claimMs, 99).toFixed(4)),
      releaseP50Ms: Number(pct(releaseMs, 50).toFixed(4)),
      releaseP99Ms: Number(pct(releaseMs, 99).toFixed(4)),
      seedPlacementsMs: Math.round(seedMs),
      loadAverage1m: Number(loadavg()[0].toFixed(1)),
      node: process.version,
    };
    console.log(`placement through the shared view (${run.store}, claims of ${run.batch}): ${run.nodes.length} nodes, ${live.length} live instances`);
    console.log(`  decisions/s (placeInstance only): ${result.decisionsPerSec}`);
    console.log(`  decisions/s (loop incl. claims and releases): ${result.loopDecisionsPerSec}`);
    console.log(`  CPU per decision (loop, this process): ${result.cpuUsPerDecision} µs`);
    console.log(`  claim p50 ${result.claimP50Ms} ms, p99 ${result.claimP99Ms} ms; release p50 ${result.releaseP50Ms} ms, p99 ${result.releaseP99Ms} ms`);
    console.log(`  failures ${failures}, claims refused ${refused}`);
    console.log(`BENCH_JSON ${JSON.stringify(result)}`);
  } finally {
    await kv.close();
    await redis?.stop();
  }
}
