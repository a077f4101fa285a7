/**
 * raft-kv builds side by side: each argument is a checkout of this repository (for instance
 * `git archive <commit> | tar -x -C /tmp/v1`, with node_modules linked in); each gets its own
 * 3-member cluster and its own client, and the load alternates between them in slices, so every
 * build sees the same background load on a shared machine. Prints, per build, puts/s, latency
 * percentiles and the members' CPU time per put.
 *
 *   tsx scripts/bench/raft-kv-ab.ts [--inflight 1] [--slice-s 2] [--slices 10] [--warmup-s 6]
 *     [--value-bytes 128] DIR...
 *
 * A build's own scripts/bench/raft-kv-cluster.ts and raft-kv-client.ts drive it, so builds with
 * different client protocols compare as they are.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { performance } from "node:perf_hooks";
import { pathToFileURL } from "node:url";

interface Flags {
  inflight: number;
  sliceS: number;
  slices: number;
  warmupS: number;
  valueBytes: number;
  dirs: string[];
}

function readFlags(argv: readonly string[]): Flags {
  const dirs: string[] = [];
  const values = new Map<string, string>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg.startsWith("--")) values.set(arg.slice(2), argv[++i] ?? "");
    else dirs.push(resolve(arg));
  }
  const number = (name: string, fallback: number) => Number(values.get(name) ?? fallback);
  if (dirs.length === 0) throw new Error("name at least one checkout directory");
  return {
    inflight: number("inflight", 1),
    sliceS: number("slice-s", 2),
    slices: number("slices", 10),
    warmupS: number("warmup-s", 6),
    valueBytes: number("value-bytes", 128),
    dirs,
  };
}

/** The parts of a build's cluster and client this script uses. */
interface BuildCluster {
  readonly members: readonly { id: string; kvAddress: string }[];
  startAll(): Promise<void>;
  stopAll(): Promise<void>;
}
interface BuildClient {
  put(key: string, value: Uint8Array): Promise<unknown>;
  close(): void;
}

interface Build {
  readonly dir: string;
  readonly rootDir: string;
  readonly cluster: BuildCluster;
  readonly client: BuildClient;
  readonly latenciesMs: number[];
  readonly nextPut: number[];
  elapsedS: number;
  memberCpuMs: number;
  errors: number;
}

const clockTicksPerS = 100;

/** The running members of a build's cluster: processes whose command line names its root directory. */
function memberPids(rootDir: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, "utf8").includes(`--data-dir\u0000${rootDir}/`)) pids.push(Number(entry));
    } catch {
      // the process ended meanwhile
    }
  }
  return pids;
}

function cpuMs(pids: readonly number[]): number {
  let ticks = 0;
  for (const pid of pids) {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
    ticks += Number(fields[11]) + Number(fields[12]);
  }
  return (ticks * 1000) / clockTicksPerS;
}

async function startBuild(dir: string, inflight: number): Promise<Build> {
  const clusterModule = (await import(pathToFileURL(join(dir, "scripts/bench/raft-kv-cluster.ts")).href)) as {
    RaftKvCluster: { create(options: object): Promise<BuildCluster> };
  };
  const clientModule = (await import(pathToFileURL(join(dir, "scripts/bench/raft-kv-client.ts")).href)) as {
    RaftKvClient: new (members: readonly object[], options: object) => BuildClient;
  };
  const rootDir = mkdtempSync(join(tmpdir(), "raft-kv-ab-"));
  const cluster = await clusterModule.RaftKvCluster.create({ rootDir, tickMs: 100, heartbeatTicks: 1, electionTicks: 10 });
  try {
    await cluster.startAll();
  } catch (error) {
    await cluster.stopAll();
    throw error;
  }
  const client = new clientModule.RaftKvClient(cluster.members, { requestTimeoutMs: 5_000 });
  return { dir, rootDir, cluster, client, latenciesMs: [], nextPut: new Array<number>(inflight).fill(0), elapsedS: 0, memberCpuMs: 0, errors: 0 };
}

async function load(build: Build, inflight: number, durationS: number, value: Uint8Array, record: boolean): Promise<void> {
  const pids = memberPids(build.rootDir);
  const cpuBefore = cpuMs(pids);
  const startMs = performance.now();
  const endMs = startMs + durationS * 1000;
  await Promise.all(
    Array.from({ length: inflight }, async (_, worker) => {
      while (performance.now() < endMs) {
        const t0 = performance.now();
        try {
          await build.client.put(`ab/${worker}/${build.nextPut[worker % build.nextPut.length]!++ % 100}`, value);
          if (record) build.latenciesMs.push(performance.now() - t0);
        } catch {
          if (record) build.errors += 1;
        }
      }
    }),
  );
  if (!record) return;
  build.elapsedS += (performance.now() - startMs) / 1000;
  build.memberCpuMs += cpuMs(pids) - cpuBefore;
}

async function main(): Promise<void> {
  const flags = readFlags(process.argv.slice(2));
  const value = new Uint8Array(flags.valueBytes).fill(0x61);
  const builds: Build[] = [];
  try {
    for (const dir of flags.dirs) builds.push(await startBuild(dir, flags.inflight));
    for (const build of builds) {
      // The first put waits for an election; then the warm-up lets the JIT compile the hot paths.
      for (let attempt = 0; ; attempt++) {
        try {
          await build.client.put("ab/ready", value);
          break;
        } catch (error) {
          if (attempt >= 100) throw error;
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
      }
      await load(build, flags.inflight, flags.warmupS, value, false);
    }
    for (let slice = 0; slice < flags.slices; slice++) {
      const order = slice % 2 === 0 ? builds : [...builds].reverse();
      for (const build of order) await load(build, flags.inflight, flags.sliceS, value, true);
    }
    for (const build of builds) {
      const sorted = [...build.latenciesMs].sort((a, b) => a - b);
      const at = (p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]?.toFixed(2) ?? "-";
      const ops = sorted.length;
      console.log(
        `${build.dir}: ${(ops / build.elapsedS).toFixed(0)} puts/s, p50 ${at(50)} ms, p90 ${at(90)} ms, p99 ${at(99)} ms, ` +
          `member CPU ${(build.memberCpuMs / ops).toFixed(3)} ms per put, ${build.errors} errors`,
      );
    }
  } finally {
    for (const build of builds) {
      build.client.close();
      await build.cluster.stopAll();
      rmSync(build.rootDir, { recursive: true, force: true });
    }
  }
  process.exit(0);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
