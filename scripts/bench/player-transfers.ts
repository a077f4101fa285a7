// Player-transfer benchmark: a controller process (player-transfers-controller.ts) with `proxies`
// proxy instances and `instances` server instances; this process plays every instance's plugin over
// HTTP. Phase 1: `players` players join a proxy and then a server (two plugin calls each). Phase 2:
// `transfers` transfers (`POST /api/plugin/transfer`, asked by the server the player is on, to
// another server), `concurrency` at a time; each is received on the proxy's plugin event stream
// (`event: transfer`), and then the "proxy" moves the player (`player-join` on the target, which
// completes the transfer). Measured: transfer latency from the request being sent to the proxy
// stream's receipt (p50, p99, max), the controller's CPU per transfer (the transfer call, its
// delivery, and the completing join), join throughput and the controller's event-loop delay.
//
//   npx tsx scripts/bench/player-transfers.ts [--players 10000] [--instances 100] [--proxies 10]
//       [--transfers 5000] [--concurrency 32] [--redis]
//
// `--redis` runs a throwaway redis-server as the key-value store (the production profile's);
// otherwise the development profile's memory store. Prints a table and one JSON line.
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { startRedisServer, type RedisServer } from "../../test/support/redis-server.js";

const { values } = parseArgs({
  options: {
    players: { type: "string", default: "10000" },
    instances: { type: "string", default: "100" },
    proxies: { type: "string", default: "10" },
    transfers: { type: "string", default: "5000" },
    concurrency: { type: "string", default: "32" },
    redis: { type: "boolean", default: false },
  },
});
const playerCount = Number(values.players);
const serverCount = Number(values.instances);
const proxyCount = Number(values.proxies);
const transferCount = Number(values.transfers);
const concurrency = Number(values.concurrency);

let redis: RedisServer | null = null;
if (values.redis) redis = await startRedisServer();
const child = spawn(
  process.execPath,
  ["--import", "tsx", "scripts/bench/player-transfers-controller.ts", String(proxyCount), String(serverCount), ...(redis ? [redis.uri] : [])],
  {
    stdio: ["pipe", "pipe", "inherit"],
  },
);
const lines = createInterface({ input: child.stdout });
const replies: ((line: string) => void)[] = [];
const ready = new Promise<{ url: string; proxies: Record<string, string>; servers: Record<string, string> }>((resolve, reject) => {
  child.once("exit", (code) => reject(new Error(`controller exited with ${code}`)));
  lines.on("line", (line) => {
    if (line.startsWith("READY ")) resolve(JSON.parse(line.slice(6)));
    else if (line.startsWith("CPU ") || line.startsWith("LOOP ")) replies.shift()?.(line);
  });
});
const ask = (command: string): Promise<any> =>
  new Promise((resolve) => {
    replies.push((line) => resolve(JSON.parse(line.slice(line.indexOf(" ") + 1))));
    child.stdin.write(`${command}\n`);
  });

const { url, proxies, servers } = await ready;
const proxyIds = Object.keys(proxies);
const serverIds = Object.keys(servers);
const tokenOf = (id: string) => proxies[id] ?? servers[id];
let sequence = 0;
async function post(instance: string, path: string, body: unknown): Promise<any> {
  const res = await fetch(url + path, {
    method: "POST",
    headers: { authorization: `Bearer ${tokenOf(instance)}`, "content-type": "application/json", "x-cloud-sequence": String(++sequence) },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${path} from ${instance}: ${res.status} ${text}`);
  return JSON.parse(text);
}

// The proxies' plugin event streams: every `transfer` frame's receipt time, by transfer id.
const received = new Map<string, number>();
const waiting = new Map<string, (atMs: number) => void>();
const aborts: AbortController[] = [];
for (const proxy of proxyIds) {
  const { ticket } = await post(proxy, "/api/plugin/events/ticket", {});
  const abort = new AbortController();
  aborts.push(abort);
  const res = await fetch(`${url}/api/v1/events/stream?ticket=${ticket}`, { signal: abort.signal });
  void (async () => {
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        buffer += decoder.decode(value, { stream: true });
        for (let split = buffer.indexOf("\n\n"); split >= 0; split = buffer.indexOf("\n\n")) {
          const block = buffer.slice(0, split);
          buffer = buffer.slice(split + 2);
          if (!block.startsWith("event: transfer\n")) continue;
          const atMs = performance.now();
          const id = (JSON.parse(block.slice(block.indexOf("data: ") + 6)) as { id: string }).id;
          const waiter = waiting.get(id);
          if (waiter) {
            waiting.delete(id);
            waiter(atMs);
          } else received.set(id, atMs);
        }
      }
    } catch {
      // The stream is closed at the end.
    }
  })();
}

async function pool(count: number, work: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, count) }, async () => {
      for (let i = next++; i < count; i = next++) await work(i);
    }),
  );
}
const uuidOf = (n: number) => `00000000-0000-4000-8000-${n.toString(16).padStart(12, "0")}`;
const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
const round = (v: number) => Math.round(v * 100) / 100;

// Phase 1: joins.
const onServer: string[] = [];
await ask("loop");
const joinStart = performance.now();
await pool(playerCount, async (i) => {
  const uuid = uuidOf(i + 1);
  await post(proxyIds[i % proxyIds.length], "/api/plugin/player-join", { uuid, name: `p${i}` });
  const server = serverIds[i % serverIds.length];
  await post(server, "/api/plugin/player-join", { uuid, name: `p${i}` });
  onServer[i] = server;
});
const joinSeconds = (performance.now() - joinStart) / 1000;
const joinLoop = await ask("loop");

// Phase 2: transfers. Each worker takes its own players (i ≡ worker mod concurrency), so no player
// is moved by two transfers at once.
const latencies: number[] = [];
const cpuBefore = await ask("cpu");
const transferStart = performance.now();
let done = 0;
await Promise.all(
  Array.from({ length: Math.min(concurrency, transferCount) }, async (_, worker) => {
    let round = 0;
    while (done < transferCount) {
      done++;
      const player = (worker + round++ * concurrency) % playerCount;
      const from = onServer[player];
      const to = serverIds[(serverIds.indexOf(from) + 1 + Math.floor(Math.random() * (serverIds.length - 1))) % serverIds.length];
      const uuid = uuidOf(player + 1);
      const sentAt = performance.now();
      const transfer = await post(from, "/api/plugin/transfer", { playerUuid: uuid, targetInstanceId: to });
      const receivedAt = received.get(transfer.id) ?? (await new Promise<number>((resolve) => waiting.set(transfer.id, resolve)));
      received.delete(transfer.id);
      latencies.push(receivedAt - sentAt);
      await post(to, "/api/plugin/player-join", { uuid, name: `p${player}` });
      onServer[player] = to;
    }
  }),
);
const transferSeconds = (performance.now() - transferStart) / 1000;
const cpuAfter = await ask("cpu");
const transferLoop = await ask("loop");
const cpuMs = cpuAfter.userMs + cpuAfter.systemMs - cpuBefore.userMs - cpuBefore.systemMs;

latencies.sort((a, b) => a - b);
const result = {
  store: redis ? "redis" : "memory",
  players: playerCount,
  instances: serverCount,
  proxies: proxyCount,
  concurrency,
  joinCalls: playerCount * 2,
  joinCallsPerSecond: Math.round((playerCount * 2) / joinSeconds),
  joinLoopP99Ms: joinLoop.p99Ms,
  transfers: latencies.length,
  transfersPerSecond: Math.round(latencies.length / transferSeconds),
  latencyP50Ms: round(percentile(latencies, 50)),
  latencyP99Ms: round(percentile(latencies, 99)),
  latencyMaxMs: round(latencies[latencies.length - 1]),
  controllerCpuMsPerTransfer: round(cpuMs / latencies.length),
  transferLoopP50Ms: transferLoop.p50Ms,
  transferLoopP99Ms: transferLoop.p99Ms,
};
console.log(`players ${playerCount} on ${serverCount} servers and ${proxyCount} proxies (${result.store} store), concurrency ${concurrency}`);
console.log(`joins: ${result.joinCalls} calls, ${result.joinCallsPerSecond}/s, loop p99 ${joinLoop.p99Ms} ms`);
console.log(
  `transfers: ${result.transfers}, ${result.transfersPerSecond}/s, publish→proxy p50 ${result.latencyP50Ms} ms p99 ${result.latencyP99Ms} ms max ${result.latencyMaxMs} ms, controller CPU ${result.controllerCpuMsPerTransfer} ms per transfer`,
);
console.log(JSON.stringify(result));
for (const abort of aborts) abort.abort();
child.stdin.end();
await new Promise((resolve) => child.once("exit", resolve));
await redis?.stop();
