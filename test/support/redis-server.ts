/**
 * Starts a throwaway Redis for tests: Debian's `redis-server` on an ephemeral 127.0.0.1 port,
 * without persistence (`--save "" --appendonly no`), its working directory a temp directory.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { createConnection } from "node:net";
import { unusedPort } from "./ports.js";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** A running test server; `stop` is idempotent and always removes the temp directory. */
export interface RedisServer {
  /** redis://127.0.0.1:<port> */
  uri: string;
  port: number;
  stop(): Promise<void>;
}

const readyTimeoutMs = 15_000;
const stopTimeoutMs = 5_000;

/** Starts redis-server; call `stop` in an `after` hook. */
export async function startRedisServer(): Promise<RedisServer> {
  const dir = await mkdtemp(join(tmpdir(), "redis-test-"));
  const port = await unusedPort();
  let output = "";
  const child: ChildProcess = spawn(
    "redis-server",
    ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir, "--daemonize", "no"],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  let spawnError: Error | undefined;
  child.once("error", (error) => (spawnError = error));
  child.stdout!.on("data", (chunk: Buffer) => (output = (output + chunk.toString()).slice(-4000)));
  child.stderr!.on("data", (chunk: Buffer) => (output = (output + chunk.toString()).slice(-4000)));
  const killOnExit = () => child.kill("SIGKILL");
  process.on("exit", killOnExit);
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    process.off("exit", killOnExit);
    if (child.exitCode === null && child.signalCode === null && !spawnError) {
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), stopTimeoutMs);
      await exited;
      clearTimeout(timer);
    }
    await rm(dir, { recursive: true, force: true });
  };
  try {
    const deadline = Date.now() + readyTimeoutMs;
    while (!(await pingOnce(port))) {
      if (spawnError) throw new Error(`cannot start redis-server (apt-get install redis-server): ${spawnError.message}`);
      if (child.exitCode !== null) throw new Error(`redis-server exited during startup:\n${output}`);
      if (Date.now() > deadline) throw new Error(`redis-server not ready after ${readyTimeoutMs} ms:\n${output}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    return { uri: `redis://127.0.0.1:${port}`, port, stop };
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
