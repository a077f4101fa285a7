// Log-mirror benchmark: does a daemon logging 2,000 lines per second delay its instance state
// reports, and does the controller's memory stay bounded?
//
// A controller in this process (HTTP and gRPC on 127.0.0.1, the usual composition) and one daemon
// child process (scripts/bench/log-mirror-daemon.ts: the daemon's gateway client and log appender)
// that sends an instance state report every 20 ms, stamped with its send time, first quietly for
// `--seconds`, then as long again while logging `--lines` lines per second. The controller measures
// each report's delay (receipt minus send time, one machine clock) per phase, counts the mirrored
// records it received, and samples its heap, its RSS and the node buffer's size every second.
//
//   npx tsx scripts/bench/log-mirror.ts [--seconds 20] [--lines 2000] [--report-interval-ms 20]
//
// Prints a table and one machine-readable line (prefix `RESULT `).
import { spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { loadavg, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { argNumber, createNodeToken, mib, monitorLoopDelay, percentile, printTable, progress, startBenchController } from "./system-bench-support.js";

const seconds = argNumber("seconds", 20);
const linesPerSecond = argNumber("lines", 2000);
const reportIntervalMs = argNumber("report-interval-ms", 20);
const root = resolve(import.meta.dirname, "..", "..");

const dir = await mkdtemp(join(tmpdir(), "cloud-bench-log-mirror-"));
const controller = await startBenchController({ dataDir: join(dir, "controller") });
const running = controller.controller;
const delays: Record<string, number[]> = { quiet: [], flood: [] };
running.gateway.onReport((report) => {
  if (report.message.payload !== "instance_state") return;
  const state = report.message.instance_state;
  delays[state.message]?.push(Date.now() - state.timestamp_ms);
});
const nodeLogs = running.services.logsAndSharing.nodeLogs;

const samples: { heapMib: number; rssMib: number; bufferChars: number; bufferRecords: number }[] = [];
const sampler = setInterval(() => {
  const memory = process.memoryUsage();
  const node = [...running.gateway.listSessions()][0]?.nodeId;
  samples.push({
    heapMib: mib(memory.heapUsed),
    rssMib: mib(memory.rss),
    bufferChars: nodeLogs.totalChars(),
    bufferRecords: node ? nodeLogs.read(node).size : 0,
  });
}, 1000);

const token = await createNodeToken(controller);
progress(`daemon: ${seconds} s quiet, then ${seconds} s at ${linesPerSecond} lines/s; a report every ${reportIntervalMs} ms`);
const loop = monitorLoopDelay();
const child = spawn(
  process.execPath,
  [
    "--import",
    "tsx",
    "scripts/bench/log-mirror-daemon.ts",
    controller.grpcAddress,
    token,
    join(dir, "daemon"),
    String(seconds),
    String(linesPerSecond),
    String(reportIntervalMs),
  ],
  { cwd: root, stdio: ["ignore", "pipe", "inherit"] },
);
let output = "";
child.stdout!.on("data", (chunk: Buffer) => (output += chunk.toString()));
await new Promise<void>((done) => child.once("exit", () => done()));
const loopDelay = loop.stop();
// Every log_record the gateway took in (cloud_grpc_daemon_messages_in_total).
const exposition = await running.metrics.render();
const mirrored = Number(/cloud_grpc_daemon_messages_in_total\{payload_case="log_record"\} (\d+)/.exec(exposition)?.[1] ?? 0);
clearInterval(sampler);
const mirrorLine = output.split("\n").find((line) => line.startsWith("MIRROR "));
if (!mirrorLine) throw new Error(`the daemon printed no counters:\n${output}`);
const daemon = JSON.parse(mirrorLine.slice("MIRROR ".length)) as { linesLogged: number; sent: number; dropped: number; queued: number };

const phase = (name: string) => {
  const sorted = [...delays[name]!].sort((a, b) => a - b);
  return { reports: sorted.length, p50Ms: percentile(sorted, 50), p99Ms: percentile(sorted, 99), maxMs: sorted.at(-1) ?? 0 };
};
const quiet = phase("quiet");
const flood = phase("flood");
const heapMaxMib = Math.max(...samples.map((s) => s.heapMib));
const rssMaxMib = Math.max(...samples.map((s) => s.rssMib));
const bufferCharsMax = Math.max(...samples.map((s) => s.bufferChars));
const bufferRecordsMax = Math.max(...samples.map((s) => s.bufferRecords));
const result = {
  seconds,
  linesPerSecond,
  reportIntervalMs,
  quiet,
  flood,
  daemon,
  controllerRecordsReceived: mirrored,
  bufferRecordsMax,
  bufferRecordsBound: nodeLogs.bounds.recordsMax,
  bufferCharsMax,
  bufferCharsBound: nodeLogs.bounds.charsMax,
  controllerHeapFirstMib: samples[0]?.heapMib ?? 0,
  controllerHeapMaxMib: heapMaxMib,
  controllerHeapLastMib: samples.at(-1)?.heapMib ?? 0,
  controllerRssMaxMib: rssMaxMib,
  controllerLoopDelay: loopDelay,
  loadAverage1m: Math.round(loadavg()[0]! * 10) / 10,
};
printTable("log mirror", [
  ["reports quiet: count, p50 / p99 / max ms", `${quiet.reports}, ${quiet.p50Ms} / ${quiet.p99Ms} / ${quiet.maxMs}`],
  ["reports during the flood: count, p50 / p99 / max ms", `${flood.reports}, ${flood.p50Ms} / ${flood.p99Ms} / ${flood.maxMs}`],
  ["daemon: lines logged, sent, dropped, left queued", `${daemon.linesLogged}, ${daemon.sent}, ${daemon.dropped}, ${daemon.queued}`],
  ["controller: records received", mirrored],
  ["node buffer: records max (bound), chars max (bound)", `${bufferRecordsMax} (${result.bufferRecordsBound}), ${bufferCharsMax} (${result.bufferCharsBound})`],
  ["controller heap first / max / last MiB, RSS max", `${result.controllerHeapFirstMib} / ${heapMaxMib} / ${result.controllerHeapLastMib}, ${rssMaxMib}`],
  ["controller loop delay p50 / p99 / max ms", `${loopDelay.p50Ms} / ${loopDelay.p99Ms} / ${loopDelay.maxMs}`],
  ["load average (1 min)", result.loadAverage1m],
]);
process.stdout.write(`RESULT ${JSON.stringify(result)}\n`);
await controller.stop();
await rm(dir, { recursive: true, force: true });
