/**
 * Starts a throwaway PostgreSQL cluster for tests: initdb into a temp directory, the server on an
 * ephemeral 127.0.0.1 port with its unix socket inside the temp directory and `fsync=on`, and one
 * database. Debian's binaries are found under /usr/lib/postgresql/<version>/bin. initdb and the
 * server refuse to run as root, so as root both run as the `postgres` user (runuser).
 */
import { unusedPort } from "./ports.js";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { chownSync, existsSync, readdirSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";

/** A running test server; `stop` is idempotent and always removes the temp directory. */
export interface PostgresServer {
  /** Connection URI of the created database, e.g. postgres://postgres@127.0.0.1:5433/cloud_test. */
  uri: string;
  /** Connection URI of another, freshly created database on the same server. */
  createDatabase(name: string): Promise<string>;
  stop(): Promise<void>;
}

const readyTimeoutMs = 30_000;
const stopTimeoutMs = 10_000;

function findBinDir(): string {
  const root = "/usr/lib/postgresql";
  const versions = existsSync(root) ? readdirSync(root).filter((v) => existsSync(join(root, v, "bin", "initdb"))) : [];
  versions.sort((a, b) => Number(b) - Number(a));
  if (versions.length === 0) throw new Error("PostgreSQL server binaries not found under /usr/lib/postgresql (apt-get install postgresql)");
  return join(root, versions[0], "bin");
}

/** A port the kernel just handed out on 127.0.0.1 (free unless someone races us for it). */
export function ephemeralPort(): Promise<number> {
  return unusedPort();
}

const asRoot = process.getuid?.() === 0;

function command(binary: string, args: string[]): [string, string[]] {
  return asRoot ? ["runuser", ["-u", "postgres", "--", binary, ...args]] : [binary, args];
}

/** Starts a server and creates database `database`; call `stop` in an `after` hook. */
export async function startPostgresServer(options: { database?: string } = {}): Promise<PostgresServer> {
  const database = options.database ?? "cloud_test";
  const binDir = findBinDir();
  const dir = await mkdtemp(join(tmpdir(), "pg-test-"));
  const dataDir = join(dir, "data");
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();
  let stopped = false;
  const killOnExit = () => child?.pid && killQuietly(postmasterPid(dataDir) ?? child.pid, "SIGKILL");

  const stop = async () => {
    if (stopped) return;
    stopped = true;
    process.off("exit", killOnExit);
    if (child && child.exitCode === null && child.signalCode === null) {
      const pid = postmasterPid(dataDir);
      killQuietly(pid ?? child.pid!, "SIGINT"); // fast shutdown: roll back clients, checkpoint, exit
      const timer = setTimeout(() => killQuietly(pid ?? child!.pid!, "SIGKILL"), stopTimeoutMs);
      await exited;
      clearTimeout(timer);
    }
    await rm(dir, { recursive: true, force: true });
  };

  try {
    if (asRoot)
      chownSync(
        dir,
        Number(spawnSync("id", ["-u", "postgres"]).stdout.toString().trim()),
        Number(spawnSync("id", ["-g", "postgres"]).stdout.toString().trim()),
      );
    const [initCmd, initArgs] = command(join(binDir, "initdb"), [
      "-D",
      dataDir,
      "-U",
      "postgres",
      "-A",
      "trust",
      "-E",
      "UTF8",
      "--locale=C.UTF-8",
      "--no-sync",
    ]);
    const init = spawnSync(initCmd, initArgs, { encoding: "utf8", timeout: readyTimeoutMs });
    if (init.status !== 0) throw new Error(`initdb failed: ${init.stderr || init.stdout || init.error?.message}`);
    const port = await ephemeralPort();
    const [serverCmd, serverArgs] = command(join(binDir, "postgres"), [
      "-D",
      dataDir,
      "-p",
      String(port),
      "-c",
      "listen_addresses=127.0.0.1",
      "-c",
      `unix_socket_directories=${dir}`,
      "-c",
      "fsync=on",
      "-c",
      "shared_buffers=16MB",
      "-c",
      "max_connections=50",
    ]);
    let output = "";
    child = spawn(serverCmd, serverArgs, { stdio: ["ignore", "pipe", "pipe"] });
    child.stdout!.on("data", (chunk: Buffer) => (output = (output + chunk.toString()).slice(-4000)));
    child.stderr!.on("data", (chunk: Buffer) => (output = (output + chunk.toString()).slice(-4000)));
    const running = child;
    exited = new Promise((resolve) => running.once("exit", () => resolve()));
    process.on("exit", killOnExit);
    const adminUri = `postgres://postgres@127.0.0.1:${port}/postgres`;
    await waitUntilReady(adminUri, running, () => output);
    const createDatabase = async (name: string) => {
      if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`invalid database name ${name}`);
      const client = new pg.Client({ connectionString: adminUri });
      await client.connect();
      try {
        await client.query(`CREATE DATABASE ${name}`);
      } finally {
        await client.end();
      }
      return `postgres://postgres@127.0.0.1:${port}/${name}`;
    };
    const uri = await createDatabase(database);
    return { uri, createDatabase, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

function postmasterPid(dataDir: string): number | undefined {
  try {
    const pid = Number(readFileSync(join(dataDir, "postmaster.pid"), "utf8").split("\n")[0]);
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

function killQuietly(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // already gone
  }
}

async function waitUntilReady(uri: string, child: ChildProcess, output: () => string): Promise<void> {
  const deadline = Date.now() + readyTimeoutMs;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`postgres exited during startup:\n${output()}`);
    const client = new pg.Client({ connectionString: uri, connectionTimeoutMillis: 1_000 });
    try {
      await client.connect();
      await client.query("SELECT 1");
      await client.end();
      return;
    } catch {
      await client.end().catch(() => undefined);
    }
    if (Date.now() > deadline) throw new Error(`postgres not ready after ${readyTimeoutMs} ms:\n${output()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
