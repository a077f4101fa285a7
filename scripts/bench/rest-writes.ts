// REST write benchmark: a development-profile controller (`src/controller/main.ts` as a child
// process: embedded LevelDB store, in-memory key-value store, the scheduler, the event journal; rate
// limits lifted) answers group writes from a driver process, optionally while N event-stream
// clients (another process) are attached.
//
// Closed loop (default): `--workers` workers each create a group (POST /api/v1/groups) and delete it
// (DELETE /api/v1/groups/<name>) in a loop; every request is one write. Open loop (`--rate N`):
// N writes per second on a fixed schedule (a create, then the delete of that group, and so on),
// latency measured from each write's scheduled time, so a server that falls behind shows it.
// With `--stream-clients N`, N clients hold `GET /api/v1/events/stream` open for the whole run:
// delivery latency (receipt time minus the event's timestamp, one clock), lost and repeated
// sequences.
//
//   npx tsx scripts/bench/rest-writes.ts [--workers 8] [--duration-ms 10000] [--warmup-ms 2000]
//     [--stream-clients 0] [--rate 0] [--tree <checkout>] [--cpu-prof <dir>]
//
// --tree runs the controller of another checkout (compare.ts); --cpu-prof writes the controller's
// CPU profile there (cpu-profile-summary.ts). Prints a table and one line `RESULT {...}`; the
// controller's CPU per write (user + system, from /proc, between the driver's marks) is the figure
// that does not depend on how busy the machine is.
import { fork, spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { Agent, request } from "node:http";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { stringify as toYaml } from "yaml";
import { argNumber, argString, percentile, printTable, processCpuSeconds, spread, uptimeLine } from "./system-bench-support.js";

const SCRIPT = fileURLToPath(import.meta.url);
const ROOT_DIR = join(import.meta.dirname, "..", "..");
const ADMIN_PASSWORD = "bench-admin-password";
/** Rate limits far above what this benchmark produces: it measures the write path. */
const RATE_LIMIT_PER_MINUTE = 1_000_000_000;
/** Open-loop writes waiting for an answer; beyond it the schedule stops issuing (and says so). */
const OPEN_LOOP_IN_FLIGHT_MAX = 4_000;
/** How long the stream clients get to receive the last events after the writes stopped. */
const DRAIN_WAIT_MS = 10_000;

const wallMs = () => performance.timeOrigin + performance.now();
const round = (n: number, digits = 2) => Math.round(n * 10 ** digits) / 10 ** digits;

interface DriverInput {
  baseUrl: string;
  token: string;
  workers: number;
  durationMs: number;
  warmupMs: number;
  ratePerSecond: number;
}

interface DriverResult {
  writes: number;
  errors: number;
  errorSamples: string[];
  seconds: number;
  latenciesMs: number[];
  /** Open loop: writes the schedule could not issue because too many were in flight. */
  notIssued: number;
}

interface StreamsResult {
  clients: number;
  delivered: number;
  lost: number;
  repeated: number;
  resyncs: number;
  latenciesMs: number[];
}

type ChildMessage =
  | { type: "mark"; at: "start" | "end" }
  | { type: "driver-result"; result: DriverResult }
  | { type: "streams-ready" }
  | { type: "streams-result"; result: StreamsResult };

// ---------------------------------------------------------------------------------------------
// HTTP helpers

function call(agent: Agent, baseUrl: string, token: string, method: string, path: string, body?: unknown): Promise<{ status: number; text: string }> {
  const payload = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolvePromise, reject) => {
    const headers: Record<string, string> = { authorization: `Bearer ${token}` };
    if (payload !== undefined) {
      headers["content-type"] = "application/json";
      headers["content-length"] = String(Buffer.byteLength(payload));
    }
    const req = request(baseUrl + path, { method, agent, headers }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => (text += chunk));
      res.on("end", () => resolvePromise({ status: res.statusCode ?? 0, text }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(payload);
  });
}

// ---------------------------------------------------------------------------------------------
// Driver (child process): the writes

async function drive(input: DriverInput): Promise<DriverResult> {
  const agent = new Agent({ keepAlive: true, maxSockets: input.ratePerSecond > 0 ? 256 : input.workers });
  const prefix = `w${process.pid.toString(36)}`;
  let counter = 0;
  const result: DriverResult = { writes: 0, errors: 0, errorSamples: [], seconds: 0, latenciesMs: [], notIssued: 0 };
  let recording = false;
  const record = (startedMs: number, status: number, expected: number, text: string) => {
    if (!recording) return;
    result.writes += 1;
    result.latenciesMs.push(performance.now() - startedMs);
    if (status !== expected) {
      result.errors += 1;
      if (result.errorSamples.length < 5) result.errorSamples.push(`${status} ${text.slice(0, 200)}`);
    }
  };
  const create = async (name: string, scheduledMs: number) => {
    const res = await call(agent, input.baseUrl, input.token, "POST", "/api/v1/groups", { name, platform: "paper" }).catch((e: Error) => ({
      status: 0,
      text: e.message,
    }));
    record(scheduledMs, res.status, 201, res.text);
  };
  const remove = async (name: string, scheduledMs: number) => {
    const res = await call(agent, input.baseUrl, input.token, "DELETE", `/api/v1/groups/${name}`).catch((e: Error) => ({ status: 0, text: e.message }));
    record(scheduledMs, res.status, 204, res.text);
  };

  const closedLoop = async (untilMs: number) => {
    await Promise.all(
      Array.from({ length: input.workers }, async () => {
        while (performance.now() < untilMs) {
          const name = `${prefix}-${(counter++).toString(36)}`;
          await create(name, performance.now());
          await remove(name, performance.now());
        }
      }),
    );
  };

  const openLoop = async (untilMs: number) => {
    const startedMs = performance.now();
    const intervalMs = 1000 / input.ratePerSecond;
    const inFlight = new Set<Promise<void>>();
    let issued = 0;
    let lastCreate: { name: string; done: Promise<void> } | null = null;
    while (performance.now() < untilMs) {
      const due = Math.floor((performance.now() - startedMs) / intervalMs) + 1;
      for (; issued < due; issued++) {
        const scheduledMs = startedMs + issued * intervalMs;
        if (inFlight.size >= OPEN_LOOP_IN_FLIGHT_MAX) {
          if (recording) result.notIssued += 1;
          continue;
        }
        let write: Promise<void>;
        if (lastCreate === null) {
          const name = `${prefix}-${(counter++).toString(36)}`;
          const done = create(name, scheduledMs);
          lastCreate = { name, done };
          write = done;
        } else {
          const { name, done } = lastCreate;
          lastCreate = null;
          write = done.then(() => remove(name, scheduledMs));
        }
        inFlight.add(write);
        void write.finally(() => inFlight.delete(write));
      }
      await new Promise((r) => setTimeout(r, Math.max(1, Math.min(intervalMs, 5))));
    }
    await Promise.all(inFlight);
  };

  const run = input.ratePerSecond > 0 ? openLoop : closedLoop;
  await run(performance.now() + input.warmupMs);
  process.send!({ type: "mark", at: "start" } satisfies ChildMessage);
  recording = true;
  const startedMs = performance.now();
  await run(startedMs + input.durationMs);
  result.seconds = (performance.now() - startedMs) / 1000;
  recording = false;
  process.send!({ type: "mark", at: "end" } satisfies ChildMessage);
  agent.destroy();
  return result;
}

// ---------------------------------------------------------------------------------------------
// Stream clients (child process): sequences and delivery latency, without keeping frames

class StreamClient {
  lastSequence = 0;
  delivered = 0;
  lost = 0;
  repeated = 0;
  resyncs = 0;
  private buffer = "";

  constructor(private readonly onLatency: (ms: number) => void) {}

  async open(baseUrl: string, token: string, agent: Agent): Promise<void> {
    const { status, text } = await call(agent, baseUrl, token, "POST", "/api/v1/events/ticket");
    if (status !== 200) throw new Error(`ticket: ${status} ${text}`);
    const { ticket } = JSON.parse(text) as { ticket: string };
    await new Promise<void>((resolvePromise, reject) => {
      const req = request(`${baseUrl}/api/v1/events/stream?ticket=${ticket}`, { agent: false }, (res) => {
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => this.read(chunk, resolvePromise));
        res.on("error", () => undefined);
      });
      req.on("error", reject);
      req.end();
    });
  }

  private read(chunk: string, connected: () => void): void {
    this.buffer += chunk;
    for (let end = this.buffer.indexOf("\n\n"); end >= 0; end = this.buffer.indexOf("\n\n")) {
      const block = this.buffer.slice(0, end);
      this.buffer = this.buffer.slice(end + 2);
      if (block.startsWith("event: connected")) connected();
      else if (block.startsWith("id: ")) this.frame(block);
    }
  }

  private frame(block: string): void {
    const receivedMs = wallMs();
    if (block.includes('"type":"RESYNC_REQUIRED"')) {
      this.resyncs += 1;
      return;
    }
    const sequence = Number(block.slice(4, block.indexOf("\n")));
    if (sequence <= this.lastSequence) this.repeated += 1;
    else {
      if (this.lastSequence > 0 && sequence > this.lastSequence + 1) this.lost += sequence - this.lastSequence - 1;
      this.lastSequence = sequence;
    }
    this.delivered += 1;
    const at = block.indexOf('"timestamp":"');
    if (at >= 0) this.onLatency(receivedMs - Date.parse(block.slice(at + 13, block.indexOf('"', at + 13))));
  }
}

async function runStreams(input: { baseUrl: string; token: string; clients: number }): Promise<void> {
  let recording = false;
  const latencies: number[] = [];
  const agent = new Agent({ keepAlive: true, maxSockets: 8 });
  const clients = Array.from({ length: input.clients }, () => new StreamClient((ms) => recording && latencies.push(ms)));
  for (const client of clients) await client.open(input.baseUrl, input.token, agent);
  process.send!({ type: "streams-ready" } satisfies ChildMessage);
  process.on("message", async (message: { type: "start" | "end" }) => {
    if (message.type === "start") recording = true;
    if (message.type !== "end") return;
    recording = false;
    const deadline = performance.now() + DRAIN_WAIT_MS;
    const highest = () => Math.max(...clients.map((c) => c.lastSequence));
    const target = highest();
    while (clients.some((c) => c.lastSequence < target) && performance.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    const result: StreamsResult = {
      clients: clients.length,
      delivered: clients.reduce((sum, c) => sum + c.delivered, 0),
      lost: clients.reduce((sum, c) => sum + c.lost + Math.max(0, target - c.lastSequence), 0),
      repeated: clients.reduce((sum, c) => sum + c.repeated, 0),
      resyncs: clients.reduce((sum, c) => sum + c.resyncs, 0),
      latenciesMs: latencies,
    };
    process.send!({ type: "streams-result", result } satisfies ChildMessage, () => process.exit(0));
  });
}

// ---------------------------------------------------------------------------------------------
// Main: the controller, the children, the figures

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  const address = server.address();
  await new Promise((r) => server.close(r));
  return typeof address === "object" && address !== null ? address.port : 0;
}

async function startControllerProcess(
  tree: string,
  dir: string,
  cpuProfDir: string | null,
): Promise<{ child: ChildProcess; baseUrl: string; output(): string }> {
  const port = await freePort();
  const configPath = join(dir, "controller.yml");
  await writeFile(
    configPath,
    toYaml({
      http: { host: "127.0.0.1", port },
      grpc: { port: 0 },
      raft: { host: "127.0.0.1", port: 0, dataDir: join(dir, "raft") },
      data: { dir: join(dir, "data") },
      auth: { adminPassword: ADMIN_PASSWORD },
      logging: { level: "WARN" },
      rateLimit: { perIpPerMinute: RATE_LIMIT_PER_MINUTE, perUserPerMinute: RATE_LIMIT_PER_MINUTE },
    }),
  );
  const nodeArgs = cpuProfDir ? ["--cpu-prof", "--cpu-prof-dir", cpuProfDir] : [];
  const child = spawn(process.execPath, [...nodeArgs, "--import", "tsx", join(tree, "src/controller/main.ts"), "--config", configPath], {
    cwd: tree,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  const append = (chunk: Buffer) => void (output = (output + chunk.toString()).slice(-20_000));
  child.stdout!.on("data", append);
  child.stderr!.on("data", append);
  process.once("exit", () => child.kill("SIGKILL"));
  const baseUrl = `http://127.0.0.1:${port}`;
  const deadline = performance.now() + 120_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`the controller exited with ${child.exitCode}:\n${output}`);
    const ready = await fetch(`${baseUrl}/api/v1/system/ready`).then(
      (r) => r.status === 200,
      () => false,
    );
    if (ready) break;
    if (performance.now() > deadline) throw new Error(`the controller was not ready within 120 s:\n${output}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  return { child, baseUrl, output: () => output };
}

function nextMessage<T extends ChildMessage["type"]>(child: ChildProcess, type: T): Promise<Extract<ChildMessage, { type: T }>> {
  return new Promise((resolvePromise, reject) => {
    const onMessage = (message: ChildMessage) => {
      if (message.type !== type) return;
      child.off("message", onMessage);
      resolvePromise(message as Extract<ChildMessage, { type: T }>);
    };
    child.on("message", onMessage);
    child.once("exit", (code) => reject(new Error(`child exited with ${code} before ${type}`)));
  });
}

async function main(): Promise<void> {
  const workers = argNumber("--workers", 8);
  const durationMs = argNumber("--duration-ms", 10_000);
  const warmupMs = argNumber("--warmup-ms", 2_000);
  const streamClients = argNumber("--stream-clients", 0);
  const ratePerSecond = argNumber("--rate", 0);
  const tree = resolve(argString("--tree", ROOT_DIR));
  const cpuProfDir = process.argv.includes("--cpu-prof") ? resolve(argString("--cpu-prof", ".")) : null;
  const dir = await mkdtemp(join(tmpdir(), "bench-rest-writes-"));
  let controller: Awaited<ReturnType<typeof startControllerProcess>> | null = null;
  try {
    controller = await startControllerProcess(tree, dir, cpuProfDir);
    const login = await fetch(`${controller.baseUrl}/api/v1/auth/login`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ username: "admin", password: ADMIN_PASSWORD }),
    });
    const { token } = (await login.json()) as { token: string };
    const controllerPid = controller.child.pid!;

    let streams: ChildProcess | null = null;
    if (streamClients > 0) {
      streams = fork(SCRIPT, ["--role", "streams"], { stdio: ["ignore", "inherit", "inherit", "ipc"] });
      const ready = nextMessage(streams, "streams-ready");
      streams.send({ baseUrl: controller.baseUrl, token, clients: streamClients });
      await ready;
    }
    const driver = fork(SCRIPT, ["--role", "driver"], { stdio: ["ignore", "inherit", "inherit", "ipc"] });
    const uptimeBefore = uptimeLine();
    let cpuAtStart = 0;
    let cpuAtEnd = 0;
    const windowUs = [0n, 0n];
    driver.on("message", (message: ChildMessage) => {
      if (message.type !== "mark") return;
      if (message.at === "start") {
        cpuAtStart = processCpuSeconds(controllerPid);
        windowUs[0] = process.hrtime.bigint() / 1000n;
        streams?.send({ type: "start" });
      } else {
        cpuAtEnd = processCpuSeconds(controllerPid);
        windowUs[1] = process.hrtime.bigint() / 1000n;
      }
    });
    const driverResult = nextMessage(driver, "driver-result");
    driver.send({ baseUrl: controller.baseUrl, token, workers, durationMs, warmupMs, ratePerSecond } satisfies DriverInput);
    const { result: writes } = await driverResult;
    const uptimeAfter = uptimeLine();
    let delivery: StreamsResult | null = null;
    if (streams) {
      const streamsResult = nextMessage(streams, "streams-result");
      streams.send({ type: "end" });
      delivery = (await streamsResult).result;
    }

    const latencies = writes.latenciesMs.sort((a, b) => a - b);
    const deliveryLatencies = (delivery?.latenciesMs ?? []).sort((a, b) => a - b);
    const cpuS = cpuAtEnd - cpuAtStart;
    const result = {
      mode: ratePerSecond > 0 ? `open loop ${ratePerSecond}/s` : `closed loop, ${workers} workers`,
      streamClients,
      writes: writes.writes,
      errors: writes.errors,
      errorSamples: writes.errorSamples,
      notIssued: writes.notIssued,
      seconds: round(writes.seconds),
      writesPerSecond: round(writes.writes / writes.seconds, 1),
      latency: { p50Ms: round(percentile(latencies, 50)), p99Ms: round(percentile(latencies, 99)), maxMs: round(latencies.at(-1) ?? Number.NaN) },
      controllerCpuS: round(cpuS),
      controllerCpuMsPerWrite: round((cpuS * 1000) / Math.max(1, writes.writes), 3),
      delivery: delivery && {
        delivered: delivery.delivered,
        lost: delivery.lost,
        repeated: delivery.repeated,
        resyncs: delivery.resyncs,
        latency: spread(deliveryLatencies),
        latencyP50Ms: round(percentile(deliveryLatencies, 50)),
        latencyP99Ms: round(percentile(deliveryLatencies, 99)),
      },
      tree,
      /** The measured window for `cpu-profile-summary.ts --window` (monotonic µs). */
      profileWindow: `${windowUs[0]}-${windowUs[1]}`,
      uptimeBefore,
      uptimeAfter,
      node: process.version,
    };
    printTable(`REST writes: group create + delete, ${result.mode}, ${streamClients} event-stream clients (development profile controller)`, [
      ["writes (errors)", `${result.writes} (${result.errors})${result.notIssued ? `, ${result.notIssued} not issued (in-flight bound)` : ""}`],
      ["writes per second", result.writesPerSecond],
      ["latency p50 / p99 / max", `${result.latency.p50Ms} / ${result.latency.p99Ms} / ${result.latency.maxMs} ms`],
      ["controller CPU / per write", `${result.controllerCpuS} s / ${result.controllerCpuMsPerWrite} ms`],
      ...(delivery
        ? ([
            ["events delivered / lost / repeated / resyncs", `${delivery.delivered} / ${delivery.lost} / ${delivery.repeated} / ${delivery.resyncs}`],
            ["delivery latency p50 / p99", `${result.delivery!.latencyP50Ms} / ${result.delivery!.latencyP99Ms} ms`],
          ] as [string, string][])
        : []),
      ["uptime before", uptimeBefore],
      ["uptime after", uptimeAfter],
      ...(cpuProfDir ? ([["controller CPU profile", `${cpuProfDir} (summary of the writes: --window ${result.profileWindow})`]] as [string, string][]) : []),
    ]);
    console.log(`RESULT ${JSON.stringify(result)}`);
    if (writes.errorSamples.length > 0) console.error(`error samples: ${writes.errorSamples.join(" | ")}`);
  } finally {
    if (controller) {
      controller.child.kill("SIGTERM");
      await new Promise((r) => (controller!.child.exitCode !== null ? r(null) : controller!.child.once("exit", r)));
    }
    await rm(dir, { recursive: true, force: true });
  }
}

const role = argString("--role", "main");
if (role === "driver") {
  process.once("message", (input: DriverInput) => {
    void drive(input).then((result) => process.send!({ type: "driver-result", result } satisfies ChildMessage, () => process.exit(0)));
  });
} else if (role === "streams") {
  process.once("message", (input: { baseUrl: string; token: string; clients: number }) => void runStreams(input));
} else {
  await main();
}
