// The controller process of the player-transfer benchmark (player-transfers.ts): the HTTP app built
// by the composition root (test/support/http-app.ts; development profile: embedded documents and the
// memory key-value store, or a Redis given as argument), with the groups and instance records of the
// network the benchmark plays: `proxies` proxy instances (platform velocity) and `instances` server
// instances (platform paper), all RUNNING, each with a workload token.
//
//   node --import tsx scripts/bench/player-transfers-controller.ts <proxies> <instances> [redis-uri]
//
// Prints `READY {"url","proxies":{id:token},"servers":{id:token}}` once it serves. Standard input
// commands, one per line: `cpu` answers `CPU {"userMs","systemMs"}` (process.cpuUsage since start)
// and `loop` answers `LOOP {"p50Ms","p99Ms","maxMs"}` (event-loop delay since the last `loop`).
// The end of standard input (or SIGTERM) stops the app and exits.
import { monitorEventLoopDelay } from "node:perf_hooks";
import { createInterface } from "node:readline";
import { openRedisKvStore } from "../../src/store/redis/redis-kv-store.js";
import type { KvStore } from "../../src/store/ports.js";
import { startTestApp } from "../../test/support/http-app.js";

const [proxiesText, instancesText, redisUri] = process.argv.slice(2);
const proxyCount = Number(proxiesText);
const serverCount = Number(instancesText);
if (!(proxyCount > 0 && serverCount > 0)) throw new Error("usage: player-transfers-controller.ts <proxies> <instances> [redis-uri]");

const kv: KvStore | undefined = redisUri ? await openRedisKvStore({ uri: redisUri }) : undefined;
const app = await startTestApp({ kv, config: { rateLimit: { perIpPerMinute: 100_000_000, perUserPerMinute: 100_000_000 }, logging: { level: "WARN" } } });
await app.groups.create({ name: "proxy", platform: "velocity" });
await app.groups.create({ name: "game", platform: "paper", maxPlayers: 500 });
await app.nodes.upsert("bench-node", { host: "127.0.0.1" });
const proxies: Record<string, string> = {};
const servers: Record<string, string> = {};
const add = async (id: string, group: string, port: number) => {
  await app.instances.save({ id, group, node: "bench-node", port, memoryMb: 512, state: "RUNNING", playerCount: 0, startedAt: null, deploymentRevision: 1 });
  return app.credentials.issueWorkloadToken({ instanceId: id, group, node: "bench-node" }).token;
};
for (let i = 1; i <= proxyCount; i++) proxies[`proxy-${i}`] = await add(`proxy-${i}`, "proxy", 25000 + i);
for (let i = 1; i <= serverCount; i++) servers[`game-${i}`] = await add(`game-${i}`, "game", 30000 + i);

const loop = monitorEventLoopDelay({ resolution: 10 });
loop.enable();
const ms = (ns: number) => Math.round(ns / 1e4) / 100;
let stopping = false;
const stop = async () => {
  if (stopping) return;
  stopping = true;
  await app.close();
  await kv?.close();
  process.exit(0);
};
process.on("SIGTERM", () => void stop());
const lines = createInterface({ input: process.stdin });
lines.on("line", (line) => {
  if (line === "cpu") {
    const cpu = process.cpuUsage();
    process.stdout.write(`CPU ${JSON.stringify({ userMs: cpu.user / 1000, systemMs: cpu.system / 1000 })}\n`);
  } else if (line === "loop") {
    process.stdout.write(`LOOP ${JSON.stringify({ p50Ms: ms(loop.percentile(50)), p99Ms: ms(loop.percentile(99)), maxMs: ms(loop.max) })}\n`);
    loop.reset();
  }
});
lines.on("close", () => void stop());
process.stdout.write(`READY ${JSON.stringify({ url: app.baseUrl, proxies, servers })}\n`);
