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
  port: number;
  /** Freezes the server (SIGSTOP to the postmaster and every backend): connections stay open, nothing answers. */
  pause(): void;
  /** Lets a paused server go on (SIGCONT). */
  resume(): void;
  /** Makes every new transaction read-only (or writable again), as a standby answers: `SHOW transaction_read_only` follows. */
  setReadOnly(readOnly: boolean): Promise<void>;
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
  // runuser stops itself when the server it waits for is stopped, and waits stopped until it is
  // continued: it is resumed with the server, or the server's exit would never be reaped.
  const signalAll = (signal: NodeJS.Signals) => {
    const postmaster = postmasterPid(dataDir);
    const pids = postmaster === undefined ? [] : [postmaster, ...childrenOf(postmaster)];
    if (asRoot && child?.pid) pids.push(child.pid);
    for (const pid of pids) killQuietly(pid, signal);
  };
  const killOnExit = () => child?.pid && killQuietly(postmasterPid(dataDir) ?? child.pid, "SIGKILL");

  const stop = async () => {
    if (stopped) return;
    stopped = true;
    process.off("exit", killOnExit);
    if (child && child.exitCode === null && child.signalCode === null) {
      const pid = postmasterPid(dataDir);
      signalAll("SIGCONT"); // a paused server cannot shut down
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
    const setReadOnly = async (readOnly: boolean) => {
      const client = new pg.Client({ connectionString: adminUri });
      await client.connect();
      try {
        await client.query(`ALTER SYSTEM SET default_transaction_read_only = ${readOnly ? "on" : "off"}`);
        await client.query("SELECT pg_reload_conf()");
      } finally {
        await client.end();
      }
    };
    return { uri, createDatabase, port, pause: () => signalAll("SIGSTOP"), resume: () => signalAll("SIGCONT"), setReadOnly, stop };
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

/** The processes whose parent is `parent` (the postmaster's backends and workers). */
function childrenOf(parent: number): number[] {
  const children: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      // pid (comm) state ppid …: comm may hold spaces, so read after the last ")".
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid === parent) children.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return children;
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
