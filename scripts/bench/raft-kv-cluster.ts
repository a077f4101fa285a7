/**
 * Starts and kills raft-kv server processes on loopback, for the real-process test and the
 * benchmark. Creates the cluster CA in `<rootDir>/ca`; each member's data lives in
 * `<rootDir>/<id>`. Every process it starts is tracked so {@link RaftKvCluster.stopAll} can end them.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { createServer, type AddressInfo, type Server } from "node:net";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { createClusterCa } from "../../src/cluster/identity/ca.js";
import { formatMembers, type MemberAddress } from "./raft-kv-members.js";

const serverPath = fileURLToPath(new URL("./raft-kv-server.ts", import.meta.url));
const readyTimeoutMs = 30_000;

export interface RaftKvClusterOptions {
  readonly rootDir: string;
  readonly ids?: readonly string[];
  readonly tickMs?: number;
  readonly heartbeatTicks?: number;
  readonly electionTicks?: number;
  readonly snapshotEntries?: number;
  /** Extra node flags for every member, e.g. ["--cpu-prof", "--cpu-prof-dir=/tmp/prof"]. */
  readonly nodeArgs?: readonly string[];
  /** Lines of each member's stderr kept for failure reports. */
  readonly stderrLinesMax?: number;
}

/** Free TCP ports on 127.0.0.1, found by binding port 0 and releasing it. */
export async function freeLoopbackPorts(count: number): Promise<number[]> {
  const servers: Server[] = [];
  for (let i = 0; i < count; i++) {
    servers.push(
      await new Promise<Server>((resolve, reject) => {
        const server = createServer();
        server.once("error", reject);
        server.listen(0, "127.0.0.1", () => resolve(server));
      }),
    );
  }
  const ports = servers.map((server) => (server.address() as AddressInfo).port);
  await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
  return ports;
}

export class RaftKvCluster {
  readonly members: MemberAddress[] = [];
  private readonly processes = new Map<string, ChildProcess>();
  private readonly stderrTails = new Map<string, string[]>();

  private constructor(private readonly options: RaftKvClusterOptions) {}

  /** Prepares ports, the CA and directories; starts nothing. */
  static async create(options: RaftKvClusterOptions): Promise<RaftKvCluster> {
    const cluster = new RaftKvCluster(options);
    const ids = options.ids ?? ["a", "b", "c"];
    const ports = await freeLoopbackPorts(ids.length * 2);
    ids.forEach((id, i) => cluster.members.push({ id, raftAddress: `127.0.0.1:${ports[2 * i]}`, kvAddress: `127.0.0.1:${ports[2 * i + 1]}` }));
    const caDir = join(options.rootDir, "ca");
    mkdirSync(caDir, { recursive: true });
    const ca = createClusterCa({ commonName: "raft-kv test CA" });
    writeFileSync(join(caDir, "ca-cert.pem"), ca.certPem);
    writeFileSync(join(caDir, "ca-key.pem"), ca.keyPem, { mode: 0o600 });
    return cluster;
  }

  isRunning(id: string): boolean {
    return this.processes.has(id);
  }

  /** Process ids of the running members (for CPU accounting). */
  pids(): number[] {
    return [...this.processes.values()].flatMap((child) => (child.pid === undefined ? [] : [child.pid]));
  }

  /** Starts one member and resolves once it prints READY. */
  async start(id: string): Promise<void> {
    if (this.processes.has(id)) return;
    const o = this.options;
    const args = [
      ...(o.nodeArgs ?? []),
      "--import",
      "tsx",
      serverPath,
      "--id",
      id,
      "--data-dir",
      join(o.rootDir, id),
      "--ca-dir",
      join(o.rootDir, "ca"),
      "--members",
      formatMembers(this.members),
      "--tick-ms",
      String(o.tickMs ?? 10),
      "--heartbeat-ticks",
      String(o.heartbeatTicks ?? 10),
      "--election-ticks",
      String(o.electionTicks ?? 100),
      "--snapshot-entries",
      String(o.snapshotEntries ?? 10_000),
    ];
    const child = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "pipe"] });
    this.processes.set(id, child);
    const tail: string[] = [];
    this.stderrTails.set(id, tail);
    child.stderr!.setEncoding("utf8");
    child.stderr!.on("data", (chunk: string) => {
      tail.push(...chunk.split("\n").filter(Boolean));
      tail.splice(0, Math.max(0, tail.length - (o.stderrLinesMax ?? 500)));
    });
    child.once("exit", () => {
      if (this.processes.get(id) === child) this.processes.delete(id);
    });
    await new Promise<void>((resolve, reject) => {
      let stdout = "";
      const timer = setTimeout(() => reject(new Error(`member ${id} not ready in ${readyTimeoutMs} ms: ${tail.join("\n")}`)), readyTimeoutMs);
      child.stdout!.setEncoding("utf8");
      child.stdout!.on("data", (chunk: string) => {
        stdout += chunk;
        if (stdout.includes("READY ")) {
          clearTimeout(timer);
          resolve();
        }
      });
      child.once("exit", (code, signal) => {
        clearTimeout(timer);
        reject(new Error(`member ${id} exited (${code ?? signal}) before READY: ${tail.join("\n")}`));
      });
    });
  }

  async startAll(): Promise<void> {
    await Promise.all(this.members.map((m) => this.start(m.id)));
  }

  /** Kills one member with SIGKILL (no clean shutdown) and waits for it to exit. */
  async kill(id: string): Promise<void> {
    const child = this.processes.get(id);
    if (!child) return;
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill("SIGKILL");
    await exited;
  }

  /** Sends a signal to one member's process (SIGSTOP freezes it with its sockets open; SIGCONT resumes it). */
  signal(id: string, signal: NodeJS.Signals): void {
    this.processes.get(id)?.kill(signal);
  }

  /** Recent stderr of a member (for failure reports). */
  stderrTail(id: string): string[] {
    return [...(this.stderrTails.get(id) ?? [])];
  }

  async stopAll(): Promise<void> {
    await Promise.all([...this.processes.keys()].map((id) => this.kill(id)));
  }
}
