// Event fan-out benchmark: two controller processes (event-fanout-controller.ts) share one
// throwaway redis-server; 100 SSE clients stream from controller A while A publishes 200 events/s
// for 60 s. Measured: delivery latency from publish to client receipt (p50, p99, max), lost and
// out-of-order events, A's event-loop delay and its CPU per delivered event. Then a reconnect
// storm: while A publishes, all 100 clients drop and reconnect at once to controller B with their
// last sequence; every client must see every sequence once (missed 0, repeated 0).
//
//   npx tsx scripts/bench/event-fanout.ts [--clients 100] [--rate 200] [--seconds 60] [--storm-seconds 10]
//
// Prints one JSON object with both phases.
import { spawn, type ChildProcessByStdio } from "node:child_process";
import type { Readable, Writable } from "node:stream";
import { performance } from "node:perf_hooks";
import { createInterface } from "node:readline";
import { parseArgs } from "node:util";
import { startRedisServer } from "../../test/support/redis-server.js";

const { values } = parseArgs({
  options: {
    clients: { type: "string", default: "100" },
    rate: { type: "string", default: "200" },
    seconds: { type: "string", default: "60" },
    "storm-seconds": { type: "string", default: "10" },
  },
});
const clientCount = Number(values.clients);
const rate = Number(values.rate);
const seconds = Number(values.seconds);
const stormSeconds = Number(values["storm-seconds"]);
const wallMs = () => performance.timeOrigin + performance.now();

interface Controller {
  url: string;
  token: string;
  child: ChildProcessByStdio<Writable, Readable, null>;
  /** Resolves with the next `PUBLISHED` report. */
  publish(perSecond: number, forSeconds: number): Promise<Record<string, number>>;
}

async function startController(redisUri: string): Promise<Controller> {
  const child = spawn(process.execPath, ["--import", "tsx", "scripts/bench/event-fanout-controller.ts", redisUri], { stdio: ["pipe", "pipe", "inherit"] });
  const lines = createInterface({ input: child.stdout });
  let onReport: ((report: Record<string, number>) => void) | undefined;
  const ready = new Promise<{ url: string; token: string }>((resolve, reject) => {
    child.once("exit", (code) => reject(new Error(`controller exited with ${code}`)));
    lines.on("line", (line) => {
      if (line.startsWith("READY ")) resolve(JSON.parse(line.slice(6)));
      else if (line.startsWith("PUBLISHED ")) onReport?.(JSON.parse(line.slice(10)));
    });
  });
  const { url, token } = await ready;
  return {
    url,
    token,
    child,
    publish: (perSecond, forSeconds) =>
      new Promise((resolve) => {
        onReport = resolve;
        child.stdin.write(`publish ${perSecond} ${forSeconds}\n`);
      }),
  };
}

/** One stream client: counts sequences and latencies without keeping frames. */
class Client {
  lastSequence = 0;
  received = 0;
  outOfOrder = 0;
  repeated = 0;
  resyncs = 0;
  readonly seen = new Set<number>();
  latencies: number[] = [];
  private abort = new AbortController();
  private done: Promise<void> = Promise.resolve();

  async connect(controller: Controller, lastSequence: number | null): Promise<void> {
    const ticketResponse = await fetch(`${controller.url}/api/v1/events/ticket`, { method: "POST", headers: { authorization: `Bearer ${controller.token}` } });
    const { ticket } = (await ticketResponse.json()) as { ticket: string };
    const query = new URLSearchParams({ ticket });
    if (lastSequence !== null) query.set("lastSequence", String(lastSequence));
    this.abort = new AbortController();
    const response = await fetch(`${controller.url}/api/v1/events/stream?${query}`, { signal: this.abort.signal });
    const reader = response.body!.getReader();
    const decoder = new TextDecoder();
    let connected!: () => void;
    const isConnected = new Promise<void>((resolve) => (connected = resolve));
    this.done = (async () => {
      let buffer = "";
      try {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          buffer += decoder.decode(value, { stream: true });
          let end = buffer.indexOf("\n\n");
          while (end >= 0) {
            this.frame(buffer.slice(0, end), connected);
            buffer = buffer.slice(end + 2);
            end = buffer.indexOf("\n\n");
          }
        }
      } catch {
        // aborted here
      }
    })();
    await isConnected;
  }

  private frame(block: string, connected: () => void): void {
    const data = block.slice(block.indexOf("data: ") + 6);
    if (block.startsWith("event: connected")) return connected();
    if (!block.startsWith("id: ")) return;
    const receivedAtMs = wallMs();
    const event = JSON.parse(data) as { type: string; sequence: number; data: { sentAtMs?: number } };
    if (event.type === "RESYNC_REQUIRED") {
      this.resyncs++;
      return;
    }
    if (this.seen.has(event.sequence)) this.repeated++;
    else if (event.sequence <= this.lastSequence) this.outOfOrder++;
    this.seen.add(event.sequence);
    this.lastSequence = Math.max(this.lastSequence, event.sequence);
    this.received++;
    if (event.data.sentAtMs !== undefined) this.latencies.push(receivedAtMs - event.data.sentAtMs);
  }

  async close(): Promise<void> {
    this.abort.abort();
    await this.done;
  }
}

const percentile = (sorted: number[], p: number) => (sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]);
const round = (n: number) => Math.round(n * 100) / 100;

const redis = await startRedisServer();
const controllers: Controller[] = [];
try {
  controllers.push(await startController(redis.uri), await startController(redis.uri));
  const [a, b] = controllers;

  // Phase 1: fan-out.
  const clients = Array.from({ length: clientCount }, () => new Client());
  await Promise.all(clients.map((client) => client.connect(a, null)));
  const report = await a.publish(rate, seconds);
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  const latencies = clients.flatMap((client) => client.latencies).sort((x, y) => x - y);
  const delivered = clients.reduce((sum, client) => sum + client.received, 0);
  const fanout = {
    clients: clientCount,
    ratePerSecond: rate,
    seconds,
    published: report.published,
    delivered,
    lost: report.published * clientCount - delivered,
    outOfOrder: clients.reduce((sum, client) => sum + client.outOfOrder, 0),
    repeated: clients.reduce((sum, client) => sum + client.repeated, 0),
    latencyP50Ms: round(percentile(latencies, 50)),
    latencyP99Ms: round(percentile(latencies, 99)),
    latencyMaxMs: round(latencies.at(-1) ?? NaN),
    controllerLoopDelayP50Ms: report.loopP50Ms,
    controllerLoopDelayP99Ms: report.loopP99Ms,
    controllerLoopDelayMaxMs: report.loopMaxMs,
    controllerCpuMs: report.cpuUserMs + report.cpuSystemMs,
    controllerCpuUsPerDeliveredEvent: round(((report.cpuUserMs + report.cpuSystemMs) * 1000) / delivered),
  };

  // Phase 2: reconnect storm to the other controller while A keeps publishing.
  for (const client of clients) {
    client.seen.clear();
    client.received = client.outOfOrder = client.repeated = client.resyncs = 0;
    client.latencies = [];
  }
  const firstSequence = clients[0].lastSequence + 1;
  const storm = a.publish(rate, stormSeconds);
  await new Promise((resolve) => setTimeout(resolve, (stormSeconds * 1000) / 3));
  const positions = clients.map((client) => client.lastSequence);
  await Promise.all(clients.map((client) => client.close()));
  const reconnectStartMs = performance.now();
  await Promise.all(clients.map((client, i) => client.connect(b, positions[i])));
  const reconnectMs = performance.now() - reconnectStartMs;
  const stormReport = await storm;
  const lastSequence = firstSequence + stormReport.published - 1;
  const deadline = performance.now() + 10_000;
  while (clients.some((client) => client.lastSequence < lastSequence) && performance.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
  let missed = 0;
  for (const client of clients) for (let s = firstSequence; s <= lastSequence; s++) if (!client.seen.has(s)) missed++;
  const reconnect = {
    clients: clientCount,
    published: stormReport.published,
    reconnectAllMs: Math.round(reconnectMs),
    missed,
    repeated: clients.reduce((sum, client) => sum + client.repeated, 0),
    outOfOrder: clients.reduce((sum, client) => sum + client.outOfOrder, 0),
    resyncs: clients.reduce((sum, client) => sum + client.resyncs, 0),
  };
  await Promise.all(clients.map((client) => client.close()));
  process.stdout.write(`${JSON.stringify({ fanout, reconnect }, null, 2)}\n`);
} finally {
  for (const controller of controllers) {
    controller.child.stdin.end();
    await new Promise((resolve) => controller.child.once("exit", resolve));
  }
  await redis.stop();
}
