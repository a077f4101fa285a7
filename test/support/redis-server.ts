/**
 * Starts a throwaway Redis for tests: Debian's `redis-server` on an ephemeral 127.0.0.1 port,
 * without persistence (`--save "" --appendonly no`), its working directory a temp directory. It can
 * be started as a replica of another (`replicaOf`), on a given port (to come back where it was),
 * frozen and resumed (SIGSTOP, SIGCONT) and killed hard. {@link startRedisSentinel} runs Debian's
 * `redis-sentinel` watching a master.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createConnection } from "node:net";
import { unusedPort } from "./ports.js";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** A running test server; `stop` is idempotent and always removes the temp directory. */
export interface RedisServer {
  /** redis://127.0.0.1:<port> */
  uri: string;
  port: number;
  pid: number;
  /** Freezes the server: connections stay open, nothing answers. */
  pause(): void;
  resume(): void;
  /** SIGKILL: the server is gone at once, with whatever it held in memory. */
  kill(): Promise<void>;
  stop(): Promise<void>;
}

export interface RedisServerOptions {
  /** The port to listen on; default an unused one. */
  port?: number;
  /** Starts as a replica of the server on this port. */
  replicaOf?: number;
}

const readyTimeoutMs = 15_000;
const stopTimeoutMs = 5_000;

/** Starts redis-server; call `stop` in an `after` hook. */
export async function startRedisServer(options: RedisServerOptions = {}): Promise<RedisServer> {
  const port = options.port ?? (await unusedPort());
  const args = ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--daemonize", "no"];
  if (options.replicaOf !== undefined) args.push("--replicaof", "127.0.0.1", String(options.replicaOf));
  const server = await startProcess("redis-server", args, port, "redis-test-");
  return { uri: `redis://127.0.0.1:${port}`, ...server };
}

/** A running `redis-sentinel`; `stop` is idempotent. */
export interface RedisSentinel {
  port: number;
  pid: number;
  stop(): Promise<void>;
}

export interface RedisSentinelOptions {
  masterName: string;
  masterPort: number;
  /** Sentinels that must agree the master is down. */
  quorum: number;
  /** How long the master may not answer before it is thought down. */
  downAfterMs: number;
  failoverTimeoutMs: number;
}

/** Starts `redis-sentinel` monitoring the master on 127.0.0.1:`masterPort`; call `stop` in an `after` hook. */
export async function startRedisSentinel(options: RedisSentinelOptions): Promise<RedisSentinel> {
  const port = await unusedPort();
  const dir = await mkdtemp(join(tmpdir(), "redis-sentinel-test-"));
  const config = join(dir, "sentinel.conf");
  // Sentinel rewrites its configuration file as it learns the topology, so it gets one of its own.
  await writeFile(
    config,
    [
      `port ${port}`,
      "bind 127.0.0.1",
      "daemonize no",
      `dir ${dir}`,
      `sentinel monitor ${options.masterName} 127.0.0.1 ${options.masterPort} ${options.quorum}`,
      `sentinel down-after-milliseconds ${options.masterName} ${options.downAfterMs}`,
      `sentinel failover-timeout ${options.masterName} ${options.failoverTimeoutMs}`,
      `sentinel parallel-syncs ${options.masterName} 1`,
      "",
    ].join("\n"),
  );
  const server = await startProcess("redis-sentinel", [config], port, "redis-sentinel-run-", dir);
  return { port, pid: server.pid, stop: server.stop };
}

async function startProcess(
  binary: string,
  args: string[],
  port: number,
  tempPrefix: string,
  ownedDir?: string,
): Promise<Omit<RedisServer, "uri" | "port"> & { port: number }> {
  const dir = ownedDir ?? (await mkdtemp(join(tmpdir(), tempPrefix)));
  let output = "";
  const child: ChildProcess = spawn(binary, binary === "redis-server" ? [...args, "--dir", dir] : args, { stdio: ["ignore", "pipe", "pipe"], cwd: dir });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  let spawnError: Error | undefined;
  child.once("error", (error) => (spawnError = error));
  child.stdout!.on("data", (chunk: Buffer) => (output = (output + chunk.toString()).slice(-4000)));
  child.stderr!.on("data", (chunk: Buffer) => (output = (output + chunk.toString()).slice(-4000)));
  const killOnExit = () => child.kill("SIGKILL");
  process.on("exit", killOnExit);
  let stopped = false;
  const running = () => child.exitCode === null && child.signalCode === null && !spawnError;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    process.off("exit", killOnExit);
    if (running()) {
      child.kill("SIGCONT"); // a paused server cannot act on SIGTERM
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), stopTimeoutMs);
      await exited;
      clearTimeout(timer);
    }
    await rm(dir, { recursive: true, force: true });
  };
  const kill = async () => {
    if (running()) {
      child.kill("SIGKILL");
      await exited;
    }
  };
  try {
    const deadline = Date.now() + readyTimeoutMs;
    while (!(await pingOnce(port))) {
      if (spawnError) throw new Error(`cannot start ${binary} (apt-get install redis-server redis-sentinel): ${spawnError.message}`);
      if (child.exitCode !== null) throw new Error(`${binary} exited during startup:\n${output}`);
      if (Date.now() > deadline) throw new Error(`${binary} not ready after ${readyTimeoutMs} ms:\n${output}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    return {
      port,
      pid: child.pid!,
      pause: () => void (running() && child.kill("SIGSTOP")),
      resume: () => void (running() && child.kill("SIGCONT")),
      kill,
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** Sends PING over a raw connection; true on +PONG. */
function pingOnce(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: "127.0.0.1", port });
    let reply = "";
    const finish = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1_000, () => finish(false));
    socket.once("error", () => finish(false));
    socket.once("connect", () => socket.write("PING\r\n"));
    socket.on("data", (chunk) => {
      reply += chunk.toString();
      if (reply.includes("\r\n")) finish(reply.startsWith("+PONG"));
    });
  });
}
