// What the daemon's plugin relay costs a plugin call: sequential POST /api/plugin/player-join
// (a 90-byte JSON body) to a stand-in controller on 127.0.0.1, once directly and once through the
// relay (which opens a new connection to the controller per request), with a kept-alive client
// connection like the simulated server's; then a burst of concurrent calls through the relay.
// The same again through a relay that checks its callers (the peer-process lookup of
// src/daemon/relay-callers.ts, this process standing for the instance), kept alive and with a
// fresh connection per call (each one looked up).
//
//   npx tsx scripts/bench/plugin-relay.ts [--requests 2000] [--burst 1000]
//
// Prints a table and one `RESULT {…}` line (latencies in ms).
import { Agent, createServer, request } from "node:http";
import { PluginRelay } from "../../src/daemon/plugin-relay.js";
import { ProcessCallerCheck } from "../../src/daemon/relay-callers.js";

function option(name: string, fallback: number): number {
  const index = process.argv.indexOf(`--${name}`);
  const value = index >= 0 ? Number(process.argv[index + 1]) : fallback;
  if (!Number.isInteger(value) || value < 1) throw new Error(`--${name} needs a positive integer`);
  return value;
}

const requests = option("requests", 2_000);
const burst = option("burst", 1_000);
const body = JSON.stringify({ uuid: "069a79f4-44e9-4726-a5be-fca90e38aaf5", name: "Notch", group: "lobby" });

const controller = createServer((req, res) => {
  req.resume();
  req.on("end", () => res.writeHead(200, { "content-type": "application/json" }).end('{"instanceId":"lobby-1","playerCount":1}'));
});
await new Promise<void>((resolve) => controller.listen(0, "127.0.0.1", resolve));
const controllerUrl = `http://127.0.0.1:${(controller.address() as { port: number }).port}`;
const relay = new PluginRelay({ port: 0, waitMs: 10_000, waitingRequestsMax: 1_000, replayBodyBytesMax: 1024 * 1024 });
await relay.start();
relay.sessionOpened(controllerUrl);
const checked = new PluginRelay({
  port: 0,
  waitMs: 10_000,
  waitingRequestsMax: 1_000,
  replayBodyBytesMax: 1024 * 1024,
  callers: new ProcessCallerCheck({ instances: () => [{ instanceId: "bench-1", pid: process.pid }] }),
});
await checked.start();
checked.sessionOpened(controllerUrl);
const agent = new Agent({ keepAlive: true });
const token = `wl.${Buffer.from(JSON.stringify({ iid: "bench-1" })).toString("base64url")}.signature`;

function post(base: string, fresh = false): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${base}/api/plugin/player-join`,
      {
        method: "POST",
        agent: fresh ? false : agent,
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json", "content-length": Buffer.byteLength(body) },
      },
      (res) => {
        res.resume();
        res.on("end", () => (res.statusCode === 200 ? resolve() : reject(new Error(`status ${res.statusCode}`))));
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

async function sequential(base: string, count: number, fresh = false): Promise<{ p50Ms: number; p99Ms: number }> {
  const times: number[] = [];
  for (let i = 0; i < count; i++) {
    const started = process.hrtime.bigint();
    await post(base, fresh);
    times.push(Number(process.hrtime.bigint() - started) / 1e6);
  }
  times.sort((a, b) => a - b);
  const at = (q: number) => Math.round(times[Math.min(times.length - 1, Math.floor(times.length * q))]! * 1000) / 1000;
  return { p50Ms: at(0.5), p99Ms: at(0.99) };
}

// Warm-up: JIT and sockets.
await sequential(controllerUrl, 300);
await sequential(relay.url!, 300);
await sequential(checked.url!, 300, true);
const direct = await sequential(controllerUrl, requests);
const relayed = await sequential(relay.url!, requests);
const checkedKeptAlive = await sequential(checked.url!, requests);
const relayedFresh = await sequential(relay.url!, requests, true);
const checkedFresh = await sequential(checked.url!, requests, true);
const burstStarted = Date.now();
await Promise.all(Array.from({ length: burst }, () => post(relay.url!)));
const burstMs = Date.now() - burstStarted;
const checkedBurstStarted = Date.now();
await Promise.all(Array.from({ length: burst }, () => post(checked.url!, true)));
const checkedBurstMs = Date.now() - checkedBurstStarted;

console.log(`| path | requests | p50 ms | p99 ms |\n|---|---|---|---|`);
console.log(`| direct | ${requests} | ${direct.p50Ms} | ${direct.p99Ms} |`);
console.log(`| through the relay | ${requests} | ${relayed.p50Ms} | ${relayed.p99Ms} |`);
console.log(`| through the relay, caller checked, kept alive | ${requests} | ${checkedKeptAlive.p50Ms} | ${checkedKeptAlive.p99Ms} |`);
console.log(`| through the relay, new connection per call | ${requests} | ${relayedFresh.p50Ms} | ${relayedFresh.p99Ms} |`);
console.log(`| through the relay, caller checked, new connection per call | ${requests} | ${checkedFresh.p50Ms} | ${checkedFresh.p99Ms} |`);
console.log(`${burst} concurrent calls through the relay: ${burstMs} ms`);
console.log(`${burst} concurrent calls through the checking relay, each on a new connection: ${checkedBurstMs} ms`);
console.log(`RESULT ${JSON.stringify({ requests, direct, relayed, checkedKeptAlive, relayedFresh, checkedFresh, burst, burstMs, checkedBurstMs })}`);

await checked.close();
await relay.close();
agent.destroy();
controller.closeAllConnections();
await new Promise<void>((resolve) => controller.close(() => resolve()));
