// A controller process of the event fan-out benchmark (event-fanout.ts): the HTTP app with its
// event journal over a shared Redis (test/support/http-app.ts with a Redis key-value store; the
// same routes, journal and hub as the composition root mounts), its event-loop delay measured
// inside it by perf_hooks.monitorEventLoopDelay (10 ms resolution) and its CPU by process.cpuUsage.
//
//   node --import tsx scripts/bench/event-fanout-controller.ts <redis-uri>
//
// Prints `READY {"url","token"}` once it serves. Standard input commands, one per line:
//   publish <eventsPerSecond> <seconds>  publishes BENCH:TICK events {n, sentAtMs} at that rate and
//                                        answers `PUBLISHED {"published","loopP50Ms","loopP99Ms",
//                                        "loopMaxMs","cpuUserMs","cpuSystemMs","wallMs"}`
// The end of standard input (or SIGTERM) stops the app and exits.
import { monitorEventLoopDelay, performance } from "node:perf_hooks";
import { createInterface } from "node:readline";
import { openRedisKvStore } from "../../src/store/redis/redis-kv-store.js";
import { startTestApp } from "../../test/support/http-app.js";

const uri = process.argv[2];
if (!uri) throw new Error("usage: event-fanout-controller.ts <redis-uri>");

const kv = await openRedisKvStore({ uri });
const app = await startTestApp({ kv });
const token = await app.tokenFor("VIEWER");
const ms = (ns: number) => Math.round(ns / 1e4) / 100;
/** Wall-clock milliseconds with sub-millisecond precision, comparable across processes of one machine. */
const wallMs = () => performance.timeOrigin + performance.now();

let stopping = false;
const stop = async () => {
  if (stopping) return;
  stopping = true;
  await app.close();
  await kv.close();
  process.exit(0);
};
process.on("SIGTERM", () => void stop());

async function publish(perSecond: number, seconds: number): Promise<void> {
  const histogram = monitorEventLoopDelay({ resolution: 10 });
  histogram.enable();
  const cpuBefore = process.cpuUsage();
  const startMs = performance.now();
  const total = Math.round(perSecond * seconds);
  let published = 0;
  await new Promise<void>((resolve) => {
    const timer = setInterval(() => {
      // As many as are due by now, so the rate holds even when a tick is late.
      const due = Math.min(total, Math.floor(((performance.now() - startMs) / 1000) * perSecond));
      for (; published < due; published++) app.events.publish("BENCH:TICK", { n: published, sentAtMs: wallMs() });
      if (published >= total) {
        clearInterval(timer);
        resolve();
      }
    }, 5);
  });
  await app.events.flush();
  // Deliveries to clients follow the journal's announcements; let them finish before measuring.
  await new Promise((resolve) => setTimeout(resolve, 2_000));
  const cpu = process.cpuUsage(cpuBefore);
  histogram.disable();
  const report = {
    published,
    loopP50Ms: ms(histogram.percentile(50)),
    loopP99Ms: ms(histogram.percentile(99)),
    loopMaxMs: ms(histogram.max),
    cpuUserMs: Math.round(cpu.user / 1000),
    cpuSystemMs: Math.round(cpu.system / 1000),
    wallMs: Math.round(performance.now() - startMs),
  };
  process.stdout.write(`PUBLISHED ${JSON.stringify(report)}\n`);
}

createInterface({ input: process.stdin })
  .on("line", (line) => {
    const [command, rate, seconds] = line.trim().split(/\s+/);
    if (command === "publish") void publish(Number(rate), Number(seconds));
  })
  .on("close", () => void stop());

process.stdout.write(`READY ${JSON.stringify({ url: app.baseUrl, token })}\n`);
