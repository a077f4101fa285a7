// The controller process of the archive event-loop benchmark (archive-event-loop.ts): a development
// controller (embedded store, filesystem blobs, ephemeral ports on 127.0.0.1) with its event-loop
// delay measured inside it by perf_hooks.monitorEventLoopDelay (10 ms resolution).
//
//   node --import tsx scripts/bench/archive-event-loop-controller.ts <dataDir>
//
// Prints `READY {"url":…}` once it serves. Each line `mark <phase>` on standard input answers
// `LOOP {"phase","p50Ms","p99Ms","maxMs","samples"}` for the time since the previous mark and starts
// a new interval. SIGTERM (or the end of standard input) stops the controller and exits.
import { monitorEventLoopDelay } from "node:perf_hooks";
import { createInterface } from "node:readline";
import { startBenchController } from "./system-bench-support.js";

const dataDir = process.argv[2];
if (!dataDir) throw new Error("usage: archive-event-loop-controller.ts <dataDir>");

const bench = await startBenchController({ dataDir });
const histogram = monitorEventLoopDelay({ resolution: 10 });
histogram.enable();
const ms = (ns: number) => Math.round(ns / 1e5) / 10;

let stopping = false;
const stop = async () => {
  if (stopping) return;
  stopping = true;
  histogram.disable();
  await bench.stop();
  process.exit(0);
};
process.on("SIGTERM", () => void stop());

createInterface({ input: process.stdin })
  .on("line", (line) => {
    const [command, phase] = line.trim().split(/\s+/);
    if (command !== "mark") return;
    const report = { phase, p50Ms: ms(histogram.percentile(50)), p99Ms: ms(histogram.percentile(99)), maxMs: ms(histogram.max), samples: histogram.count };
    histogram.reset();
    process.stdout.write(`LOOP ${JSON.stringify(report)}\n`);
  })
  .on("close", () => void stop());

process.stdout.write(`READY ${JSON.stringify({ url: bench.url })}\n`);
